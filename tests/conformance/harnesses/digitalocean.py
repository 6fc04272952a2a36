"""Conformance harness for the digitalocean adapter: the adapter's own requests code against
the DigitalOcean API fake in tests/fakes/digitalocean_api.py (real sshd behind each droplet).

Errors are injected as DigitalOcean answers them, on the first request each primitive makes:

================  ==================================================  =====================
kind              how                                                 primitives
================  ==================================================  =====================
Transient         HTTP 429 too_many_requests with retry-after         all six
Credentials       HTTP 401 unauthorized                               all six
InvalidRequest    HTTP 422 "You specified an invalid size ..."        create
Capacity          HTTP 422 "Size is not available in this region."    create
Quota             HTTP 422 "... will exceed your droplet limit"       create
================  ==================================================  =====================
"""

from __future__ import annotations

import getpass
import uuid
from typing import Iterable, List, Set

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, Location, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean import (  # noqa: E402
    DigitalOceanProvider,
)
from ansible_collections.gpuprov.cloud.tests.conformance.harness import Harness, MarketplacePaging  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.digitalocean_api import (  # noqa: E402
    DigitalOceanApiFake, public_key,
)

K = ErrorKind


# the fake's route key of each primitive's first request
FIRST_CALL = {
    "plan": "sizes.list",
    "prepare": "ssh-keys.list",
    "create": "droplets.create",
    "observe": "droplets.list",
    "delete": "droplets.delete",
    "cleanup": "firewalls.list",
}


class DigitalOceanHarness(MarketplacePaging, Harness):
    cloud = "digitalocean"
    paged_listings = {key: ("page", "1") for key in (
        "sizes.list", "ssh-keys.list", "droplets.list", "tags.list", "firewalls.list")}

    def __init__(self, root: str):
        self.fake = DigitalOceanApiFake(root)
        self.provider = DigitalOceanProvider({
            "api_url": self.fake.api_url, "api_key": self.fake.token, "ssh_user": getpass.getuser(),
            "ssh_port": self.fake.ssh_port, "request_timeout_s": 20}, journal_id=uuid.uuid4().hex)
        self.request = ResourceRequest(vm_name="conf-do", gpu="RTX4000ADA", gpu_count=1)
        self.spec = InstanceSpec(
            vm_name="conf-do", allowed_cidrs=["198.51.100.7/32"],
            ssh_public_key=public_key("conf@do"),
            boot_script=BootScript("#!/bin/sh\necho gpuprov conformance", {"GPUPROV": "1"}))

    def error_kinds(self) -> Iterable[str]:
        return (K.TRANSIENT, K.CAPACITY, K.QUOTA, K.INVALID_REQUEST, K.CREDENTIALS)

    def inject_error(self, primitive: str, kind: str) -> None:
        key = FIRST_CALL[primitive]
        if kind == K.TRANSIENT:
            self.fake.rate_limit(key, retry_after=2)
        elif kind == K.CREDENTIALS:
            self.fake.bad_auth(key)
        elif kind == K.INVALID_REQUEST and primitive == "create":
            self.fake.invalid(key)
        elif kind == K.CAPACITY and primitive == "create":
            self.fake.fail_capacity(key)
        elif kind == K.QUOTA and primitive == "create":
            self.fake.fail_quota(key)
        else:
            pytest.skip("the digitalocean API has no %s answer to %s's requests" % (kind, primitive))

    def clear_errors(self) -> None:
        self.fake.clear_faults()

    def settle(self, location: Location, instance_id: str) -> None:
        self.fake.finish(instance_id)

    def unknown_instance_id(self) -> str:
        return "999999999"

    def create_unreachable(self, spec: InstanceSpec):
        """A created droplet still ``new``: no public address yet."""
        fresh = self.new_provider()
        offer = fresh.plan(self.request)[0]
        return fresh.create(offer, fresh.prepare(offer, spec), spec)

    def resources(self) -> Set[str]:
        return self.fake.resources()

    def instance_ids(self) -> List[str]:
        return sorted(str(d["id"]) for d in self.fake.live())

    def close(self) -> None:
        self.fake.stop()


def make_harness(tmp_path_factory) -> DigitalOceanHarness:
    return DigitalOceanHarness(str(tmp_path_factory.mktemp("digitalocean-fake")))
