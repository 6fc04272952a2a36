"""Conformance harness for the verda adapter: the adapter's REST client against the Verda
API fake in tests/fakes/verda_api.py (OAuth2 token endpoint included).

Errors are injected as Verda reports them, as ``{"code", "message"}`` bodies on the
primitive's first request:

================  ==========================================================  ==================
kind              how                                                         primitives
================  ==========================================================  ==================
Transient         HTTP 429 rate_limit_exceeded with Retry-After               all six
Credentials       HTTP 401 unauthorized_request, twice (the client fetches    all six
                  a new token after the first and resends once)
InvalidRequest    HTTP 400 invalid_request "Invalid action"                   all six
Capacity          HTTP 503 service_unavailable "Not enough resources ..."     create
Quota             HTTP 402 insufficient_funds                                 create
Unavailable       HTTP 400 "Operating system is not valid for this            create
                  instance type"
Failed            HTTP 403 forbidden_action (create); a 200 whose body is     create, plan
                  not JSON (plan)
================  ==========================================================  ==================
"""

from __future__ import annotations

import getpass
import uuid
from typing import Iterable, List

import pytest

pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BootScript, ErrorKind, InstanceSpec, Location, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.verda import VerdaProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.conformance.harness import FakeApiHarness  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import Reply  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.verda_api import (  # noqa: E402
    CLIENT_ID, CLIENT_SECRET, VerdaApiFake,
)

K = ErrorKind
ALL = ("plan", "prepare", "create", "observe", "delete", "cleanup")
# the fake's route that each primitive calls first
FIRST_CALL = {
    "plan": "instance-types.list", "prepare": "sshkeys.list", "create": "instances.create",
    "observe": "instances.list", "delete": "instances.action", "cleanup": "sshkeys.list",
}
CREATE_ONLY = {
    K.CAPACITY: Reply(503, {"code": "service_unavailable",
                            "message": "Not enough resources to deploy a 1 GPU instance type 1H100.80S.30V in FIN-01"}),
    K.QUOTA: Reply(402, {"code": "insufficient_funds", "message": "Insufficient funds to deploy this instance"}),
    K.UNAVAILABLE: Reply(400, {"code": "invalid_request",
                               "message": "Operating system is not valid for this instance type"}),
    K.FAILED: Reply(403, {"code": "forbidden_action", "message": "This action is forbidden for the project"}),
}


def options(fake: VerdaApiFake) -> dict:
    """The adapter options that point it at ``fake`` and log in to its sshds."""
    return {"api_url": fake.api_url, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "ssh_user": getpass.getuser(), "ssh_port": fake.ssh_port}


class VerdaHarness(FakeApiHarness):
    cloud = "verda"
    paged_listings = {"scripts.list": ("page", "1")}
    read_posts = ("oauth2.token",)

    def __init__(self, root: str):
        self.fake = VerdaApiFake(root)
        self.provider = VerdaProvider(options(self.fake), journal_id=uuid.uuid4().hex)
        self.request = ResourceRequest(vm_name="conf-verda", gpu="H100", gpu_count=1)
        self.spec = InstanceSpec(
            vm_name="conf-verda",
            ssh_public_key="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtY29uZm9ybWFuY2U conf@verda",
            boot_script=BootScript("#!/bin/sh\necho gpuprov conformance", {"GPUPROV": "1"}))

    def error_kinds(self) -> Iterable[str]:
        return (K.TRANSIENT, K.CAPACITY, K.QUOTA, K.UNAVAILABLE, K.FAILED, K.INVALID_REQUEST, K.CREDENTIALS)

    def inject_error(self, primitive: str, kind: str) -> None:
        key = FIRST_CALL[primitive]
        if kind == K.TRANSIENT:
            self.fake.rate_limit(key, retry_after=3)
        elif kind == K.CREDENTIALS:
            self.fake.fail_next(key, Reply(401, {"code": "unauthorized_request", "message": "Invalid token"}),
                                times=2)
        elif kind == K.INVALID_REQUEST:
            self.fake.fail_next(key, Reply(400, {"code": "invalid_request", "message": "Invalid action"}))
        elif primitive == "create" and kind in CREATE_ONLY:
            self.fake.fail_next(key, CREATE_ONLY[kind])
        elif (primitive, kind) == ("plan", K.FAILED):
            self.fake.malformed(key)
        else:
            pytest.skip("the verda fake has no honest way to make %s raise %s" % (primitive, kind))

    def settle(self, location: Location, instance_id: str) -> None:
        self.fake.settle(instance_id)

    def settle_deleted(self, location: Location, instance_id: str) -> None:
        self.fake.finish_delete(instance_id)

    def unknown_instance_id(self) -> str:
        return str(uuid.uuid4())

    def instance_ids(self) -> List[str]:
        return self.fake.live_instances()

    def fill_first_pages(self) -> None:
        """100 startup scripts of someone else, older than any the adapter makes: the first page of
        ``/scripts`` (the 100 newest, the size the adapter asks) is full, and holds the adapter's."""
        with self.fake.lock:
            for n in range(100):
                script_id = str(uuid.uuid4())
                self.fake.scripts[script_id] = {
                    "id": script_id, "name": "someone-else-%03d" % n, "script": "#!/bin/sh\n",
                    "created_at": "2026-01-01T00:%02d:%02d.000Z" % (n // 60, n % 60)}


def make_harness(tmp_path_factory) -> VerdaHarness:
    return VerdaHarness(str(tmp_path_factory.mktemp("verda")))
