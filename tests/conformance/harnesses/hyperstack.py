"""Conformance harness for the hyperstack adapter: the adapter's own requests code against
the Hyperstack API fake in tests/fakes/hyperstack_api.py (real sshd behind each VM).

Errors are injected as Hyperstack answers them, on the first request each primitive makes:

================  ==================================================  =====================
kind              how                                                 primitives
================  ==================================================  =====================
Transient         HTTP 429 with Retry-After                           all six
Credentials       HTTP 401 unauthorized                               all six
InvalidRequest    HTTP 400 bad_request                                prepare, create
Capacity          HTTP 400 "... is out of stock ..."                  create
Quota             HTTP 400 "VM quota exceeded ..."                    create
================  ==================================================  =====================
"""

from __future__ import annotations

import getpass
import uuid
from typing import List

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack import HyperstackProvider  # noqa
from ansible_collections.gpuprov.cloud.tests.conformance.harness import LeverHarness  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import HyperstackApiFake  # noqa: E402

K = ErrorKind
# the fake's route key of each primitive's first request
FIRST_CALL = {
    "plan": "flavors.list",
    "prepare": "environments.list",
    "create": "vms.create",
    "observe": "vms.list",
    "delete": "vms.list",
    "cleanup": "environments.list",
}


class HyperstackHarness(LeverHarness):
    cloud = "hyperstack"
    first_call = FIRST_CALL
    paged_listings = {key: ("page", "1") for key in (
        "environments.list", "keypairs.list", "vms.list", "volumes.list", "firewalls.list", "clusters.list")}

    def __init__(self, root: str):
        self.fake = HyperstackApiFake(root)
        self.provider = HyperstackProvider({
            "api_url": self.fake.api_url, "api_key": self.fake.token, "ssh_user": getpass.getuser(),
            "ssh_port": self.fake.ssh_port, "request_timeout_s": 20}, journal_id=uuid.uuid4().hex)
        self.request = ResourceRequest(vm_name="conf-hyperstack", gpu="A100-80GB", gpu_count=1)
        self.spec = InstanceSpec(
            vm_name="conf-hyperstack", allowed_cidrs=["198.51.100.7/32"],
            ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtY29uZm9ybWFuY2U conf@hyperstack",
            boot_script=BootScript("#!/bin/sh\necho gpuprov conformance", {"GPUPROV": "1"}))

    def unknown_instance_id(self) -> str:
        return "999999"

    def instance_ids(self) -> List[str]:
        return sorted(str(i["id"]) for i in self.fake.live() if i["status"] != "DELETING")


def make_harness(tmp_path_factory) -> HyperstackHarness:
    return HyperstackHarness(str(tmp_path_factory.mktemp("hyperstack-fake")))
