"""diagnose on GCP through the real google-cloud-compute REST client against the HTTP
fake in tests/fakes/gcp_compute.py: status, statusMessage, start/stop times, Spot."""

from __future__ import annotations

import pytest

pytest.importorskip("google.cloud.compute_v1")
pytest.importorskip("pytest_httpserver")

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (  # noqa: E402
    ErrorKind, InstanceSpec, Location, Observed, ProviderError, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import GcpProvider  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.gcp_compute import GcpComputeFake  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGdwdXByb3Y test@controller"


@pytest.fixture
def fake():
    made = GcpComputeFake()
    yield made
    made.stop()


@pytest.fixture
def provider(fake):
    return GcpProvider({"project": fake.project, "api_endpoint": fake.url, "read_retry_s": 0},
                       journal_id="journal-a")


def _launch(provider, name, spot=False):
    offer = provider.plan(ResourceRequest(vm_name=name, gpu="L4", spot=spot))[0]
    spec = InstanceSpec(vm_name=name, ssh_public_key=KEY, allowed_cidrs=["198.51.100.7/32"], spot=spot)
    provider.create(offer, provider.prepare(offer, spec), spec)
    return Location("gcp", offer.region, offer.zone)


def test_a_running_instance_has_its_vendor_view_and_no_findings(fake, provider):
    where = _launch(provider, "diag1")
    fake.settle(where.zone, "diag1")
    fake.instances[(where.zone, "diag1")]["lastStartTimestamp"] = "2025-01-01T00:00:00.000-08:00"
    report = provider.diagnose(where, "diag1")
    [entry] = report["instances"]
    assert Observed.from_dict(entry).usable and entry["journal_id"] == "journal-a"
    vendor = entry["vendor"]
    assert vendor["status"] == "RUNNING" and vendor["status_message"] is None
    assert vendor["last_start_timestamp"] == "2025-01-01T00:00:00.000-08:00" and vendor["last_stop_timestamp"] is None
    assert vendor["scheduling"]["provisioning_model"] == "STANDARD" and vendor["scheduling"]["preemptible"] is False
    assert vendor["machine_type"] == "g2-standard-4"
    assert report["findings"] == []


def test_a_stopped_spot_vm_says_it_may_have_been_preempted(fake, provider):
    where = _launch(provider, "diag2", spot=True)
    fake.set_status(where.zone, "diag2", "TERMINATED")
    fake.instances[(where.zone, "diag2")].update(statusMessage="Instance was preempted.",
                                                 lastStopTimestamp="2025-01-02T03:04:05.000-08:00")
    report = provider.diagnose(where, "diag2")
    [entry] = report["instances"]
    assert entry["status"] == Status.STOPPED
    assert entry["vendor"]["scheduling"] == {"provisioning_model": "SPOT", "preemptible": False,
                                             "instance_termination_action": "DELETE",
                                             "on_host_maintenance": "TERMINATE", "automatic_restart": False}
    assert report["findings"] == [
        "diag2: GCP status TERMINATED: Instance was preempted.",
        "diag2: a spot VM stopped at 2025-01-02T03:04:05.000-08:00: GCE may have preempted it"]


def test_nothing_there_is_one_listing(fake, provider):
    where = Location("gcp", "us-central1", "us-central1-a")
    assert provider.diagnose(where, "never-made") == {"instances": [], "findings": []}
    assert len(fake.calls_of("instances.list")) == 1


def test_errors_are_classified(fake, provider):
    where = _launch(provider, "diag3")
    fake.fail_next("instances.list", 403, "forbidden")
    with pytest.raises(ProviderError) as err:
        provider.diagnose(where, "diag3")
    assert err.value.kind == ErrorKind.CREDENTIALS
