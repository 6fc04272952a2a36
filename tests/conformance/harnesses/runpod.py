"""Conformance harness for the runpod adapter: the adapter's own REST client against the
RunPod v2 fake in tests/fakes/runpod_api.py (a real sshd behind each running pod).

Errors are injected as RunPod answers them (problem JSON on the primitive's next call):

================  ==============================================  ==========================
kind              how                                             primitives
================  ==============================================  ==========================
Transient         429 with Retry-After                            every primitive
Credentials       401 invalid bearer token                        every primitive
InvalidRequest    plan: 400 (include without product);            plan, create
                  create: 422 with validation errors
Capacity          create: 400 "no longer any instances available" create
Quota             create: 402 insufficient balance                create
Unavailable       create: 403 pool access                         create
Failed            a 200 whose body is not JSON                    plan, observe
================  ==============================================  ==========================

prepare and cleanup read the account's SSH keys (``GET /v2/account/ssh-keys``) before
they write them: the injected error answers that read.
"""

from __future__ import annotations

import uuid
from typing import Iterable, List, Set

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ErrorKind, InstanceSpec, Location, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.runpod import RunpodProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.conformance.harness import FakeApiHarness  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.runpod_api import RunpodApiFake, problem  # noqa: E402

K = ErrorKind
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f conf@runpod"
CALLS = {"plan": "catalog.gpus", "prepare": "ssh_keys.get", "create": "pods.create", "observe": "pods.list",
         "delete": "pods.delete", "cleanup": "ssh_keys.get"}


class RunpodHarness(FakeApiHarness):
    cloud = "runpod"

    def __init__(self, root: str):
        self.fake = RunpodApiFake(root)
        self.provider = RunpodProvider({"api_url": self.fake.api_url, "api_key": self.fake.token},
                                       journal_id=uuid.uuid4().hex)
        self.request = ResourceRequest(vm_name="conf-runpod", gpu="RTX4090", gpu_count=1)
        self.spec = InstanceSpec(
            vm_name="conf-runpod", allowed_cidrs=["198.51.100.7/32"],
            ssh_public_key=KEY)

    def error_kinds(self) -> Iterable[str]:
        return (K.TRANSIENT, K.CAPACITY, K.QUOTA, K.UNAVAILABLE, K.FAILED, K.INVALID_REQUEST, K.CREDENTIALS)

    def inject_error(self, primitive: str, kind: str) -> None:
        if primitive not in ("plan", "prepare", "create", "observe", "delete", "cleanup"):
            raise ValueError("unknown primitive %r" % (primitive,))
        key = CALLS[primitive]
        if kind == K.TRANSIENT:
            self.fake.rate_limit(key, retry_after=7)
        elif kind == K.CREDENTIALS:
            self.fake.fail_next(key, problem(401, "invalid bearer token"))
        elif (primitive, kind) == ("plan", K.INVALID_REQUEST):
            self.fake.fail_problem(key, 400, "product is required with include=AVAILABILITY")
        elif (primitive, kind) == ("create", K.INVALID_REQUEST):
            self.fake.fail_problem(key, 422, "Request validation failed.",
                                   errors=["$: additional properties 'bogus' not allowed"])
        elif (primitive, kind) == ("create", K.CAPACITY):
            self.fake.fail_capacity()
        elif (primitive, kind) == ("create", K.QUOTA):
            self.fake.fail_balance()
        elif (primitive, kind) == ("create", K.UNAVAILABLE):
            self.fake.fail_pool_access()
        elif kind == K.FAILED and primitive in ("plan", "observe"):
            self.fake.malformed(key)
        else:
            pytest.skip("the runpod fake has no honest way to make %s raise %s" % (primitive, kind))

    def settle(self, location: Location, instance_id: str) -> None:
        self.fake.settle(instance_id)

    def resources(self) -> Set[str]:
        with self.fake.lock:
            return ({"pod:%s" % pod_id for pod_id in self.fake.pods}
                    | {"account-key:%s" % key for key in self.fake.account_keys})

    def instance_ids(self) -> List[str]:
        return self.fake.live_pod_ids()

    def unknown_instance_id(self) -> str:
        return "zzzzzzzzzzzzzz"


def make_harness(tmp_path_factory) -> RunpodHarness:
    return RunpodHarness(str(tmp_path_factory.mktemp("runpod")))
