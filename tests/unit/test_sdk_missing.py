"""A cloud whose Python SDK (or, for the REST clouds, ``requests``) is not installed: ``offers`` on it fails
with the one clear message (providers/common.require_sdk, rest.RestClient) naming what to install, never a
traceback. Each case runs ``offers`` (primitives.offers: registry.get_provider, then plan) in a fresh
interpreter where the package cannot be imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import COLLECTION_ROOT
from ansible_collections.gpuprov.cloud.tests.unit.test_requirements_files import requirement_names

SCRIPT = textwrap.dedent("""
    import json, sys

    BLOCKED = tuple(sys.argv[1].split(","))

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name in BLOCKED or name.startswith(tuple(b + "." for b in BLOCKED)):
                raise ImportError("No module named %r (hidden by the test)" % name)
            return None

    sys.meta_path.insert(0, Block())
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import primitives
    cloud = sys.argv[2]
    result = primitives.offers({"clouds": [cloud], "gpu": "H100", "gpu_count": 1,
                                "cloud_options": {cloud: json.loads(sys.argv[3])}})
    print(json.dumps({"result": result, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)}))
""")

# cloud: (the packages hidden, the options offers needs to get as far as the SDK, the package the message names)
CASES = {
    "aws": ("boto3,botocore", {}, "boto3"),
    "gcp": ("google", {"project": "p"}, "google-cloud-compute"),
    "docker": ("docker", {}, "docker"),
    "nebius": ("nebius", {"project_id": "project-e00unit", "iam_token": "t"}, "nebius"),
    # the REST clouds: requests is their one third-party package
    "digitalocean": ("requests", {"api_key": "k"}, "requests"),
    "hyperstack": ("requests", {"api_key": "k"}, "requests"),
    "lambda": ("requests", {"api_key": "k"}, "requests"),
    "massedcompute": ("requests", {"api_key": "k"}, "requests"),
    "primeintellect": ("requests", {"api_key": "k"}, "requests"),
    "runpod": ("requests", {"api_key": "k"}, "requests"),
    "verda": ("requests", {"client_id": "i", "client_secret": "s"}, "requests"),
}


@pytest.mark.parametrize("cloud", sorted(CASES))
def test_offers_without_the_sdk_says_what_to_install(cloud):
    hidden, options, named = CASES[cloud]
    done = subprocess.run([sys.executable, "-c", SCRIPT, hidden, cloud, json.dumps(options)], env=dict(os.environ),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr   # no traceback
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    result = answer["result"]
    assert result["failed"] is True, result
    [error] = result["errors"]
    assert error["kind"] == "InvalidRequest" and error["cloud"] == cloud, error
    assert "requires %s" % named in error["msg"], error["msg"]
    # The exact command: this Python's pip, and the cloud's own requirements file in the installed collection
    # (it holds the package, directly or through requirements/base.txt).
    command = "%s -m pip install -r %s" % (sys.executable, os.path.join(COLLECTION_ROOT, "requirements",
                                                                        "%s.txt" % cloud))
    assert command in error["msg"], error["msg"]
    assert named in requirement_names(os.path.join(COLLECTION_ROOT, "requirements", "%s.txt" % cloud))
    assert "Traceback" not in done.stderr and "NameError" not in result["msg"]
    assert answer["loaded"] == []   # the hidden package really was not there


def test_the_vm_action_brings_the_default_clouds_adapter_and_no_other():
    """ansible-playbook imports the vm action once, before it forks a worker per VM: the local cloud's adapter
    comes with it (no worker imports it again), no other cloud's adapter or SDK does."""
    probe = textwrap.dedent("""
        import sys
        import ansible_collections.gpuprov.cloud.plugins.action.vm
        prefix = "ansible_collections.gpuprov.cloud.plugins.module_utils.providers."
        print(sorted(m[len(prefix):] for m in sys.modules if m.startswith(prefix) and m.count(".") == 6))
        print(sorted(m for m in ("boto3", "google", "docker", "nebius", "requests") if m in sys.modules))
    """)
    done = subprocess.run([sys.executable, "-c", probe], env=dict(os.environ), capture_output=True, text=True,
                          timeout=120, check=True)
    adapters, sdks = done.stdout.splitlines()
    assert "'local'" in adapters
    assert not {"'aws'", "'gcp'", "'docker'", "'nebius'", "'lambda_cloud'"} & set(adapters.strip("[]").split(", "))
    assert sdks == "[]"


def test_preloading_an_adapter_that_cannot_load_leaves_the_message_to_get_provider(monkeypatch):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ProviderError
    monkeypatch.setitem(registry.ADAPTERS, "nowhere", ("no_such_adapter", "NowhereProvider"))
    registry.preload("nowhere")   # no exception
    with pytest.raises(ProviderError, match="the nowhere adapter cannot load"):
        registry.get_provider("nowhere")
