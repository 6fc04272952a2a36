"""The GCP Compute fake refuses what the real API refuses (per-series rules, metadata
limits), reports stockouts with the real errorDetails, and answers inserts with a
RUNNING Operation; and the gcp adapter's requests pass it for every rung of its ladder."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

pytest.importorskip("google.cloud.compute_v1")
pytest.importorskip("pytest_httpserver")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    BlockScope, BootScript, ErrorKind, InstanceSpec, ProviderError, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import GcpProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import catalog  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.gcp_compute import GcpComputeFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3Y test@controller"


@pytest.fixture
def fake():
    made = GcpComputeFake()
    yield made
    made.stop()


@pytest.fixture
def provider(fake):
    return GcpProvider({"project": fake.project, "api_endpoint": fake.url, "read_retry_s": 0})


def spec(name="train1", **kw):
    return InstanceSpec(vm_name=name, ssh_public_key=KEY, allowed_cidrs=["198.51.100.7/32"], **kw)


def offer_of(provider, machine_type, spot=None):
    """The first offer of ``machine_type`` that the plan for its rung's GPU makes (Spot
    where GCP sells the type only so, unless ``spot`` says)."""
    rung = catalog.rung_of(machine_type)
    spot = rung.spot_only if spot is None else spot
    offers = provider.plan(ResourceRequest(vm_name="train1", gpu=rung.gpu, gpu_count=rung.count or 1, spot=spot))
    return next(o for o in offers if o.instance_type == machine_type)


def create(provider, offer, s=None):
    s = s or spec(spot=offer.spot)
    return provider.create(offer, provider.prepare(offer, s), s)


def refused(provider, offer, s=None):
    with pytest.raises(ProviderError) as info:
        create(provider, offer, s)
    return info.value


def last_insert(fake):
    return [c["body"] for c in fake.calls_of("instances.insert")][-1]


def raw_insert(fake, body, zone="us-central1-b"):
    """POST an instance body straight to the fake: (HTTP status, JSON reply)."""
    request = urllib.request.Request(
        "%s/compute/v1/projects/%s/zones/%s/instances" % (fake.url, fake.project, zone),
        data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


# -- the adapter's requests pass every rule, rung by rung --------------------------------------


@pytest.mark.parametrize("rung", [r for r in catalog.LADDER if r.gpu], ids=lambda r: r.machine_type)
def test_the_adapter_launches_every_rung_of_its_ladder(fake, provider, rung):
    offer = offer_of(provider, rung.machine_type)
    assert create(provider, offer) == "train1"
    body = last_insert(fake)
    disk = body["disks"][0]["initializeParams"]["diskType"]
    assert disk == "zones/%s/diskTypes/%s" % (offer.zone, rung.disk)
    assert body["networkInterfaces"][0].get("nicType") == rung.nic
    assert (offer.zone, "train1") in fake.instances


def test_a4_and_a3_ultra_boot_from_hyperdisk_with_gvnic(fake, provider):
    for machine_type in ("a4-highgpu-8g", "a3-ultragpu-8g", "a3-megagpu-8g"):
        fake.instances.clear()
        create(provider, offer_of(provider, machine_type))
        body = last_insert(fake)
        assert body["networkInterfaces"][0]["nicType"] == "GVNIC"
        assert body["disks"][0]["initializeParams"]["diskType"].endswith(
            "hyperdisk-balanced" if machine_type != "a3-megagpu-8g" else "pd-balanced")


def test_an_offer_journalled_without_disk_and_nic_types_gets_its_rungs(fake, provider):
    offer = offer_of(provider, "a4-highgpu-8g")
    offer.detail.pop("disk_type")
    offer.detail.pop("nic_type")
    create(provider, offer)
    body = last_insert(fake)
    assert body["disks"][0]["initializeParams"]["diskType"].endswith("/hyperdisk-balanced")
    assert body["networkInterfaces"][0]["nicType"] == "GVNIC"


def test_a_boot_script_past_the_metadata_limit_is_refused_before_any_insert(fake, provider):
    offer = offer_of(provider, "g2-standard-4")
    s = spec(boot_script=BootScript("#!/bin/sh\n# " + "x" * 262144))
    prepared = provider.prepare(offer, s)
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, s)
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("boot_script:")
    assert "262144" in info.value.msg and fake.calls_of("instances.insert") == []


# -- the fake refuses what the real API refuses ---------------------------------------------------


@pytest.mark.parametrize("machine_type,disk_type", [
    ("a4-highgpu-8g", "pd-balanced"), ("a3-ultragpu-8g", "pd-ssd"), ("g2-standard-4", "pd-standard"),
    ("a3-highgpu-8g", "pd-standard"), ("n1-standard-4", "hyperdisk-balanced"), ("a2-highgpu-1g", "hyperdisk-balanced"),
])
def test_a_boot_disk_type_the_series_cannot_boot_from_is_refused(fake, provider, machine_type, disk_type):
    offer = offer_of(provider, machine_type)
    offer.detail["disk_type"] = disk_type
    err = refused(provider, offer)
    assert err.kind == ErrorKind.INVALID_REQUEST
    assert "diskType" in err.msg and disk_type in err.msg and machine_type in err.msg
    assert fake.instances == {}


def test_no_disk_type_means_pd_standard_which_g2_refuses(fake, provider):
    create(provider, offer_of(provider, "g2-standard-4"))
    body = last_insert(fake)
    body["name"] = "nodisktype"
    del body["disks"][0]["initializeParams"]["diskType"]
    status, reply = raw_insert(fake, body, zone="us-central1-a")
    assert status == 400 and "pd-standard" in reply["error"]["message"]


@pytest.mark.parametrize("machine_type", ["a3-highgpu-8g", "a3-megagpu-8g", "a4-highgpu-8g"])
def test_a3_and_a4_refuse_a_nic_other_than_gvnic(fake, provider, machine_type):
    offer = offer_of(provider, machine_type)
    offer.detail["nic_type"] = "VIRTIO_NET"
    err = refused(provider, offer)
    assert err.kind == ErrorKind.INVALID_REQUEST and "GVNIC" in err.msg


@pytest.mark.parametrize("machine_type", ["a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g", "a3-ultragpu-8g",
                                          "a4-highgpu-8g"])
def test_spot_only_types_are_refused_on_demand(fake, provider, machine_type):
    offer = offer_of(provider, machine_type, spot=True)
    offer.spot = False
    err = refused(provider, offer)
    assert err.kind == ErrorKind.INVALID_REQUEST and "SPOT or FLEX_START" in err.msg
    create(provider, offer_of(provider, machine_type, spot=True), spec(spot=True))  # as Spot it is taken


@pytest.mark.parametrize("affinity,status", [(None, 400), ({"consumeReservationType": "ANY_RESERVATION"}, 400),
                                             ({"consumeReservationType": "SPECIFIC_RESERVATION", "key":
                                               "compute.googleapis.com/reservation-name", "values": ["r1"]}, 200)])
def test_a_spot_only_type_on_demand_needs_a_specific_reservation(fake, provider, affinity, status):
    create(provider, offer_of(provider, "a4-highgpu-8g"))
    body = last_insert(fake)
    body["name"] = "reserved1"
    body["scheduling"] = {"onHostMaintenance": "TERMINATE", "automaticRestart": True}
    if affinity:
        body["reservationAffinity"] = affinity
    assert raw_insert(fake, body)[0] == status


def _valid_body(fake, provider, spot=False):
    create(provider, offer_of(provider, "g2-standard-4", spot=spot), spec(spot=spot))
    body = last_insert(fake)
    body["name"] = "raw1"
    return body


@pytest.mark.parametrize("scheduling,ok", [
    ({"onHostMaintenance": "TERMINATE", "instanceTerminationAction": "DELETE"}, False),
    ({"onHostMaintenance": "TERMINATE", "instanceTerminationAction": "STOP", "maxRunDuration": {"seconds": 3600}},
     True),
    ({"provisioningModel": "SPOT", "onHostMaintenance": "TERMINATE", "automaticRestart": False,
      "instanceTerminationAction": "STOP"}, True),
    ({"provisioningModel": "SPOT", "onHostMaintenance": "TERMINATE", "automaticRestart": False,
      "instanceTerminationAction": "EXPLODE"}, False),
])
def test_instance_termination_action_only_where_the_api_takes_it(fake, provider, scheduling, ok):
    body = _valid_body(fake, provider)
    body["scheduling"] = scheduling
    status, reply = raw_insert(fake, body, zone="us-central1-a")
    assert (status == 200) == ok, reply
    if not ok:
        assert "instanceTerminationAction" in reply["error"]["message"]


@pytest.mark.parametrize("items,what", [
    ([{"key": "user-data", "value": "x" * 262145}], "262144 bytes"),
    ([{"key": "a", "value": "x" * 262144}, {"key": "b", "value": "x" * 262144}], "512 KB"),
    ([{"key": "bad key!", "value": "x"}], "a-zA-Z0-9"),
    ([{"key": "k" * 128, "value": "x"}], "128 bytes"),
])
def test_metadata_past_its_limits_is_refused(fake, provider, items, what):
    body = _valid_body(fake, provider)
    body["metadata"] = {"items": items}
    status, reply = raw_insert(fake, body, zone="us-central1-a")
    assert status == 400 and reply["error"]["errors"][0]["reason"] == "invalid"
    assert what in reply["error"]["message"]


def test_metadata_at_its_limits_is_taken(fake, provider):
    body = _valid_body(fake, provider)
    body["metadata"] = {"items": [{"key": "user-data", "value": "x" * 262144},
                                  {"key": "ssh-keys", "value": "x" * 200000}]}
    assert raw_insert(fake, body, zone="us-central1-a")[0] == 200


# -- operations and stockouts as the real API reports them ----------------------------------------


def test_inserts_answer_a_running_operation_that_the_adapter_waits_for(fake, provider):
    offer = offer_of(provider, "g2-standard-4")
    create(provider, offer)
    insert_op = next(op for op in fake.operations.values() if op["operationType"] == "insert"
                     and op["targetLink"].endswith("/instances/train1"))
    waits = fake.calls_of("zoneOperations.wait")
    assert len(waits) == 1 and waits[0]["path"].endswith("/operations/%s/wait" % insert_op["name"])
    assert len(fake.calls_of("globalOperations.wait")) == 1  # the firewall's insert too
    body = {"name": "raw2", "machineType": "zones/us-central1-a/machineTypes/e2-standard-2",
            "disks": last_insert(fake)["disks"], "networkInterfaces": [{"network": "global/networks/default"}]}
    body["disks"][0]["initializeParams"]["diskType"] = "zones/us-central1-a/diskTypes/pd-balanced"
    status, reply = raw_insert(fake, body, zone="us-central1-a")
    assert status == 200 and reply["status"] == "RUNNING" and "error" not in reply


def test_an_operation_still_running_after_the_wait_is_retried_into_the_same_instance(fake, provider):
    offer = offer_of(provider, "g2-standard-4")
    fake.op_mode = "stuck"
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer, spec())          # the rule's insert is still RUNNING after the wait
    assert info.value.kind == ErrorKind.TRANSIENT and "still RUNNING" in info.value.msg
    fake.op_mode = "pending"
    prepared = provider.prepare(offer, spec())   # the core's retry finds the rule made
    fake.op_mode = "stuck"
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, spec())
    assert info.value.kind == ErrorKind.TRANSIENT and "still RUNNING" in info.value.msg
    fake.op_mode = "pending"
    assert provider.create(offer, prepared, spec()) == "train1"   # and adopts the instance (409)
    assert list(fake.instances) == [(offer.zone, "train1")] and len(fake.firewalls) == 1
    assert len(fake.calls_of("firewalls.insert")) == 1 and len(fake.calls_of("instances.insert")) == 2


def test_done_at_once_stays_a_scenario(fake, provider):
    fake.op_mode = "done"
    create(provider, offer_of(provider, "g2-standard-4"))
    assert fake.calls_of("zoneOperations.wait") == [] and fake.calls_of("globalOperations.wait") == []


@pytest.mark.parametrize("op_mode", ["pending", "done"])
def test_a_stockout_carries_the_real_error_details(fake, provider, op_mode):
    fake.op_mode = op_mode
    offer = offer_of(provider, "n1-standard-4")   # T4 attached: the details name the attachment
    fake.exhaust(offer.zone)
    err = refused(provider, offer)
    assert (err.kind, err.block_scope) == (ErrorKind.CAPACITY, BlockScope.OFFER)
    op = next(o for o in fake.operations.values() if o["targetLink"].endswith("/instances/train1"))
    assert op["status"] == "DONE" and op["httpErrorStatusCode"] == 503
    (error,) = op["error"]["errors"]
    assert error["code"] == "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
    info = error["errorDetails"][0]["errorInfo"]
    assert info["reason"] == "resource_availability" and info["domain"] == "compute.googleapis.com"
    assert info["metadatas"] == {"zone": offer.zone, "vmType": "n1-standard-4", "attachment": "nvidia-tesla-t4=1"}
    assert "currently unavailable in the %s zone" % offer.zone in error["errorDetails"][2]["localizedMessage"][
        "message"]


@pytest.mark.parametrize("metric", ["CPUS_ALL_REGIONS", "GPUS_ALL_REGIONS"])
def test_a_project_wide_quota_blocks_the_whole_cloud(fake, provider, metric):
    fake.fail_next_insert("QUOTA_EXCEEDED", quota_metric=metric)
    err = refused(provider, offer_of(provider, "g2-standard-4"))
    assert (err.kind, err.block_scope) == (ErrorKind.QUOTA, BlockScope.CLOUD) and metric in err.msg


def test_an_image_that_does_not_exist_is_a_bad_request_naming_it(fake, provider):
    offer = offer_of(provider, "g2-standard-4")
    prepared = provider.prepare(offer, spec())
    prepared["image"] = prepared["image"].replace("-v20261120", "-v19990101")  # deprecated and deleted since
    with pytest.raises(ProviderError) as info:
        provider.create(offer, prepared, spec())
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("image_family: projects/")
    assert fake.instances == {}


def test_a_network_that_does_not_exist_is_a_bad_request_naming_it(fake):
    adapter = GcpProvider({"project": fake.project, "api_endpoint": fake.url, "read_retry_s": 0,
                           "network": "no-such-vpc"})
    offer = offer_of(adapter, "g2-standard-4")
    with pytest.raises(ProviderError) as info:
        adapter.prepare(offer, spec())
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    assert info.value.msg.startswith("network: projects/%s/global/networks/no-such-vpc does not exist" % fake.project)
    assert fake.firewalls == {}


@pytest.mark.parametrize("what,field", [("network", "network"), ("image", "image_family")])
def test_an_operation_not_finding_our_configuration_is_a_bad_request(fake, provider, what, field):
    path = {"network": "projects/%s/global/networks/default" % fake.project,
            "image": "projects/ubuntu-os-accelerator-images/global/images/gone-v1"}[what]
    fake.fail_next_insert("RESOURCE_NOT_FOUND", message="The resource '%s' was not found" % path, http_status=404)
    err = refused(provider, offer_of(provider, "g2-standard-4"))
    assert err.kind == ErrorKind.INVALID_REQUEST and err.msg.startswith("%s: %s does not exist" % (field, path))
