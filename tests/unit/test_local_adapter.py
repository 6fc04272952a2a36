"""The local adapter with real sshd processes: journal identity and every crash window.

A crash is simulated by raising a BaseException (what a SIGKILL leaves behind is the
same: nothing after that point runs, no except/finally of the adapter helps) at each
step of create and delete. A FRESH adapter instance, as after a controller restart,
must then tell the truth: a live sshd is Running (never Failed, never absent), no
process is Failed at once (never Pending), and its delete + cleanup leave no process
and no folder behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import uuid

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import local as local_mod
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, InstanceSpec, Location, ProviderError, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import NEVER_STARTED, LocalProvider
from ansible_collections.gpuprov.cloud.tests.unit.helpers import wait_for

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/sbin/sshd"), reason="needs openssh-server (sshd)")

LOC = Location("local", "local")
JOURNAL = "journal-a"
OTHER_JOURNAL = "journal-b"

# The steps of LocalProvider.create, in the order it runs them.
CREATE_STEPS = ("_write_record", "_write_files", "_check_config", "_mark_spawned", "_spawn", "_write_pid")


class Crash(BaseException):
    """The controller dies here (a BaseException: no `except Exception` of the adapter catches it)."""


# --- fixtures and helpers ------------------------------------------------------------

@pytest.fixture
def root(tmp_path):
    path = tmp_path / "local"
    try:
        yield str(path)
    finally:
        _kill_everything_under(str(path))


@pytest.fixture
def provider(root):
    return LocalProvider({"root": root}, journal_id=JOURNAL)


@pytest.fixture
def spec():
    public = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return InstanceSpec(vm_name="crash-" + uuid.uuid4().hex[:8], ssh_public_key=public + " test")


def _processes_under(root):
    """pids of every live process whose command line names an sshd_config under ``root``, and of every process
    an instance there recorded as spawned (one on its way out shows no command line, and is still live)."""
    marker = root + os.sep
    found = {pid for pid, cmdline in local_mod._sshd_processes() if marker in cmdline}
    for vm_dir in (os.path.join(root, name) for name in (os.listdir(root) if os.path.isdir(root) else [])):
        for folder in (os.path.join(vm_dir, name) for name in (os.listdir(vm_dir) if os.path.isdir(vm_dir) else [])):
            found.add(local_mod._spawned(folder))
    return sorted(found - {None})


def _exited(folder):
    """No process serves the instance folder any more, by the scan or as the process it recorded."""
    return not LocalProvider._processes(folder) and local_mod._spawned(folder) is None


def _kill_everything_under(root):
    for pid in _processes_under(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _launch(provider, spec):
    offer = provider.plan(ResourceRequest(vm_name=spec.vm_name))[0]
    return provider.create(offer, provider.prepare(offer, spec), spec)


def _crash_create(monkeypatch, provider, spec, step, when):
    """Run create with a crash ``when`` ("before"/"after") ``step``; the create must not finish."""
    real = getattr(LocalProvider, step)

    def crashing(*args, **kwargs):
        if when == "before":
            raise Crash(step)
        real(*args, **kwargs)
        raise Crash(step)

    monkeypatch.setattr(LocalProvider, step, crashing)
    with pytest.raises(Crash):
        _launch(provider, spec)
    monkeypatch.undo()


def _fresh(root):
    return LocalProvider({"root": root}, journal_id=JOURNAL)


def _remove_all(root, spec):
    """What the core does with whatever observe reports: delete it, then clean up."""
    fresh = _fresh(root)
    found = fresh.observe(LOC, spec.vm_name)
    fresh.delete(LOC, spec.vm_name, [o.instance_id for o in found])
    wait_for(lambda: not _processes_under(root), "every sshd of the VM to exit")
    fresh.cleanup(LOC, spec.vm_name)
    assert fresh.observe(LOC, spec.vm_name) == []
    assert not os.path.exists(os.path.join(root, spec.vm_name)), os.listdir(os.path.join(root, spec.vm_name))
    assert _processes_under(root) == []


def _assert_truthful(found, root, spec):
    """Every folder with a live process is reported live; nothing is Pending."""
    by_id = {o.instance_id: o for o in found}
    vm_dir = os.path.join(root, spec.vm_name)
    for instance_id in (os.listdir(vm_dir) if os.path.isdir(vm_dir) else []):
        if LocalProvider._processes(os.path.join(vm_dir, instance_id)):
            assert instance_id in by_id, "a live sshd is not reported"
            assert by_id[instance_id].status in (Status.RUNNING, Status.TERMINATING), by_id[instance_id]
    assert all(o.status != Status.PENDING for o in found), found


def _banner(port, deadline_s=10.0):
    """The SSH banner on 127.0.0.1:port (sshd may need a moment to bind)."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                return sock.recv(64)
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


# --- the steps are the ones the tests below crash at -----------------------------------

def test_create_runs_exactly_the_enumerated_steps(monkeypatch, provider, spec):
    """A new step inside create must get its crash window covered here."""
    called = []
    for step in CREATE_STEPS:
        real = getattr(LocalProvider, step)

        def traced(*args, _real=real, _step=step, **kwargs):
            called.append(_step)
            return _real(*args, **kwargs)

        monkeypatch.setattr(LocalProvider, step, traced)
    instance_id = _launch(provider, spec)
    assert tuple(called) == CREATE_STEPS
    [seen] = provider.observe(LOC, spec.vm_name)
    assert seen.instance_id == instance_id and seen.usable
    _remove_all(provider.root, spec)


# --- crash windows inside create ---------------------------------------------------------

# (step, when) -> what a fresh observe reports: None = nothing, else (status, reason prefix)
CREATE_WINDOWS = [
    ("_write_record", "before", None),
    ("_write_files", "before", (Status.FAILED, NEVER_STARTED)),
    ("_check_config", "before", (Status.FAILED, NEVER_STARTED)),
    ("_mark_spawned", "before", (Status.FAILED, NEVER_STARTED)),
    ("_spawn", "before", (Status.FAILED, "sshd is not running")),
    ("_spawn", "after", (Status.RUNNING, None)),          # sshd runs, its pid is not recorded
    ("_write_pid", "after", (Status.RUNNING, None)),      # create was about to return the id
]


@pytest.mark.parametrize("step,when,expected", CREATE_WINDOWS,
                         ids=["%s-%s" % (when, step.strip("_")) for step, when, _e in CREATE_WINDOWS])
def test_crash_inside_create(monkeypatch, root, provider, spec, step, when, expected):
    _crash_create(monkeypatch, provider, spec, step, when)
    found = _fresh(root).observe(LOC, spec.vm_name)
    _assert_truthful(found, root, spec)
    if expected is None:
        assert found == []
    else:
        [seen] = found
        status, reason = expected
        assert seen.status == status, seen
        assert seen.journal_id == JOURNAL
        if status == Status.RUNNING:
            assert seen.usable
            assert _banner(seen.endpoint.port).startswith(b"SSH-2.0-")
        else:
            assert seen.endpoint is None and seen.reason.startswith(reason), seen.reason
    _remove_all(root, spec)


def test_crash_between_folder_and_record_leaves_no_instance(monkeypatch, root, provider, spec):
    """The record is written under a temporary name and renamed: a crash before the rename
    leaves a folder that is no instance (observe skips it) and that cleanup removes."""
    def crashing_rename(src, dst):
        raise Crash("rename")

    monkeypatch.setattr(local_mod.os, "rename", crashing_rename)
    with pytest.raises(Crash):
        _launch(provider, spec)
    monkeypatch.undo()
    vm_dir = os.path.join(root, spec.vm_name)
    assert len(os.listdir(vm_dir)) == 1
    assert _fresh(root).observe(LOC, spec.vm_name) == []
    _remove_all(root, spec)


def test_sshd_started_but_pid_unrecorded_is_running_and_delete_stops_it(monkeypatch, root, provider, spec):
    """The issue's first window: before, observe said Failed and delete could not stop sshd."""
    _crash_create(monkeypatch, provider, spec, "_spawn", "after")
    [folder] = [os.path.join(root, spec.vm_name, i) for i in os.listdir(os.path.join(root, spec.vm_name))]
    assert not os.path.exists(os.path.join(folder, "instance.pid"))
    fresh = _fresh(root)
    [seen] = fresh.observe(LOC, spec.vm_name)
    assert seen.status == Status.RUNNING and seen.usable
    fresh.delete(LOC, spec.vm_name, [seen.instance_id])
    wait_for(lambda: _exited(folder), "sshd to exit after delete")
    assert fresh.observe(LOC, spec.vm_name) == []


def _spawned_without_a_process(root, provider, spec):
    """(instance id, folder) of an instance that create took up to its spawn: record, files and the spawned
    marker, and no process yet (the test starts one of its own)."""
    offer = provider.plan(ResourceRequest(vm_name=spec.vm_name))[0]
    provider.prepare(offer, spec)
    instance_id = "local-" + uuid.uuid4().hex[:12]
    folder = os.path.join(root, spec.vm_name, instance_id)
    port = LocalProvider._free_port()
    provider._write_record(folder, spec, instance_id, port)
    provider._write_files(folder, spec, instance_id, port)
    provider._mark_spawned(folder)
    return instance_id, folder


def test_a_launching_shell_is_found_before_sshd_runs(root, provider, spec):
    """Between fork and exec only the launching shell names the config: it is already live,
    and delete stops it before it becomes sshd."""
    instance_id, folder = _spawned_without_a_process(root, provider, spec)
    slow = subprocess.Popen(  # a launcher that takes its time before exec-ing sshd
        ["/bin/sh", "-c", 'echo started; sleep 2; exec "$0" -D -f "$1" -E "$2" >/dev/null', "/usr/sbin/sshd",
         os.path.join(folder, "sshd_config"), os.path.join(folder, "sshd.log")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        # The shell runs (its own exec is over, its command line readable): Popen may return before that.
        assert slow.stdout.readline() == b"started\n"
        fresh = _fresh(root)
        [seen] = fresh.observe(LOC, spec.vm_name)
        assert seen.status == Status.RUNNING
        fresh.delete(LOC, spec.vm_name, [instance_id])
        assert slow.wait(timeout=10) == -signal.SIGTERM
        assert fresh.observe(LOC, spec.vm_name) == []
        fresh.cleanup(LOC, spec.vm_name)
        assert _processes_under(root) == []
    finally:
        if slow.poll() is None:
            slow.kill()
            slow.wait()
        slow.stdout.close()


def test_sshd_that_started_and_died_is_failed_with_its_log(root, provider, spec):
    instance_id = _launch(provider, spec)
    folder = os.path.join(root, spec.vm_name, instance_id)
    wait_for(lambda: os.path.exists(os.path.join(folder, "sshd.pid")), "sshd to bind")
    for pid in LocalProvider._processes(folder):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: _exited(folder), "sshd to die")
    [seen] = _fresh(root).observe(LOC, spec.vm_name)
    assert seen.status == Status.FAILED and seen.reason.startswith("sshd is not running: ")
    assert "Server listening" in seen.reason
    _remove_all(root, spec)


def test_a_configuration_sshd_rejects_fails_create_at_once(monkeypatch, root, provider, spec):
    """create tests the config before it starts sshd: started untested, an sshd that rejects it lives for a
    moment, long enough for the first observe to call it Running, and the launch would then wait out the
    whole SSH timeout in Connecting (5 minutes by default) on a port nobody listens on."""
    monkeypatch.setattr(local_mod, "_SSHD_CONFIG", local_mod._SSHD_CONFIG + "NoSuchGpuprovOption yes\n")
    with pytest.raises(ProviderError) as info:
        _launch(provider, spec)
    assert info.value.kind == ErrorKind.FAILED
    assert info.value.msg.startswith("sshd rejected its configuration: ") and "NoSuchGpuprovOption" in info.value.msg
    assert _fresh(root).observe(LOC, spec.vm_name) == [] and _processes_under(root) == []
    _remove_all(root, spec)


def test_a_second_create_after_an_interrupted_one_gives_one_running_instance(monkeypatch, root, provider, spec):
    """What the core does: delete the Failed leftover, create again at once (no grace period)."""
    _crash_create(monkeypatch, provider, spec, "_check_config", "before")
    fresh = _fresh(root)
    [leftover] = fresh.observe(LOC, spec.vm_name)
    assert leftover.status == Status.FAILED
    fresh.delete(LOC, spec.vm_name, [leftover.instance_id])
    fresh.cleanup(LOC, spec.vm_name)
    instance_id = _launch(fresh, spec)
    assert [(o.instance_id, o.status) for o in fresh.observe(LOC, spec.vm_name)] == [(instance_id, Status.RUNNING)]
    _remove_all(root, spec)


# --- crash windows inside delete -------------------------------------------------------

def _crash_delete_at_kill(monkeypatch, provider, spec, instance_id, when):
    real_kill = os.kill

    def crashing_kill(pid, sig):
        if when == "after":
            real_kill(pid, sig)
        raise Crash("kill")

    monkeypatch.setattr(local_mod.os, "kill", crashing_kill)
    with pytest.raises(Crash):
        provider.delete(LOC, spec.vm_name, [instance_id])
    monkeypatch.undo()


@pytest.mark.parametrize("when", ["before", "after"])
def test_crash_inside_delete_at_the_signal(monkeypatch, root, provider, spec, when):
    instance_id = _launch(provider, spec)
    _crash_delete_at_kill(monkeypatch, provider, spec, instance_id, when)
    found = _fresh(root).observe(LOC, spec.vm_name)
    _assert_truthful(found, root, spec)
    # Not yet marked deleted: still reported (Running, or Failed once the signalled sshd
    # exited), so the core deletes it again rather than waiting for a "Terminating" one.
    assert [o.instance_id for o in found] == [instance_id]
    assert found[0].status in ((Status.RUNNING,) if when == "before" else (Status.RUNNING, Status.FAILED))
    _remove_all(root, spec)


def test_crash_inside_delete_before_the_mark(monkeypatch, root, provider, spec):
    instance_id = _launch(provider, spec)
    folder = os.path.join(root, spec.vm_name, instance_id)
    real_touch = local_mod._touch

    def crashing_touch(path):
        if path.endswith(local_mod.DELETED):
            raise Crash("mark deleted")
        real_touch(path)

    monkeypatch.setattr(local_mod, "_touch", crashing_touch)
    with pytest.raises(Crash):
        provider.delete(LOC, spec.vm_name, [instance_id])
    monkeypatch.undo()
    wait_for(lambda: _exited(folder), "the signalled sshd to exit")
    [seen] = _fresh(root).observe(LOC, spec.vm_name)
    assert seen.status == Status.FAILED   # signalled and gone, not marked: delete it again
    _remove_all(root, spec)


def test_delete_completed_then_crash_before_cleanup(root, provider, spec):
    instance_id = _launch(provider, spec)
    provider.delete(LOC, spec.vm_name, [instance_id])
    found = _fresh(root).observe(LOC, spec.vm_name)
    assert [(o.instance_id, o.status) for o in found] in ([], [(instance_id, Status.TERMINATING)])
    _remove_all(root, spec)


def test_delete_stops_every_process_of_the_instance_not_only_the_recorded_pid(root, provider, spec):
    instance_id = _launch(provider, spec)
    folder = os.path.join(root, spec.vm_name, instance_id)
    with open(os.path.join(folder, "instance.pid"), "w") as handle:
        handle.write("1\n")   # a stale hint naming an unrelated process
    provider.delete(LOC, spec.vm_name, [instance_id])
    wait_for(lambda: _exited(folder), "sshd to exit")
    assert os.path.exists("/proc/1")


# --- journal identity ---------------------------------------------------------------

def test_every_instance_carries_its_journal_id(root, provider, spec):
    instance_id = _launch(provider, spec)
    with open(os.path.join(root, spec.vm_name, instance_id, "instance.json")) as handle:
        assert json.load(handle)["journal_id"] == JOURNAL
    [seen] = LocalProvider({"root": root}).observe(LOC, spec.vm_name)   # any journal sees it
    assert seen.journal_id == JOURNAL and seen.owned_by(JOURNAL) and not seen.owned_by(OTHER_JOURNAL)
    _remove_all(root, spec)


def test_a_legacy_instance_has_no_journal_id(root, spec):
    legacy = LocalProvider({"root": root})
    instance_id = _launch(legacy, spec)
    record_path = os.path.join(root, spec.vm_name, instance_id, "instance.json")
    with open(record_path) as handle:
        record = json.load(handle)
    record.pop("journal_id")   # as written before journal ids existed
    with open(record_path, "w") as handle:
        json.dump(record, handle)
    [seen] = _fresh(root).observe(LOC, spec.vm_name)
    assert seen.journal_id is None and seen.owned_by(JOURNAL)
    _remove_all(root, spec)


def test_cleanup_never_removes_another_journals_instance(root, provider, spec):
    theirs = LocalProvider({"root": root}, journal_id=OTHER_JOURNAL)
    their_running = _launch(theirs, spec)
    their_deleted = _launch(theirs, spec)
    theirs.delete(LOC, spec.vm_name, [their_deleted])
    wait_for(lambda: len(_processes_under(root)) == 1, "their second sshd to exit")
    mine = _launch(provider, spec)
    provider.delete(LOC, spec.vm_name, [mine])
    wait_for(lambda: _exited(os.path.join(root, spec.vm_name, mine)), "my sshd to exit")
    provider.cleanup(LOC, spec.vm_name)   # their running instance does not make it busy
    left = sorted(os.listdir(os.path.join(root, spec.vm_name)))
    assert left == sorted([their_running, their_deleted])
    assert [o.instance_id for o in provider.observe(LOC, spec.vm_name)] == [their_running]
    theirs.delete(LOC, spec.vm_name, [their_running])
    wait_for(lambda: not _processes_under(root), "their sshd to exit")
    theirs.cleanup(LOC, spec.vm_name)
    assert not os.path.exists(os.path.join(root, spec.vm_name))


def test_cleanup_refuses_while_an_own_instance_runs(root, provider, spec):
    _launch(provider, spec)
    with pytest.raises(ProviderError) as err:
        provider.cleanup(LOC, spec.vm_name)
    assert err.value.kind == ErrorKind.TRANSIENT and "still running" in err.value.msg
    _remove_all(root, spec)


def test_observe_answers_from_the_pid_file_without_a_scan_and_trusts_only_a_process_serving_the_folder(
        monkeypatch, root, provider, spec):
    """A running instance's pid file names its sshd: observe needs no scan of /proc for it. A pid file naming
    a process that did not start when the recorded one did (its pid reused) is not believed: the scan decides."""
    instance_id = _launch(provider, spec)
    folder = os.path.join(root, spec.vm_name, instance_id)
    wait_for(lambda: os.path.exists(os.path.join(folder, "sshd.pid")), "sshd to bind")
    scans = []
    real_scan = local_mod._sshd_processes
    monkeypatch.setattr(local_mod, "_sshd_processes", lambda: scans.append(1) or real_scan())
    [seen] = _fresh(root).observe(LOC, spec.vm_name)
    assert seen.status == Status.RUNNING and scans == []
    for name in ("instance.pid", "sshd.pid"):   # both now name this test's own process, which serves nothing
        with open(os.path.join(folder, name), "w") as handle:
            handle.write("%d\n" % os.getpid())
    # instance.start still holds sshd's start: this process, which started before, is a reused pid.
    [seen] = _fresh(root).observe(LOC, spec.vm_name)
    assert seen.status == Status.RUNNING and scans == [1]   # found by the scan, which the stale pids forced
    _remove_all(root, spec)   # which checks that nothing is left (and this process is still here to check)


def test_the_process_create_spawned_is_live_and_stopped_whatever_its_command_line_shows(root, provider, spec):
    """For a moment of its exec of sshd, the spawned process shows no command line, so no scan can tell it
    is this instance's; the pid file, written after it started, does. observe counts it, delete stops it."""
    instance_id, folder = _spawned_without_a_process(root, provider, spec)
    # Stands for that moment: a live process whose command line names no sshd_config.
    spawned = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        provider._write_pid(folder, spawned.pid)
        assert LocalProvider._processes(folder) == []
        [seen] = _fresh(root).observe(LOC, spec.vm_name)
        assert seen.status == Status.RUNNING and seen.instance_id == instance_id
        _fresh(root).delete(LOC, spec.vm_name, [instance_id])
        assert spawned.wait(timeout=10) == -signal.SIGTERM
        assert _fresh(root).observe(LOC, spec.vm_name) == []
        _fresh(root).cleanup(LOC, spec.vm_name)
        assert not os.path.exists(folder)
    finally:
        if spawned.poll() is None:
            spawned.kill()
            spawned.wait()


def test_an_instance_without_a_recorded_start_is_found_as_before(root, provider, spec):
    """An instance an older version made (a pid file, no start file) is found by its sshd's pid file or the
    scan, and torn down as any other."""
    instance_id = _launch(provider, spec)
    folder = os.path.join(root, spec.vm_name, instance_id)
    wait_for(lambda: os.path.exists(os.path.join(folder, "sshd.pid")), "sshd to bind")
    os.unlink(os.path.join(folder, "instance.start"))
    assert local_mod._spawned(folder) is None
    [seen] = _fresh(root).observe(LOC, spec.vm_name)
    assert seen.status == Status.RUNNING and seen.instance_id == instance_id
    _remove_all(root, spec)
