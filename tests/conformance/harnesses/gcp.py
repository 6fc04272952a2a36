"""Conformance harness for the gcp adapter: the real google-cloud-compute client
(REST transport) against the Compute fake in tests/fakes/gcp_compute.py.

Each harness owns a fresh fake (its own port and state). Errors are injected as
the API reports them: an HTTP error body on the primitive's next request, or a
zone Operation that finishes DONE with ``error.errors[]``.

================  =================================================  ==============================
kind              how                                                primitives
================  =================================================  ==============================
Transient         HTTP 429 rateLimitExceeded                         all six
Credentials       HTTP 403 forbidden (permission denied)             all six
InvalidRequest    HTTP 400 invalid                                   plan, prepare, create, observe
Quota             create: operation QUOTA_EXCEEDED (NVIDIA_L4_GPUS,  prepare, create
                  region); prepare: HTTP 403 quotaExceeded
                  (Quota 'FIREWALLS' exceeded)
Capacity          operation ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS create
Unavailable       HTTP 404 notFound for the zone's accelerator type  create
Failed            operation error with a code the table does not     create
                  know (and no httpErrorStatusCode)
================  =================================================  ==============================

Other combinations skip with the reason. SDK read retries are off
(``read_retry_s: 0``) so one injected fault is one classified error.
"""

from __future__ import annotations

import uuid
from typing import Iterable, List, Optional, Set, Tuple

import pytest

pytest.importorskip("google.cloud.compute_v1")
pytest.importorskip("pytest_httpserver")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, Location, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import GcpProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.conformance.harness import Harness  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.gcp_compute import GcpComputeFake  # noqa: E402

K = ErrorKind
ALL = ("plan", "prepare", "create", "observe", "delete", "cleanup")
# the fake's call keys that each primitive's first request can be
CALLS = {
    "plan": ("machineTypes.aggregatedList", "acceleratorTypes.aggregatedList"),
    "prepare": ("firewalls.get", "firewalls.insert", "firewalls.patch", "images.getFromFamily"),
    "create": ("instances.insert",),
    "observe": ("instances.list",),
    "delete": ("instances.delete",),
    "cleanup": ("firewalls.delete",),
}
HTTP_FAULTS = {
    K.TRANSIENT: (ALL, 429, "rateLimitExceeded", "Rate Limit Exceeded"),
    K.CREDENTIALS: (ALL, 403, "forbidden", "Required 'compute.instances.create' permission for "
                                           "'projects/gpuprov-test'"),
    K.INVALID_REQUEST: (("plan", "prepare", "create", "observe"), 400, "invalid",
                        "Invalid value for field 'resource': ''. Invalid request."),
}


class GcpHarness(Harness):
    cloud = "gcp"

    def __init__(self):
        self.fake = GcpComputeFake()
        self.fake.delete_lag = 2  # a deleted instance reads STOPPING twice, as GCP's do, until settle_deleted
        self.provider = GcpProvider({"project": self.fake.project, "api_endpoint": self.fake.url,
                                     "read_retry_s": 0}, journal_id=uuid.uuid4().hex)
        self.request = ResourceRequest(vm_name="conf-gcp", gpu="L4", gpu_count=1)
        self.spec = InstanceSpec(
            vm_name="conf-gcp", allowed_cidrs=["198.51.100.7/32"],
            ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtY29uZm9ybWFuY2U conf@gcp",
            boot_script=BootScript("#!/bin/sh\necho gpuprov conformance", {"GPUPROV": "1"}))

    def error_kinds(self) -> Iterable[str]:
        return (K.TRANSIENT, K.CAPACITY, K.QUOTA, K.UNAVAILABLE, K.FAILED, K.INVALID_REQUEST, K.CREDENTIALS)

    def inject_error(self, primitive: str, kind: str) -> None:
        if primitive not in CALLS:
            raise ValueError("unknown primitive %r" % (primitive,))
        if kind in HTTP_FAULTS and primitive in HTTP_FAULTS[kind][0]:
            _prims, status, reason, message = HTTP_FAULTS[kind]
            self.fake.fail_next(CALLS[primitive], status, reason, message)
        elif (primitive, kind) == ("create", K.QUOTA):
            self.fake.fail_next_insert("QUOTA_EXCEEDED", quota_metric="NVIDIA_L4_GPUS")
        elif (primitive, kind) == ("prepare", K.QUOTA):
            self.fake.fail_next(CALLS["prepare"], 403, "quotaExceeded",
                                "Quota 'FIREWALLS' exceeded.  Limit: 200.0 globally.")
        elif (primitive, kind) == ("create", K.CAPACITY):
            self.fake.fail_next_insert("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS")
        elif (primitive, kind) == ("create", K.UNAVAILABLE):
            self.fake.fail_next("instances.insert", 404, "notFound",
                                "The resource 'projects/%s/zones/us-central1-a/acceleratorTypes/nvidia-l4' "
                                "was not found" % self.fake.project)
        elif (primitive, kind) == ("create", K.FAILED):
            self.fake.fail_next_insert("GPUPROV_UNCLASSIFIED_ERROR", message="Something no table knows.",
                                       http_status=0)
        else:
            pytest.skip("the gcp fake has no honest way to make %s raise %s" % (primitive, kind))

    def clear_errors(self) -> None:
        self.fake.clear_faults()

    def settle(self, location: Location, instance_id: str) -> None:
        self.fake.settle(location.zone, instance_id)

    def settle_deleted(self, location: Location, instance_id: str) -> None:
        self.fake.finish_delete(location.zone, instance_id)

    def create_unreachable(self, spec: InstanceSpec) -> Optional[str]:
        """An instance that the API has accepted and not yet started: PROVISIONING, no natIP."""
        fresh = self.new_provider()
        offer = fresh.plan(self.request)[0]
        return fresh.create(offer, fresh.prepare(offer, spec), spec)

    def ignore_paging(self) -> None:
        self.fake.ignore_paging = True

    def page_requests(self) -> List[Tuple[str, bool]]:
        return [(c["key"], not c["args"].get("pageToken")) for c in list(self.fake.calls)
                if c["key"].endswith((".list", ".aggregatedList"))]

    def mutating_requests(self) -> List[str]:
        return [c["key"] for c in list(self.fake.calls) if c["method"] != "GET" and not c["key"].endswith(".wait")]

    def resources(self) -> Set[str]:
        return ({"instance:%s/%s" % key for key in self.fake.instances}
                | {"firewall:%s" % name for name in self.fake.firewalls})

    def instance_ids(self) -> List[str]:
        return sorted(name for (_zone, name), inst in self.fake.instances.items() if inst.get("_deleting") is None)

    def close(self) -> None:
        self.fake.stop()


def make_harness(tmp_path_factory) -> GcpHarness:
    return GcpHarness()
