"""The orphan sweep end to end with the real ansible-playbook: orphans planted on purpose on
the local cloud (real sshd) and the docker cloud (the real engine), found with their cost by
``gpuprov.cloud.sweep`` and ``status -e orphans=true``, removed by ``-e delete=true`` while
the journal's own VMs, another journal's and the legacy ones survive, and a sweep SIGKILLed
mid-removal resumed by the next."""

from __future__ import annotations

import contextlib
import signal
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    InstanceSpec, Location, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import ensure_controller_key
from ansible_collections.gpuprov.cloud.tests.crashpoints import harness as crashpoints
from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de

# Docker-engine tests share one engine: under pytest-xdist (make test) they run on one worker, one at a time.
pytestmark = pytest.mark.xdist_group("docker")

THEIRS = "c" * 32   # another controller's journal id


def _journal(ansible) -> Journal:
    return Journal(str(ansible.journal_path))


def _journal_id(ansible) -> str:
    journal = _journal(ansible)
    try:
        return journal.journal_id
    finally:
        journal.close()


def _forget(ansible, name):
    """Delete the VM's journal row (and projection row) behind its instance: an orphan."""
    journal = _journal(ansible)
    try:
        instance_id = journal.load(name).state["vm"]["instance_id"]
        journal.execute("DELETE FROM machines WHERE key = ?", (name,))
        journal.execute("DELETE FROM vms WHERE name = ?", (name,))
        return instance_id
    finally:
        journal.close()


def _row(ansible, key):
    journal = _journal(ansible)
    try:
        return journal.load(key)
    finally:
        journal.close()


def _plant(provider, vm_name, public_key):
    """An instance made outside any run, carrying the identity ``provider`` tags with."""
    spec = InstanceSpec(vm_name=vm_name, ssh_public_key=public_key)
    offer = provider.plan(ResourceRequest(vm_name))[0]
    return provider.create(offer, provider.prepare(offer, spec), spec)


def _live_ids(ansible):
    return {folder.rsplit("/", 1)[1] for folder in ansible.live_sshd()}


@pytest.fixture
def docker_cloud():
    """(the engine, the containers made), or None without an engine (the docker part is then left out)."""
    client, _why = de.engine()
    if client is None:
        yield None
        return
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker import DEFAULT_BASE_IMAGE
    de.ensure_base_image(client, DEFAULT_BASE_IMAGE)
    made = []
    yield client, made
    for container_id in made:
        with contextlib.suppress(Exception):
            client.api.remove_container(container_id, force=True)


def _containers(client, ids):
    return {c["Id"] for c in client.api.containers(all=True, filters={"id": list(ids)})} & set(ids)


def test_sweep_names_orphans_with_cost_and_delete_leaves_only_the_journals_own(ansible, docker_cloud):
    assert ansible.playbook("provision", "-e", "vm=kept").rc == 0
    assert ansible.playbook("provision", "-e", "vm=lost").rc == 0
    kept = _row(ansible, "kept").state["vm"]["instance_id"]
    lost = _forget(ansible, "lost")                      # a journal row deleted behind an instance
    mine = _journal_id(ansible)
    public = ensure_controller_key(str(ansible.home / "id_ed25519"))
    root = str(ansible.home / "local")
    legacy = _plant(LocalProvider({"root": root}), "legacy", public)                    # no journal id
    foreign = _plant(LocalProvider({"root": root}, journal_id=THEIRS), "theirs", public)  # another journal's
    clouds = "local"
    docker_ids = {}
    if docker_cloud is not None:
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker import DockerProvider
        client, made = docker_cloud
        tag = "sw%s" % uuid.uuid4().hex[:8]
        docker_ids = {"orphan": _plant(DockerProvider({}, journal_id=mine), tag + "-orphan", public),
                      "foreign": _plant(DockerProvider({}, journal_id=THEIRS), tag + "-theirs", public)}
        made.extend(docker_ids.values())
        clouds = "local,docker"
    assert _live_ids(ansible) == {kept, lost, legacy, foreign}

    status = ansible.playbook("status", "-e", "orphans=true", "-e", "clouds=%s" % clouds)
    assert status.rc == 0, status
    assert "ORPHAN local/local instance %s of VM lost (0 $/h)" % lost in status.out, status
    assert "gpuprov.cloud.sweep -e delete=true" in status.out
    if docker_ids:
        assert "ORPHAN docker/local instance %s of VM %s-orphan (0 $/h)" % (docker_ids["orphan"], tag) in status.out

    # The default: every cloud with credentials here, local always, docker where its socket is.
    dry = ansible.playbook("sweep", *([] if docker_ids else ["-e", "clouds=local"]))
    assert dry.rc == 0, dry
    table = [line for line in dry.out.splitlines() if line.strip().startswith('"')]
    orphan_rows = [line for line in table if line.strip().strip('",').startswith("ORPHAN")]
    assert any(lost in line and "would remove" in line and " 0 " in line for line in orphan_rows), dry
    assert not any(i in line for i in (kept, legacy, foreign) for line in orphan_rows), dry
    assert any(kept in line and "OWNED" in line for line in table), dry
    assert any(legacy in line and "LEGACY" in line for line in table), dry
    assert any(foreign in line and "FOREIGN" in line for line in table), dry
    assert "orphan(s) costing 0.0 $/h" in dry.out, dry
    assert dry.recap()["localhost"]["changed"] == 0
    if docker_ids:
        assert any(docker_ids["orphan"] in line and "would remove" in line for line in orphan_rows), dry
        assert any(docker_ids["foreign"] in line and "FOREIGN" in line for line in table), dry
    # A dry run changes nothing.
    assert _live_ids(ansible) == {kept, lost, legacy, foreign}
    assert _row(ansible, "sweep:lost") is None
    if docker_ids:
        assert _containers(client, docker_ids.values()) == set(docker_ids.values())

    removed = ansible.playbook("sweep", "-e", "delete=true", "-e", "clouds=%s" % clouds)
    assert removed.rc == 0, removed
    assert removed.recap()["localhost"]["changed"] == 1, removed
    assert "Removed %d resource(s)" % (1 + bool(docker_ids)) in removed.out, removed
    assert _live_ids(ansible) == {kept, legacy, foreign}
    assert _row(ansible, "sweep:lost").state["kind"] == "Done"
    assert _row(ansible, "kept").state["kind"] == "Ready"
    if docker_ids:
        assert _containers(client, docker_ids.values()) == {docker_ids["foreign"]}

    again = ansible.playbook("sweep", "-e", "delete=true", "-e", "clouds=%s" % clouds)
    assert again.rc == 0 and again.recap()["localhost"]["changed"] == 0, again
    assert ansible.playbook("down", "-e", "vm=kept").rc == 0


@pytest.mark.parametrize("point", [
    "after commit begin Requesting #1",              # journalled, nothing deleted yet
    "before commit Requesting -> AwaitingGone #1",   # the delete was made, its commit was not
    "after commit Requesting -> AwaitingGone #1",    # killed while waiting for it to go
    "after commit AwaitingGone -> CleaningUp #1",    # the instance is gone, its folder is not cleaned up
])
def test_a_sweep_killed_mid_removal_is_resumed_by_the_next(ansible, point):
    assert ansible.playbook("provision", "-e", "vm=lost").rc == 0
    lost = _forget(ansible, "lost")
    folder = ansible.home.parent / "crashpoints"
    crashed = ansible.playbook("sweep", "-e", "delete=true", "-e", "clouds=local",
                               extra_env=crashpoints.crash_env(point, folder, ansible.env))
    assert crashed.rc == -signal.SIGKILL and crashpoints.killed_at(folder) == point, crashed
    row = _row(ansible, "sweep:lost")
    assert row is not None and not row.terminal, row.state

    rerun = ansible.playbook("sweep", "-e", "delete=true", "-e", "clouds=local")
    assert rerun.rc == 0, rerun
    assert "resuming the interrupted sweep teardown sweep:lost" in rerun.out, rerun
    assert _row(ansible, "sweep:lost").state["kind"] == "Done"
    assert lost not in _live_ids(ansible)
    left = LocalProvider({"root": str(ansible.home / "local")}).list_owned(Location("local", "local"))
    assert [o for o in left if o.vm_name == "lost"] == []
