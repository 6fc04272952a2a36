"""The Verda API fake holds the vendor's line: OAuth2 client credentials, bearer auth,
Verda's {code, message} bodies, refused unknown and missing fields, the plain-text id
of a create, and the lifecycle ordered -> provisioning -> running (a real sshd behind
the instance's own address and the fake's SSH port) -> deleting -> gone."""

from __future__ import annotations

import socket
import time

import pytest

requests = pytest.importorskip("requests")

from ansible_collections.gpuprov.cloud.tests.fakes.verda_api import (  # noqa: E402
    CLIENT_ID, CLIENT_SECRET, VerdaApiFake,
)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3YtdmVyZGEtZmFrZQ fake@verda"


@pytest.fixture
def fake(tmp_path):
    made = VerdaApiFake(str(tmp_path))
    yield made
    made.stop()


def _token(fake):
    answer = requests.post(fake.api_url + "/oauth2/token", timeout=10, json={
        "grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET})
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == {"access_token", "refresh_token", "scope", "token_type", "expires_in"}
    return body["access_token"]


def _call(fake, method, path, token=None, **kwargs):
    token = token or _token(fake)
    return requests.request(method, fake.api_url + path, headers={"Authorization": "Bearer " + token},
                            timeout=10, **kwargs)


def test_token_endpoint_refuses_bad_credentials(fake):
    answer = requests.post(fake.api_url + "/oauth2/token", timeout=10, json={
        "grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": "wrong"})
    assert answer.status_code == 401 and answer.json()["code"] == "unauthorized_request"


def test_token_endpoint_takes_the_documented_grants_only(fake):
    url = fake.api_url + "/oauth2/token"
    first = requests.post(url, timeout=10, json={
        "grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}).json()
    again = requests.post(url, timeout=10, json={"grant_type": "refresh_token",
                                                 "refresh_token": first["refresh_token"]})
    assert again.status_code == 200 and again.json()["access_token"]
    stale = requests.post(url, timeout=10, json={"grant_type": "refresh_token", "refresh_token": "made-up"})
    assert stale.status_code == 401 and stale.json()["code"] == "unauthorized_request"
    extra = requests.post(url, timeout=10, json={"grant_type": "client_credentials", "client_id": CLIENT_ID,
                                                 "client_secret": CLIENT_SECRET, "scope": "all"})
    assert extra.status_code == 400 and "unknown field 'scope'" in extra.json()["message"]
    assert requests.post(url, timeout=10, json={"grant_type": "password"}).json() == {
        "code": "invalid_request", "message": "unsupported grant type"}


def test_bad_or_missing_bearer_is_refused_with_verdas_body(fake):
    answer = _call(fake, "GET", "/instances", token="not-a-token")
    assert answer.status_code == 401 and answer.json() == {
        "code": "unauthorized_request", "message": "Access token is missing or invalid"}
    assert requests.get(fake.api_url + "/instances", timeout=10).status_code == 401


def test_create_refuses_unknown_and_missing_fields(fake):
    token = _token(fake)
    answer = _call(fake, "POST", "/instances", token, json={
        "instance_type": "1H100.80S.30V", "image": "ubuntu-24.04-cuda-12.8-open-docker", "hostname": "h",
        "location_code": "FIN-01", "labels": {"a": "b"}})
    assert answer.status_code == 400 and answer.json()["code"] == "invalid_request"
    assert "unknown field 'labels'" in answer.json()["message"]
    answer = _call(fake, "POST", "/instances", token, json={"instance_type": "1H100.80S.30V", "hostname": "h"})
    assert "missing field 'image'" in answer.json()["message"]
    # location_code is required (API changelog 2026-03-19); the description is not
    answer = _call(fake, "POST", "/instances", token, json={
        "instance_type": "1H100.80S.30V", "image": "ubuntu-24.04-cuda-12.8-open-docker", "hostname": "h"})
    assert answer.status_code == 400 and "missing field 'location_code'" in answer.json()["message"]
    for tags in ({"a": "b"}, [{"value": "v"}], [{"key": "k" * 64}], [{"key": "k", "value": "v" * 128}],
                 [{"key": "k%d" % i} for i in range(11)], [{"key": "k", "colour": "red"}]):
        answer = _call(fake, "POST", "/instances", token, json={
            "instance_type": "1H100.80S.30V", "image": "ubuntu-24.04-cuda-12.8-open-docker", "hostname": "h",
            "location_code": "FIN-01", "tags": tags})
        assert answer.status_code == 400 and answer.json()["message"].startswith("tags:"), tags
    for os_volume in ({"name": "os", "size": 50, "on_spot_discontinue": "keep"}, {"name": "os", "size": 50, "iops": 1},
                      {"size": 50}):
        answer = _call(fake, "POST", "/instances", token, json={
            "instance_type": "1H100.80S.30V", "image": "ubuntu-24.04-cuda-12.8-open-docker", "hostname": "h",
            "location_code": "FIN-01", "os_volume": os_volume})
        assert answer.status_code == 400 and "os_volume" in answer.json()["message"], os_volume
    answer = _call(fake, "POST", "/instances", token, data="{not json")
    assert answer.status_code == 400 and answer.json()["code"] == "invalid_request"


def test_create_answers_plain_text_and_the_instance_boots_and_goes(fake):
    token = _token(fake)
    key_id = _call(fake, "POST", "/sshkeys", token, json={"name": "k", "key": KEY})
    assert key_id.headers["Content-Type"].startswith("text/plain")
    answer = _call(fake, "POST", "/instances", token, json={
        "instance_type": "1H100.80S.30V", "image": "ubuntu-24.04-cuda-12.8-open-docker", "hostname": "h",
        "description": "d", "location_code": "FIN-01", "ssh_key_ids": [key_id.text]})
    assert answer.status_code == 202 and answer.headers["Content-Type"].startswith("text/plain")
    instance_id = answer.text
    statuses = [_call(fake, "GET", "/instances/" + instance_id, token).json()["status"] for _read in range(2)]
    assert statuses == ["provisioning", "running"]
    inst = _call(fake, "GET", "/instances/" + instance_id, token).json()
    assert not any(k.startswith("_") for k in inst)
    # The sshd behind the instance listens a moment after "running" (as on a real VM): until
    # then the forwarder closes each connection at once.
    banner = b""
    for _attempt in range(100):
        with socket.create_connection((inst["ip"], fake.ssh_port), timeout=10) as conn:
            banner = conn.recv(64)
        if banner:
            break
        time.sleep(0.1)
    assert banner.startswith(b"SSH-2.0")
    assert _call(fake, "PUT", "/instances", token, json={"id": [instance_id], "action": "delete"}).status_code == 202
    reads = [_call(fake, "GET", "/instances", token).json() for _read in range(3)]
    assert reads[0][0]["status"] == "deleting" and reads[-1] == []
    # Verda's default: the OS volume goes to the trash with the instance.
    trash = _call(fake, "GET", "/volumes/trash", token).json()
    assert [(v["id"], v["status"]) for v in trash] == [(inst["os_volume_id"], "deleted")] and trash[0]["deleted_at"]
    assert fake.resources() == {"sshkey:%s" % key_id.text, "trash:%s" % inst["os_volume_id"]}


@pytest.mark.parametrize("volume_ids, permanently, fate", [
    ("os", True, "purged"), ("os", False, "trash"), ("none", True, "kept"), (None, True, "trash")])
def test_the_os_volume_is_purged_trashed_or_kept_as_the_delete_says(fake, volume_ids, permanently, fate):
    """delete_permanently applies to the volumes named in volume_ids; volume_ids that leave the OS volume out keep
    it (detached); no volume_ids at all trash it."""
    token = _token(fake)
    instance_id = _call(fake, "POST", "/instances", token, json={
        "instance_type": "1H100.80S.30V", "image": "ubuntu-24.04-cuda-12.8-open-docker", "hostname": "h",
        "description": "d", "location_code": "FIN-01"}).text
    volume = _call(fake, "GET", "/instances/" + instance_id, token).json()["os_volume_id"]
    body = {"id": [instance_id], "action": "delete", "delete_permanently": permanently}
    if volume_ids is not None:
        body["volume_ids"] = [volume] if volume_ids == "os" else []
    assert _call(fake, "PUT", "/instances", token, json=body).status_code == 202
    fake.finish_delete(instance_id)
    expected = {"purged": set(), "trash": {"trash:%s" % volume}, "kept": {"volume:%s" % volume}}[fate]
    assert fake.resources() == expected
    assert [v["id"] for v in _call(fake, "GET", "/volumes/trash", token).json()] == (
        [volume] if fate == "trash" else [])


def test_capacity_and_unknown_ids_are_refused_as_verda_does(fake):
    token = _token(fake)
    answer = _call(fake, "POST", "/instances", token, json={
        "instance_type": "1H100.80S.30V", "image": "ubuntu-24.04-cuda-12.8-open-docker", "hostname": "h",
        "description": "d", "location_code": "ICE-01"})
    assert answer.status_code == 503 and answer.json()["code"] == "service_unavailable"
    assert "Not enough resources" in answer.json()["message"]
    answer = _call(fake, "PUT", "/instances", token, json={"id": ["nope"], "action": "delete"})
    assert answer.status_code == 404 and answer.json()["code"] == "not_found"   # single action
    answer = _call(fake, "PUT", "/instances", token, json={"id": ["nope", "nada"], "action": "delete"})
    assert answer.status_code == 207 and [r["statusCode"] for r in answer.json()] == [404, 404]
    answer = _call(fake, "POST", "/instances", token, json={
        "instance_type": "1V100.6V", "image": "ubuntu-24.04-cuda-12.8-open-docker", "hostname": "h",
        "description": "d", "location_code": "FIN-01"})
    assert answer.json()["message"] == "Operating system is not valid for this instance type"


def test_tags_are_stored_lowercased_and_filter_the_listing(fake):
    token = _token(fake)
    made = _call(fake, "POST", "/instances", token, json={
        "instance_type": "1H100.80S.30V", "image": "ubuntu-24.04-cuda-12.8-open-docker", "hostname": "h",
        "location_code": "FIN-01", "tags": [{"key": "Team", "value": "ml"}, {"key": "benchmark"}]}).text
    inst = _call(fake, "GET", "/instances/" + made, token).json()
    assert [(t["key"], t["value"]) for t in inst["tags"]] == [("team", "ml"), ("benchmark", "")]
    assert inst["description"] == ""
    assert [i["id"] for i in _call(fake, "GET", "/instances", token, params={"tag": "team=ml"}).json()] == [made]
    assert _call(fake, "GET", "/instances", token, params={"tag": ["team=ml", "other"]}).json() == []


def test_scripts_page_ten_by_default_newest_first_and_keys_answer_at_both_paths(fake):
    token = _token(fake)
    made = [_call(fake, "POST", "/scripts", token, json={"name": "s%02d" % i, "script": "#!/bin/sh"}).text
            for i in range(12)]
    first = _call(fake, "GET", "/scripts", token)
    assert [s["id"] for s in first.json()] == made[::-1][:10] and first.headers["X-Total-Count"] == "12"
    second = _call(fake, "GET", "/scripts", token, params={"page": 2, "pageSize": 10}).json()
    assert [s["id"] for s in second] == made[1::-1]
    assert _call(fake, "GET", "/scripts", token, params={"pageSize": 101}).status_code == 400
    assert [s["name"] for s in _call(fake, "GET", "/scripts", token, params={"name": "s1"}).json()] == [
        "s11", "s10"]
    key_id = _call(fake, "POST", "/ssh-keys", token, json={"name": "k", "key": KEY}).text
    listed = _call(fake, "GET", "/sshkeys", token).json()
    assert [k["id"] for k in listed] == [key_id]
    assert set(listed[0]) == {"id", "name", "key", "fingerprint", "created_by_user_id"}
    assert _call(fake, "DELETE", "/ssh-keys/" + key_id, token).status_code == 200 and fake.ssh_keys == {}
