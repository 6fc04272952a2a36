"""Conformance harness for the lambda adapter: the adapter's own requests code against
the Lambda API fake in tests/fakes/lambda_api.py (real sshd behind each instance).

Errors are injected as Lambda answers them, on the first request each primitive makes:

================  ==================================================  =====================
kind              how                                                 primitives
================  ==================================================  =====================
Transient         HTTP 429 with Retry-After                           all six
Credentials       HTTP 401 global/invalid-api-key                     all six
InvalidRequest    HTTP 400 global/invalid-parameters                  prepare, create
Capacity          HTTP 400 instance-operations/launch/insufficient-   create
                  capacity
Quota             HTTP 400 global/quota-exceeded                      create
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
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud import LambdaProvider  # noqa
from ansible_collections.gpuprov.cloud.tests.conformance.harness import LeverHarness  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.lambda_api import LambdaApiFake  # noqa: E402

K = ErrorKind
ALL = ("plan", "prepare", "create", "observe", "delete", "cleanup")
# the fake's route key of each primitive's first request
FIRST_CALL = {
    "plan": "instance-types.list",
    "prepare": "ssh-keys.list",
    "create": "instances.launch",
    "observe": "instances.list",
    "delete": "instances.list",
    "cleanup": "instances.list",
}


class LambdaHarness(LeverHarness):
    cloud = "lambda"
    first_call = FIRST_CALL

    def __init__(self, root: str):
        self.fake = LambdaApiFake(root)
        self.provider = LambdaProvider({
            "api_url": self.fake.api_url, "api_key": self.fake.token, "ssh_user": getpass.getuser(),
            "ssh_port": self.fake.ssh_port, "request_timeout_s": 20}, journal_id=uuid.uuid4().hex)
        self.request = ResourceRequest(vm_name="conf-lambda", gpu="A10", gpu_count=1)
        self.spec = InstanceSpec(
            vm_name="conf-lambda", allowed_cidrs=["198.51.100.7/32"],
            ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtY29uZm9ybWFuY2U conf@lambda",
            boot_script=BootScript("#!/bin/sh\necho gpuprov conformance", {"GPUPROV": "1"}))

    def unknown_instance_id(self) -> str:
        return uuid.uuid4().hex

    def instance_ids(self) -> List[str]:
        return sorted(i["id"] for i in self.fake.live() if i["status"] != "terminating")


def make_harness(tmp_path_factory) -> LambdaHarness:
    return LambdaHarness(str(tmp_path_factory.mktemp("lambda-fake")))
