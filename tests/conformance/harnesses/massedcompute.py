"""Conformance harness for the massedcompute adapter: the adapter's own requests code
against the Massed Compute API fake in tests/fakes/massedcompute_api.py (a real sshd
behind each instance).

Errors are injected as the fake answers them, on the first request each primitive makes:

================  ==================================================  =====================
kind              how                                                 primitives
================  ==================================================  =====================
Transient         HTTP 429 with Retry-After                           all six
Credentials       HTTP 401                                            all six
InvalidRequest    HTTP 400 "The given data was invalid."              prepare, create
Capacity          HTTP 400 "Out of stock: no capacity available..."   create
Quota             HTTP 403 "Instance limit exceeded..."               create
================  ==================================================  =====================
"""

from __future__ import annotations

import uuid
from typing import List

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.massedcompute import (  # noqa: E402
    MassedComputeProvider,
)
from ansible_collections.gpuprov.cloud.tests.conformance.harness import LeverHarness  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.massedcompute_api import MassedComputeApiFake  # noqa: E402

K = ErrorKind
# the fake's route key of each primitive's first request
FIRST_CALL = {
    "plan": "gpu-inventory",
    "prepare": "ssh-keys.list",
    "create": "instance.launch",
    "observe": "instance.list",
    "delete": "instance.list",
    "cleanup": "ssh-keys.list",
}


class MassedComputeHarness(LeverHarness):
    cloud = "massedcompute"
    first_call = FIRST_CALL
    read_posts = ("token.validation",)

    def __init__(self, root: str):
        self.fake = MassedComputeApiFake(root)
        # ssh_user unset: the adapter logs in as the username the fake reports (the sshd's user)
        self.provider = MassedComputeProvider({
            "api_url": self.fake.api_url, "api_key": self.fake.token, "ssh_port": self.fake.ssh_port,
            "request_timeout_s": 20}, journal_id=uuid.uuid4().hex)
        self.request = ResourceRequest(vm_name="conf-massed", gpu="L40", gpu_count=1)
        self.spec = InstanceSpec(
            vm_name="conf-massed", allowed_cidrs=["198.51.100.7/32"],
            ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtY29uZm9ybWFuY2U conf@massed",
            boot_script=BootScript("#!/bin/sh\necho gpuprov conformance", {"GPUPROV": "1"}))

    def unknown_instance_id(self) -> str:
        return str(uuid.uuid4())

    def instance_ids(self) -> List[str]:
        return sorted(i["uuid"] for i in self.fake.live() if i["status"] != "terminating")


def make_harness(tmp_path_factory) -> MassedComputeHarness:
    return MassedComputeHarness(str(tmp_path_factory.mktemp("massedcompute-fake")))
