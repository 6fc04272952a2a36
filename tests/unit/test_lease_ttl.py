"""lease_ttl, the group VM setting for the journal lease: its validation (task value, then
GPUPROV_LEASE_TTL, then 120 s; 10..3600, else an error naming the field) and that the vm, instance
and orphans tasks take and renew their leases, through the executor, for that long."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import primitives, provider_args
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import service, sweep

BASE = {"name": "ttl", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
        "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
        "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None}


@pytest.fixture
def home(home, monkeypatch):
    """conftest.py's home, and no lease_ttl from the environment."""
    monkeypatch.delenv("GPUPROV_LEASE_TTL", raising=False)
    return home


@pytest.fixture
def executors(monkeypatch):
    """The lease_ttl each Executor the vm, instance and orphans code builds is given (it still runs)."""
    seen = []

    def recording(real):
        def build(*args, **kwargs):
            seen.append(kwargs.get("lease_ttl"))
            return real(*args, **kwargs)
        return build

    for module in (service, primitives, sweep):
        monkeypatch.setattr(module, "Executor", recording(module.Executor))
    return seen


@pytest.mark.parametrize("params, environ, expected", [
    ({}, {}, 120.0),
    ({"lease_ttl": None}, {"GPUPROV_LEASE_TTL": "  "}, 120.0),
    ({"lease_ttl": 10}, {}, 10.0),
    ({"lease_ttl": 3600}, {"GPUPROV_LEASE_TTL": "30"}, 3600.0),   # the task's wins
    ({"lease_ttl": None}, {"GPUPROV_LEASE_TTL": " 45 "}, 45.0),
])
def test_the_task_then_the_environment_then_120_seconds(params, environ, expected):
    assert provider_args.lease_ttl(params, environ) == expected


@pytest.mark.parametrize("params, environ, message", [
    ({"lease_ttl": 9}, {}, "lease_ttl: expected whole seconds between 10 and 3600, got 9"),
    ({"lease_ttl": 3601}, {}, "lease_ttl: expected whole seconds between 10 and 3600, got 3601"),
    ({"lease_ttl": True}, {}, "lease_ttl: expected whole seconds between 10 and 3600, got True"),
    ({}, {"GPUPROV_LEASE_TTL": "2m"}, "GPUPROV_LEASE_TTL: expected whole seconds between 10 and 3600, got '2m'"),
    ({}, {"GPUPROV_LEASE_TTL": "-30"}, "GPUPROV_LEASE_TTL: expected whole seconds between 10 and 3600, got '-30'"),
    ({}, {"GPUPROV_LEASE_TTL": "5"}, "GPUPROV_LEASE_TTL: expected whole seconds between 10 and 3600, got 5"),
])
def test_a_lease_ttl_out_of_bounds_names_its_source(params, environ, message):
    with pytest.raises(ValueError) as info:
        provider_args.lease_ttl(params, environ)
    assert str(info.value) == message


def test_every_group_member_accepts_lease_ttl_as_an_integer():
    assert provider_args.group_argument_spec()["lease_ttl"] == {"type": "int"}


def test_a_vm_task_with_a_bad_lease_ttl_fails_naming_it_and_writes_nothing(home, executors):
    result = service.VmService(dict(BASE, lease_ttl=5)).run()
    assert result["failed"] and result["msg"].startswith("lease_ttl: expected whole seconds between 10 and 3600")
    assert executors == []
    assert not (home / "journal.sqlite").exists() or Journal(str(home / "journal.sqlite")).load("ttl") is None


def test_a_vm_task_leases_for_its_lease_ttl(home, executors, monkeypatch):
    # The local cloud has no GPUs: the launch runs through the executor and ends Aborted, quickly.
    result = service.VmService(dict(BASE, gpu="H100", lease_ttl=42)).run()
    assert result["failed"] and "local cloud has no GPUs" in result["msg"]
    assert executors == [42.0]
    taken = []
    real_acquire = Journal.acquire

    def acquire(journal, key, owner, ttl):
        taken.append((key, ttl))
        return real_acquire(journal, key, owner, ttl)

    monkeypatch.setattr(Journal, "acquire", acquire)
    down = service.VmService(dict(BASE, state="absent")).run()
    assert not down.get("failed"), down
    assert taken and all(ttl == 120.0 for _key, ttl in taken)   # unset: the default


def test_the_environment_sets_a_vm_task_s_lease(home, executors, monkeypatch):
    monkeypatch.setenv("GPUPROV_LEASE_TTL", "15")
    service.VmService(dict(BASE, gpu="H100")).run()
    assert executors == [15.0]
    monkeypatch.setenv("GPUPROV_LEASE_TTL", "forever")
    result = service.VmService(dict(BASE, gpu="H100")).run()
    assert result["failed"] and result["msg"].startswith("GPUPROV_LEASE_TTL: expected whole seconds")


def test_an_instance_teardown_leases_for_its_lease_ttl(home, executors):
    params = {"name": "ttl", "cloud": "local", "state": "absent", "cloud_options": {"local": {"root": str(home)}}}
    bad = primitives.instance(dict(params, lease_ttl=4000))
    assert bad["failed"] and bad["msg"].startswith("InvalidRequest: lease_ttl: expected whole seconds"), bad
    done = primitives.instance(dict(params, lease_ttl=20))
    assert not done.get("failed"), done
    assert executors == [20.0]


def test_an_orphans_task_checks_its_lease_ttl_and_hands_it_to_the_sweep(home, monkeypatch):
    params = {"state": "absent", "clouds": ["local"], "cloud": None, "regions": [], "include_foreign": False,
              "include_legacy": False, "journal": str(home / "journal.sqlite"), "journal_password": None,
              "teardown_timeout": None, "cloud_options": {}, "lease_ttl": 1}
    bad = sweep.run_task(params, check_mode=False)
    assert bad["failed"] and bad["msg"].startswith("lease_ttl: expected whole seconds between 10 and 3600, got 1")
    given = []
    real_sweep = sweep.sweep

    def recorded_sweep(*args, **kwargs):
        given.append(kwargs.get("lease_ttl_s"))
        return real_sweep(*args, **kwargs)

    monkeypatch.setattr(sweep, "sweep", recorded_sweep)
    result = sweep.run_task(dict(params, lease_ttl=25), check_mode=False)
    assert not result.get("failed"), result
    assert given == [25.0]


def test_a_sweeper_leases_each_vm_name_for_its_lease_ttl():
    assert sweep.Sweeper(None, {}, clouds=["local"], lease_ttl_s=33).lease_ttl == 33.0
    assert sweep.Sweeper(None, {}, clouds=["local"]).lease_ttl == 120.0
