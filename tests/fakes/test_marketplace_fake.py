"""The marketplace fakes' base: routing, auth, fault injection, field checks, boot pacing
and a real sshd behind an instance."""

from __future__ import annotations

import socket
import time

import pytest

requests = pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.tests.fakes.marketplace import (  # noqa: E402
    MarketplaceFake, Reply, route,
)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtbWFya2V0cGxhY2UtZmFrZQ base@test"


class TinyFake(MarketplaceFake):
    cloud = "tiny"

    def __init__(self, root):
        super().__init__(root)
        self.things = {}

    @route("GET", r"/things/status", key="things.status")
    def status(self, req):
        return Reply(200, {"ok": True})

    @route("GET", r"/things/(?P<id>[^/]+)", key="things.get")
    def get(self, req):
        thing = self.things.get(req.params["id"])
        if thing is None:
            return Reply(404, {"error": "no such thing"})
        if thing["state"] == "booting" and self.tick(thing):
            thing["state"] = "running"
            thing["host"], thing["port"], thing["user"] = self.sshd.start(req.params["id"], [KEY])
        return Reply(200, self.public(thing))

    @route("POST", r"/things", key="things.create")
    def create(self, req):
        problems = self.check_fields(req.json, required=("name",), optional=("size",))
        if problems:
            return Reply(400, {"errors": problems})
        self.things["t1"] = {"id": "t1", "name": req.json["name"], "state": "booting"}
        return Reply(201, raw="t1")


@pytest.fixture
def fake(tmp_path):
    made = TinyFake(str(tmp_path))
    yield made
    made.stop()


def _call(fake, method, path, token="fake-token", **kwargs):
    return requests.request(method, fake.url + path, headers={"Authorization": "Bearer %s" % token},
                            timeout=10, **kwargs)


def test_routes_in_declaration_order_auth_and_unknown_paths(fake):
    assert _call(fake, "GET", "/things/status").json() == {"ok": True}
    assert _call(fake, "GET", "/things/nope").status_code == 404
    assert _call(fake, "GET", "/elsewhere").status_code == 404
    refused = _call(fake, "GET", "/things/status", token="wrong")
    assert refused.status_code == 401 and refused.json() == {"error": "unauthorized"}


def test_field_checks_and_bad_json(fake):
    missing = _call(fake, "POST", "/things", json={"size": 1, "colour": "red"})
    assert missing.status_code == 400
    assert missing.json() == {"errors": ["missing field 'name'", "unknown field 'colour'"]}
    assert _call(fake, "POST", "/things", data=b"{not json").status_code == 400
    made = _call(fake, "POST", "/things", json={"name": "vm1"})
    assert (made.status_code, made.text, made.headers["Content-Type"]) == (201, "t1", "text/plain; charset=utf-8")
    assert [c[4] for c in fake.calls_of("things.create")][-1] == {"name": "vm1"}


def test_fault_injection_answers_instead_of_the_handler(fake):
    fake.fail_next("things.status", Reply(429, {"error": "slow down"}, headers={"Retry-After": "3"}), times=2)
    first, second, third = (_call(fake, "GET", "/things/status") for _round in range(3))
    assert [r.status_code for r in (first, second, third)] == [429, 429, 200]
    assert first.headers["Retry-After"] == "3"
    fake.fail_next("things.status", Reply(503))
    fake.clear_faults()
    assert _call(fake, "GET", "/things/status").status_code == 200


def test_boot_pacing_then_a_real_sshd_and_stop(fake):
    _call(fake, "POST", "/things", json={"name": "vm1"})
    assert _call(fake, "GET", "/things/t1").json()["state"] == "booting"
    running = _call(fake, "GET", "/things/t1").json()
    assert running["state"] == "running" and "_reads" not in running
    # sshd listens a moment after its process starts (as on a real VM, after "active").
    for _attempt in range(100):
        try:
            conn = socket.create_connection((running["host"], running["port"]), timeout=10)
            break
        except ConnectionRefusedError:
            time.sleep(0.1)
    with conn:
        assert conn.recv(64).startswith(b"SSH-2.0-")
    fake.sshd.stop("t1")
    assert "t1" not in fake.sshd.running


def test_boot_pacing_by_time(fake):
    fake.boot_after_s = 0.3
    _call(fake, "POST", "/things", json={"name": "vm1"})
    assert [_call(fake, "GET", "/things/t1").json()["state"] for _read in range(3)] == ["booting"] * 3
    time.sleep(0.35)
    running = _call(fake, "GET", "/things/t1").json()
    assert running["state"] == "running" and "_first_read" not in running
    fake.sshd.stop("t1")
