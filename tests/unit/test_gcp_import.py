"""gcp.py imports without google-cloud-compute (ansible-test sanity imports module_utils
with no third-party packages) and then refuses construction with a clear message."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import install_command

SCRIPT = textwrap.dedent("""
    import sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "google" or name.startswith("google."):
                raise ImportError("blocked for the test: " + name)
            return None

    sys.meta_path.insert(0, Block())
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import gcp
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ProviderError
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.registry import get_provider
    assert gcp.HAS_GCP is False
    try:
        get_provider("gcp", {"project": "p"})
    except ProviderError as err:
        print(err.kind)
        print(err.msg)
    else:
        raise SystemExit("constructed without the SDK")
    assert not any(m == "google" or m.startswith("google.") for m in sys.modules)
""")


def test_imports_and_refuses_without_the_sdk():
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    kind, msg = done.stdout.strip().split("\n", 1)
    assert kind == "InvalidRequest"
    assert "requires google-cloud-compute" in msg and install_command("google-cloud-compute", "gcp") in msg
