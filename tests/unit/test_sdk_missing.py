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

SCRIPT = textwrap.dedent("""
    import json, sys

    BLOCKED = tuple(sys.argv[1].split(","))

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name in BLOCKED or name.startswith(tuple(b + "." for b in BLOCKED)):
                raise ImportError("No module named %r (hidden by the test)" % name)
            return None

    sys.meta_path.insert(0, Block())
    from ansible_collections.gpuprov.cloud.plugins.module_utils import primitives
    cloud = sys.argv[2]
    result = primitives.offers({"clouds": [cloud], "gpu": "H100", "gpu_count": 1,
                                "cloud_options": {cloud: json.loads(sys.argv[3])}})
    print(json.dumps({"result": result, "loaded": sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)}))
""")

# cloud: (the packages hidden, the options offers needs to get as far as the SDK, what the message names)
CASES = {
    "aws": ("boto3,botocore", {}, "requires boto3"),
    "gcp": ("google", {"project": "p"}, "requires google-cloud-compute"),
    "docker": ("docker", {}, "(pip install docker)"),
    "nebius": ("nebius", {"project_id": "project-e00unit", "iam_token": "t"}, "requires the nebius Python SDK (nebius)"),
    # the REST clouds: requests is their one third-party package
    "digitalocean": ("requests", {"api_key": "k"}, "requires requests"),
    "hyperstack": ("requests", {"api_key": "k"}, "requires requests"),
    "lambda": ("requests", {"api_key": "k"}, "requires requests"),
    "massedcompute": ("requests", {"api_key": "k"}, "requires requests"),
    "primeintellect": ("requests", {"api_key": "k"}, "requires requests"),
    "runpod": ("requests", {"api_key": "k"}, "requires requests"),
    "verda": ("requests", {"client_id": "i", "client_secret": "s"}, "requires requests"),
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
    assert named in error["msg"] and "pip install" in error["msg"], error["msg"]
    assert "Traceback" not in done.stderr and "NameError" not in result["msg"]
    assert answer["loaded"] == []   # the hidden package really was not there
