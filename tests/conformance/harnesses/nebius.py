"""Conformance harness for the nebius adapter: the adapter's own SDK calls (the official
``nebius`` package) against the gRPC fake in tests/fakes/nebius_grpc.py, plaintext on a
loopback port (real sshd behind each instance).

Errors are injected as Nebius answers them (gRPC status + ServiceError detail), on the
first call each primitive makes:

================  ==================================================  =====================
kind              how                                                 primitives
================  ==================================================  =====================
Transient         UNAVAILABLE                                         all six
Credentials       UNAUTHENTICATED                                     all six
InvalidRequest    INVALID_ARGUMENT + BadRequest                       prepare, create
Capacity          RESOURCE_EXHAUSTED + NotEnoughResources             create
Quota             RESOURCE_EXHAUSTED + QuotaFailure                   create
================  ==================================================  =====================
"""

from __future__ import annotations

import getpass
import uuid
from typing import List, Optional, Tuple

import pytest

pytest.importorskip("nebius")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import NebiusProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.conformance.harness import LeverHarness  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.nebius_grpc import NebiusGrpcFake  # noqa: E402

K = ErrorKind
# the fake's method key of each primitive's first call
FIRST_CALL = {
    "plan": "platforms.list",
    "prepare": "subnets.list",
    "create": "instances.create",
    "observe": "instances.get_by_name",
    "delete": "instances.delete",
    "cleanup": "security_groups.get_by_name",
}


class NebiusHarness(LeverHarness):
    cloud = "nebius"
    first_call = FIRST_CALL
    transient = "unavailable"

    def __init__(self, root: str):
        self.fake = NebiusGrpcFake(root)
        self.provider = NebiusProvider({
            "api_endpoint": self.fake.api_endpoint, "api_insecure": True, "iam_token": self.fake.token,
            "project_id": self.fake.project_id, "region": self.fake.region, "ssh_user": getpass.getuser(),
            "ssh_port": self.fake.ssh_port, "request_timeout_s": 20}, journal_id=uuid.uuid4().hex)
        self.request = ResourceRequest(vm_name="conf-nebius", gpu="H100", gpu_count=1)
        self.spec = InstanceSpec(
            vm_name="conf-nebius", allowed_cidrs=["198.51.100.7/32"],
            ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtY29uZm9ybWFuY2U conf@nebius",
            boot_script=BootScript("#!/bin/sh\necho gpuprov conformance", {"GPUPROV": "1"}))

    def unknown_instance_id(self) -> str:
        return "computeinstance-e00" + uuid.uuid4().hex[:16]

    def instance_ids(self) -> List[str]:
        return sorted(i["id"] for i in self.fake.live() if i["state"] != "DELETING")

    def ignore_paging(self) -> None:
        self.fake.ignore_paging = True

    def page_requests(self) -> List[Tuple[str, bool]]:
        with self.fake.lock:
            calls = list(self.fake.calls)
        return [(key, not getattr(request, "page_token", "")) for key, request in calls if key.endswith(".list")]

    def create_shutdown_setting(self) -> Optional[str]:
        with self.fake.lock:
            creates = [request for key, request in self.fake.calls if key == "instances.create"]
        # RECOVER is the enum's zero: left out and given are the same request on the wire.
        policy = creates[-1].spec.recovery_policy.name if creates else "RECOVER"
        return None if policy == "RECOVER" else "recovery_policy=%s" % policy

    def mutating_requests(self) -> List[str]:
        with self.fake.lock:
            calls = list(self.fake.calls)
        return [key for key, _request in calls if key.rsplit(".", 1)[-1] in ("create", "update", "delete")]


def make_harness(tmp_path_factory) -> NebiusHarness:
    return NebiusHarness(str(tmp_path_factory.mktemp("nebius-fake")))
