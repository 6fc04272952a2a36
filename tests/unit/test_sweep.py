"""The orphan sweep (plugins/module_utils/tasks/sweep.py): the join of listed resources with the
journal, the choice of what a removal touches, credential detection, and whole sweeps on the
local cloud (real sshd processes) with orphans planted on purpose."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    InstanceSpec, Location, Owned, ResourceKind, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch_states, projection, teardown_states
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import sweep
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import ensure_controller_key
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.sweep import (
    FOREIGN, LEGACY, ORPHAN, OWNED, RowView, classify, removal_groups,
)

MINE = "a" * 32
THEIRS = "b" * 32
AWS = Location("aws", "us-east-1", "us-east-1a")


def owned(vm_name="vm1", journal_id=MINE, location=AWS, kind=ResourceKind.INSTANCE, resource_id="i-1"):
    return Owned(kind, resource_id, location, vm_name=vm_name, journal_id=journal_id, status=Status.RUNNING,
                 price_per_hour=1.5)


def ready_row(location=AWS, instance_id="i-1", running=False):
    vm = {"name": "vm1", "location": location.to_dict(), "instance_id": instance_id}
    return RowView("vm1", "launch", launch_states.Ready(vm, False, None), True, running)


def launch_row(state, terminal, running=False, key="vm1"):
    """A launch row whose state is ``state`` (as journalled)."""
    return RowView(key, "launch", launch_states.from_dict(state), terminal, running)


def teardown_row(key, kind, state, terminal=True):
    """A teardown row (machine ``kind``) whose state is ``state`` (as journalled)."""
    return RowView(key, kind, teardown_states.from_dict(state), terminal, False)


SEARCH = {"plan": "p1", "size": 1, "cursor": 0, "blocked": [], "round": 0,
          "offer": {"cloud": "gcp", "region": "us-central1", "instance_type": "g2-standard-4"}}


# -- the join ---------------------------------------------------------------------------

def test_no_row_is_an_orphan():
    assert classify(owned(), MINE, [None, None])[0] == ORPHAN


def test_a_ready_row_owns_everything_of_its_name_on_its_cloud_and_nothing_elsewhere():
    assert classify(owned(), MINE, [ready_row()])[0] == OWNED
    # A second instance beside the VM, or in another region of the cloud, and a global side resource: the
    # row's (the cloud's cleanup acts by name, some side resources are global); down clears them.
    assert classify(owned(resource_id="i-2"), MINE, [ready_row()])[0] == OWNED
    assert classify(owned(location=Location("aws", "eu-west-1", "eu-west-1a")), MINE, [ready_row()])[0] == OWNED
    firewall = owned(kind=ResourceKind.FIREWALL, resource_id="fw", location=Location("aws", "global"))
    assert classify(firewall, MINE, [ready_row()])[0] == OWNED
    category, why = classify(owned(location=Location("gcp", "us-central1", "us-central1-a")), MINE, [ready_row()])
    assert category == ORPHAN and "vm1: Ready" in why


def test_a_run_in_progress_owns_everything_of_its_name():
    creating = launch_row({"kind": "Creating", "search": SEARCH, "prepared": {}}, False)
    assert classify(owned(location=Location("gcp", "us-central1")), MINE, [creating])[0] == OWNED
    leased = launch_row({"kind": "Aborted", "reason": "x", "targets": []}, True, running=True)
    assert classify(owned(), MINE, [leased])[0] == OWNED


def test_done_and_aborted_rows_own_nothing_unless_they_name_it():
    done = teardown_row("vm1", "teardown", {"kind": "Done", "vm_name": "vm1", "reason": "down requested",
                                            "targets": [{"location": AWS.to_dict(), "instance_ids": ["i-1"],
                                                         "created": True}]})
    assert classify(owned(), MINE, [done])[0] == ORPHAN
    aborted = launch_row({"kind": "Aborted", "reason": "x", "targets": []}, True)
    assert classify(owned(), MINE, [aborted])[0] == ORPHAN
    kept = launch_row({"kind": "Aborted", "reason": "x", "targets": [],
                       "vm": {"location": AWS.to_dict(), "instance_id": "i-1"}}, True)
    assert classify(owned(), MINE, [kept])[0] == OWNED
    exhausted = launch_row({"kind": "Exhausted", "reason": "x", "search": {
        "offers": [], "cursor": 0, "blocked": [], "history": [], "round": 0}}, True)
    assert classify(owned(), MINE, [exhausted])[0] == ORPHAN


def test_a_leaked_row_and_an_unfinished_instance_teardown_own_their_locations():
    targets = [{"location": AWS.to_dict(), "instance_ids": ["i-1"], "created": True}]
    leaked = launch_row({"kind": "Leaked", "reason": "x", "targets": targets}, True)
    assert classify(owned(), MINE, [leaked])[0] == OWNED
    requested = teardown_row("instance:aws:vm1", "instance-teardown", {
        "kind": "DeletionRequested", "vm_name": "vm1", "reason": "instance state=absent", "targets": targets})
    assert classify(owned(), MINE, [None, requested])[0] == OWNED
    finished = teardown_row("instance:aws:vm1", "instance-teardown", {
        "kind": "Done", "vm_name": "vm1", "reason": "instance state=absent", "targets": targets})
    assert classify(owned(), MINE, [None, finished])[0] == ORPHAN


def test_a_row_this_version_cannot_read_owns_everything_of_its_name(tmp_path):
    journal = projection.open_journal(str(tmp_path / "journal.sqlite"))
    try:
        journal.begin("vm1", "launch", {"kind": "Hibernating"}, "Hibernating", True, "test:1:x", 60, None)
        journal.release("vm1", "test:1:x")
        row = RowView.of(journal, "vm1")
    finally:
        journal.close()
    assert row.state is None and row.unreadable == "a launch state this version cannot read (ValueError: unknown " \
                                                   "launch state 'Hibernating')"
    category, why = classify(owned(location=Location("gcp", "us-central1")), MINE, [row])
    assert category == OWNED and why == "journal row vm1 holds %s, so it may own anything of vm1" % row.unreadable
    assert classify(owned(vm_name="vm2"), MINE, [None])[0] == ORPHAN


def test_another_journals_resource_is_foreign_even_where_a_row_lives():
    category, why = classify(owned(journal_id=THEIRS), MINE, [ready_row()])
    assert category == FOREIGN and THEIRS in why
    # Without a journal of its own (a dry run where none exists yet) every journal id is foreign.
    assert classify(owned(), None, [])[0] == FOREIGN


def test_no_journal_id_is_legacy_unless_a_row_owns_it():
    assert classify(owned(journal_id=None), MINE, [None])[0] == LEGACY
    assert classify(owned(journal_id=None), MINE, [ready_row()])[0] == OWNED


# -- what a removal touches --------------------------------------------------------------

def _entries(*pairs):
    return [sweep.describe(o, category, "why") for o, category in pairs]


def test_removal_groups_take_orphans_and_only_what_was_asked_for():
    entries = _entries((owned("o1"), ORPHAN), (owned("f1", THEIRS, resource_id="i-f"), FOREIGN),
                       (owned("l1", None, resource_id="i-l"), LEGACY), (owned("k1", resource_id="i-k"), OWNED),
                       (owned("o1", kind=ResourceKind.SECURITY_GROUP, resource_id="sg-1"), ORPHAN))
    groups = removal_groups(entries, MINE, include_foreign=False, include_legacy=False)
    assert [(g.key, g.act_as, g.journal_ids) for g in groups] == [("sweep:o1", MINE, [MINE])]
    (target,) = groups[0].targets()
    assert target["instance_ids"] == ["i-1"] and target["created"] is True

    groups = removal_groups(entries, MINE, include_foreign=True, include_legacy=True)
    assert [(g.key, g.act_as, g.journal_ids) for g in groups] == [
        ("sweep:%s:f1" % THEIRS, THEIRS, [THEIRS]), ("sweep:l1", MINE, [None]), ("sweep:o1", MINE, [MINE])]


def test_side_resources_alone_make_a_target_without_a_create():
    entries = _entries((owned("o1", kind=ResourceKind.FIREWALL, resource_id="fw-1"), ORPHAN))
    (group,) = removal_groups(entries, MINE, False, False)
    assert group.targets() == [{"location": AWS.to_dict(), "instance_ids": [], "created": False}]


def test_costs_sum_the_priced_instances_only():
    entries = _entries((owned("o1"), ORPHAN), (owned("o2", resource_id="i-2"), ORPHAN),
                       (owned("o1", kind=ResourceKind.SSH_KEY, resource_id="k"), ORPHAN))
    entries[1]["price_per_hour"] = None
    assert sweep.cost_per_hour(entries) == 1.5
    table = sweep.format_table(entries, {ORPHAN: 1.5, FOREIGN: 0, LEGACY: 0, OWNED: 0})
    assert table[0].split()[:3] == ["CATEGORY", "CLOUD/REGION", "KIND"]
    assert "TOTAL orphan: 2 instance(s), 1.5 $/h (1 without a reported price)" in table


# -- which clouds ------------------------------------------------------------------------

def test_credentials_are_detected_from_options_environment_and_files():
    nothing = {"environ": {}, "exists": lambda path: False}
    assert sweep.has_credentials("local", **nothing)
    assert not sweep.has_credentials("lambda", **nothing)
    assert sweep.has_credentials("lambda", {"api_key": "x"}, **nothing)
    assert sweep.has_credentials("lambda", environ={"LAMBDA_API_KEY": "x"}, exists=lambda path: False)
    assert not sweep.has_credentials("aws", **nothing)
    assert sweep.has_credentials("aws", environ={"AWS_PROFILE": "dev"}, exists=lambda path: False)
    assert sweep.has_credentials("aws", environ={}, exists=lambda path: path.endswith("/.aws/credentials"))
    assert sweep.has_credentials("gcp", environ={"GOOGLE_APPLICATION_CREDENTIALS": "/k.json"},
                                 exists=lambda path: False)
    assert sweep.has_credentials("docker", environ={}, exists=lambda path: path == "/var/run/docker.sock")


def test_an_unknown_cloud_is_named(tmp_path):
    with pytest.raises(sweep.SweepError, match="clouds: unknown cloud"):
        sweep.Sweeper(None, {}, clouds=["nimbus"])


# -- whole sweeps on the local cloud -----------------------------------------------------

@pytest.fixture
def world(tmp_path):
    if not os.path.exists("/usr/sbin/sshd"):
        pytest.skip("the local cloud needs openssh-server (sshd)")
    made = World(tmp_path)
    yield made
    made.close()


class World:
    """A journal and a local cloud root, with instances planted on purpose."""

    def __init__(self, tmp_path):
        self.root = str(tmp_path / "local")
        self.journal = projection.open_journal(str(tmp_path / "journal.sqlite"))
        self.public = ensure_controller_key(str(tmp_path / "id_ed25519"))
        self.options = {"local": {"root": self.root}}

    def provider(self, journal_id):
        return LocalProvider({"root": self.root}, journal_id=journal_id)

    def plant(self, vm_name, journal_id):
        provider = self.provider(journal_id)
        spec = InstanceSpec(vm_name=vm_name, ssh_public_key=self.public)
        offer = provider.plan(ResourceRequest(vm_name))[0]
        return provider.create(offer, provider.prepare(offer, spec), spec)

    def journal_ready(self, vm_name, instance_id):
        """A row as a finished provision leaves it (Ready, owning the instance)."""
        vm = {"name": vm_name, "location": Location("local", "local").to_dict(), "instance_id": instance_id}
        owner = "test:%s" % uuid.uuid4().hex
        self.journal.begin(vm_name, "launch", {"kind": "Ready", "vm": vm, "reused": False, "search": None}, "Ready",
                           True, owner, 60, None)
        self.journal.release(vm_name, owner)

    def listing(self):
        found = self.provider(None).list_owned(Location("local", "local"))
        return sorted((o.vm_name, o.resource_id, o.kind, o.status) for o in found)

    def sweep(self, remove=False, **kwargs):
        return sweep.sweep(self.journal, self.options, ["local"], [], remove, **kwargs)

    def close(self):
        for vm_name in os.listdir(self.root) if os.path.isdir(self.root) else []:
            for instance_id in os.listdir(os.path.join(self.root, vm_name)):
                for pid in LocalProvider._processes(os.path.join(self.root, vm_name, instance_id)):
                    try:
                        os.kill(pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
        self.journal.close()


def _planted(world):
    """An orphan whose journal row was deleted, a journal-owned VM, a legacy instance made
    outside any journal with the identity, and another journal's instance."""
    mine = world.journal.journal_id
    ids = {"orphan": world.plant("lost", mine), "kept": world.plant("kept", mine),
           "legacy": world.plant("legacy", None), "foreign": world.plant("theirs", THEIRS)}
    world.journal_ready("kept", ids["kept"])
    world.journal_ready("lost", ids["orphan"])
    world.journal.execute("DELETE FROM machines WHERE key = ?", ("lost",))  # the row deleted behind it
    return ids


def _by_id(result):
    return {e["id"]: e for e in result["resources"]}


def test_a_dry_run_names_every_kind_and_changes_nothing(world):
    ids = _planted(world)
    before, keys = world.listing(), world.journal.keys()
    result = world.sweep()
    found = _by_id(result)
    assert {k: found[i]["category"] for k, i in ids.items()} == {
        "orphan": ORPHAN, "kept": OWNED, "legacy": LEGACY, "foreign": FOREIGN}
    assert found[ids["orphan"]]["action"] == "would remove"
    assert [e["id"] for e in result["would_remove"]] == [ids["orphan"]]
    assert found[ids["foreign"]]["journal_id"] == THEIRS
    assert result["cost_per_hour"] == {ORPHAN: 0.0, FOREIGN: 0.0, LEGACY: 0.0, OWNED: 0.0, "total": 0.0}
    assert result["removed"] == [] and result["errors"] == []
    assert any(line.startswith("ORPHAN") and ids["orphan"] in line for line in result["table"])
    assert world.listing() == before and world.journal.keys() == keys


def test_removal_takes_exactly_the_orphans(world):
    ids = _planted(world)
    result = world.sweep(remove=True)
    assert [e["id"] for e in result["removed"]] == [ids["orphan"]] and result["not_removed"] == []
    left = {resource_id for _name, resource_id, _kind, _status in world.listing()}
    assert left == {ids["kept"], ids["legacy"], ids["foreign"]}
    row = world.journal.load("sweep:lost")
    assert (row.kind, row.state["kind"], row.terminal) == ("sweep-teardown", "Done", True)
    # Nothing is left to remove: a second sweep finds no orphan.
    assert world.sweep(remove=True)["orphans"] == []


def test_legacy_and_foreign_go_only_when_asked(world):
    ids = _planted(world)
    result = world.sweep(remove=True, include_legacy=True, include_foreign=True)
    assert sorted(e["id"] for e in result["removed"]) == sorted([ids["orphan"], ids["legacy"], ids["foreign"]])
    assert {resource_id for _n, resource_id, _k, _s in world.listing()} == {ids["kept"]}
    assert world.journal.load("sweep:%s:theirs" % THEIRS).state["kind"] == "Done"


def test_a_provision_that_owns_the_name_meanwhile_stops_the_removal(world):
    ids = _planted(world)
    sweeper = sweep.Sweeper(world.journal, world.options, ["local"])
    entries = sweeper.find()["entries"]
    world.journal_ready("lost", ids["orphan"])   # a run of the name adopted it since the listing
    outcome = sweeper.remove(entries)
    assert outcome["removed"] == [] and "not removed" in outcome["not_removed"][0]["error"]
    assert ids["orphan"] in {resource_id for _n, resource_id, _k, _s in world.listing()}


class _Crash(BaseException):
    """The controller dies here."""


def test_a_sweep_killed_after_its_delete_is_resumed_by_the_next(world):
    ids = _planted(world)
    real_delete = LocalProvider.delete
    crashing = world.provider(world.journal.journal_id)

    def delete_then_die(location, vm_name, instance_ids):
        real_delete(crashing, location, vm_name, instance_ids)
        raise _Crash("killed after the delete call, before its commit")

    crashing.delete = delete_then_die
    with pytest.raises(_Crash):
        sweep.sweep(world.journal, world.options, ["local"], [], True, providers={"local": crashing})
    row = world.journal.load("sweep:lost")
    assert not row.terminal and row.state["kind"] == "Requesting"
    world.journal.execute("UPDATE machines SET lease_owner = NULL, lease_expires = NULL")  # the process is gone

    # Its instance is on its way out; the next sweep resumes the interrupted teardown first.
    result = world.sweep(remove=True)
    assert result["resumed"] == ["sweep:lost"]
    assert world.journal.load("sweep:lost").state["kind"] == "Done"
    names = {name for name, _i, _k, _s in world.listing()}
    assert "lost" not in names and {"kept", "legacy", "theirs"} <= names
    assert ids["kept"] in {resource_id for _n, resource_id, _k, _s in world.listing()}
    events = [e["event"] for e in world.journal.events("sweep:lost")]
    assert "resume" in events


def _settled_delete(world, vm_name, instance_id):
    """Delete an instance without its cleanup: its folder stays, what cleanup would remove."""
    provider = world.provider(world.journal.journal_id)
    provider.delete(Location("local", "local"), vm_name, [instance_id])
    folder = os.path.join(world.root, vm_name, instance_id)
    for _attempt in range(500):   # bounded: sshd exits on SIGTERM at once
        if not LocalProvider._processes(folder):
            return
        time.sleep(0.01)
    raise AssertionError("sshd of %s did not exit after SIGTERM" % instance_id)


def test_a_side_resource_left_by_a_delete_without_cleanup_is_an_orphan_and_removed(world):
    instance_id = world.plant("half", world.journal.journal_id)
    _settled_delete(world, "half", instance_id)
    assert world.listing() == [("half", instance_id, ResourceKind.OTHER, None)]
    result = world.sweep(remove=True)
    assert [(e["kind"], e["id"]) for e in result["removed"]] == [(ResourceKind.OTHER, instance_id)]
    assert world.listing() == [] and not os.path.exists(os.path.join(world.root, "half"))


class _KeepingCleanup(LocalProvider):
    """A local adapter whose cleanup removes nothing (as a cloud whose cleanup misses a kind)."""

    def cleanup(self, location, vm_name):
        return None


def test_what_a_teardown_leaves_is_reported_never_claimed_removed(world):
    instance_id = world.plant("half", world.journal.journal_id)
    _settled_delete(world, "half", instance_id)
    keeping = _KeepingCleanup({"root": world.root}, journal_id=world.journal.journal_id)
    result = sweep.sweep(world.journal, world.options, ["local"], [], True, providers={"local": keeping})
    assert result["removed"] == []
    (left,) = result["not_removed"]
    assert left["id"] == instance_id and "still listed after its teardown ended Done" in left["error"]


def test_the_task_checks_its_input_and_a_dry_run_creates_no_journal(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPROV_HOME", str(tmp_path))
    params = {"state": "absent", "clouds": ["local"], "cloud": None, "regions": [], "include_foreign": False,
              "include_legacy": False, "journal": str(tmp_path / "journal.sqlite"), "journal_password": None,
              "teardown_timeout": 0, "cloud_options": {}}
    bad = sweep.run_task(params, check_mode=False)
    assert bad["failed"] and bad["msg"].startswith("teardown_timeout: expected an integer >= 1")
    params["teardown_timeout"] = None
    dry = sweep.run_task(params, check_mode=True)
    assert not dry.get("failed") and dry["changed"] is False and dry["journal_id"] is None
    assert not (tmp_path / "journal.sqlite").exists()
    params["clouds"] = ["nimbus"]
    unknown = sweep.run_task(params, check_mode=True)
    assert unknown["failed"] and unknown["msg"].startswith("clouds: unknown cloud(s) nimbus")


def test_check_mode_predicts_the_removal_and_changes_nothing(world, monkeypatch):
    ids = _planted(world)
    monkeypatch.setenv("GPUPROV_HOME", os.path.dirname(world.root))
    params = {"state": "absent", "clouds": ["local"], "cloud": None, "regions": [], "include_foreign": False,
              "include_legacy": False, "journal": world.journal.path, "journal_password": None,
              "teardown_timeout": None, "cloud_options": world.options}
    before, keys = world.listing(), world.journal.keys()
    result = sweep.run_task(params, check_mode=True)
    assert result["changed"] is True and [e["id"] for e in result["would_remove"]] == [ids["orphan"]]
    assert result["removed"] == [] and world.listing() == before and world.journal.keys() == keys


def test_sweep_keys_are_no_vm_keys():
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.status import is_vm_key
    assert is_vm_key("train1")
    assert not is_vm_key(sweep.sweep_key("train1")) and not is_vm_key(sweep.sweep_key("train1", THEIRS))
    assert not is_vm_key("instance:aws:train1")
