"""Conformance harness for the primeintellect adapter: the adapter's own REST client
against the Prime Intellect API fake in tests/fakes/primeintellect_api.py.

Errors are injected as Prime's API answers them, on the primitive's first request:

================  ==================================================  ==============================
kind              how                                                 primitives
================  ==================================================  ==============================
Transient         HTTP 429 ``{"detail": "Too Many Requests"}`` with   all six
                  Retry-After; HTTP 500
Credentials       HTTP 401 ``{"detail": "API key unauthorized"}``     all six
InvalidRequest    HTTP 422 ``detail`` list of ``{loc, msg, type}``    plan, prepare, create, observe
Quota             HTTP 402 insufficient wallet balance                create
Capacity          HTTP 400 "No capacity available ..."                create
Failed            HTTP 200 with an HTML body (a proxy's page)         plan, prepare, create, observe
================  ==================================================  ==============================

Unavailable has no honest trigger: Prime reports an offer that went away as a refusal
whose text reads as capacity.
"""

from __future__ import annotations

import uuid
from typing import Iterable, List, Optional

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, Location, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.primeintellect import (  # noqa: E402
    PrimeIntellectProvider, catalog,
)
from ansible_collections.gpuprov.cloud.tests.conformance.harness import FakeApiHarness  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import Reply  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.primeintellect_api import PrimeIntellectApiFake  # noqa: E402

K = ErrorKind
ALL = ("plan", "prepare", "create", "observe", "delete", "cleanup")
# the fake's route key of each primitive's first request
FIRST_CALL = {
    "plan": "availability.gpus", "prepare": "ssh_keys.list", "create": "pods.create",
    "observe": "pods.list", "delete": "pods.delete", "cleanup": "ssh_keys.list",
}
FAULTS = {
    K.TRANSIENT: (ALL, Reply(429, {"detail": "Too Many Requests"}, headers={"Retry-After": "3"})),
    K.CREDENTIALS: (ALL, Reply(401, {"detail": "API key unauthorized"})),
    K.INVALID_REQUEST: (("plan", "prepare", "create", "observe"),
                        Reply(422, {"detail": [{"loc": ["query", "page_size"], "msg": "Input should be less than "
                                                "or equal to 100", "type": "less_than_equal"}]})),
    K.QUOTA: (("create",), Reply(402, {"detail": "Insufficient balance in wallet"})),
    K.CAPACITY: (("create",), Reply(400, {"detail": "No capacity available for this configuration"})),
    K.FAILED: (("plan", "prepare", "create", "observe"), Reply(200, raw="<html>502 Bad Gateway</html>")),
}


class PrimeIntellectHarness(FakeApiHarness):
    cloud = "primeintellect"
    paged_listings = {"availability.gpus": ("page", "1"), "pods.list": ("offset", "0"),
                      "ssh_keys.list": ("offset", "0")}

    def __init__(self, root: str):
        self.fake = PrimeIntellectApiFake(root)
        self.provider = PrimeIntellectProvider({"api_url": self.fake.url, "api_key": self.fake.token},
                                               journal_id=uuid.uuid4().hex)
        self.request = ResourceRequest(vm_name="conf-prime", gpu="H100", gpu_count=1)
        self.spec = InstanceSpec(
            vm_name="conf-prime", allowed_cidrs=["198.51.100.7/32"],
            ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtY29uZm9ybWFuY2U conf@prime",
            boot_script=BootScript("#!/bin/sh\necho gpuprov conformance", {"GPUPROV": "1"}))

    def error_kinds(self) -> Iterable[str]:
        return tuple(FAULTS)

    def inject_error(self, primitive: str, kind: str) -> None:
        primitives, reply = FAULTS[kind]
        if primitive not in primitives:
            pytest.skip("the primeintellect fake has no honest way to make %s raise %s" % (primitive, kind))
        self.fake.fail_next(FIRST_CALL[primitive], reply)

    def settle(self, location: Location, instance_id: str) -> None:
        self.fake.settle(instance_id)

    def settle_deleted(self, location: Location, instance_id: str) -> None:
        self.fake.settle_deleted(instance_id)

    def unknown_instance_id(self) -> str:
        return uuid.uuid4().hex

    def create_unreachable(self, spec: InstanceSpec) -> Optional[str]:
        """A pod Prime calls ACTIVE whose sshConnection and ip are still ``[null]``."""
        return self.fake.make_unreachable_pod(catalog.pod_name(spec.vm_name, self.provider.journal_id))

    def instance_ids(self) -> List[str]:
        with self.fake.lock:
            return sorted(i for i, p in self.fake.pods.items() if p["status"] not in ("DELETING", "TERMINATED"))


def make_harness(tmp_path_factory) -> PrimeIntellectHarness:
    return PrimeIntellectHarness(str(tmp_path_factory.mktemp("primeintellect")))
