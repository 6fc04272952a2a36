"""End to end on the docker cloud: the real ansible-playbook, real containers on the real
Docker engine, real sshd, and the journal inventory plugin with ad-hoc ``ansible``.

Skipped, with the reason, only when no Docker engine answers (CI has one and runs them).
Every VM name is unique to this session (prefix ``tde-<hex>``) and every container the
tests make is removed at the end, pass or fail.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import tempfile
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import docker as docker_mod
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import VM_NAME_TAG
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch
from ansible_collections.gpuprov.cloud.tests.crashpoints import harness as crashpoints
from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de
from ansible_collections.gpuprov.cloud.tests.integration.conftest import Ansible

# Docker-engine tests share one engine: under pytest-xdist (make test) they run on one worker, one at a time.
pytestmark = pytest.mark.xdist_group("docker")

PREFIX = "tde-%s" % uuid.uuid4().hex[:6]


# --- fixtures and helpers -----------------------------------------------------------------

@pytest.fixture(scope="module")
def engine():
    client, why = de.engine()
    if client is None:
        pytest.skip("docker end-to-end tests need a Docker engine: %s" % why)
    de.ensure_base_image(client, docker_mod.DEFAULT_BASE_IMAGE)
    try:
        yield client
    finally:
        de.remove_containers(client, PREFIX)   # whatever a failed test left


class Docker(Ansible):
    """ansible-playbook etc. on a throw-away state directory, with VM names of this session."""

    def __init__(self, home, client, control_dir):
        super().__init__(home)
        self.client = client
        # ssh's ControlPath must fit a socket address (108 bytes): pytest's tmp paths may not.
        self.env["ANSIBLE_SSH_CONTROL_PATH_DIR"] = control_dir
        self.made = []

    def name(self, tag: str) -> str:
        found = de.unique_name("%s-%s" % (PREFIX, tag))
        self.made.append(found)
        return found

    def containers(self, vm_name: str):
        """``docker ps -a --filter label=gpuprov-vm-name=<vm_name>``."""
        return self.client.containers.list(all=True, filters={"label": "%s=%s" % (VM_NAME_TAG, vm_name)})

    def provision(self, *args, **kwargs):
        return self.playbook("provision", "-e", "clouds=docker", *args, **kwargs)

    def row(self, name):
        journal = Journal(str(self.journal_path))
        try:
            return journal.load(name), journal.events(name), projection.vm(journal, name)
        finally:
            journal.close()

    def cleanup(self):
        for name in self.made:
            de.remove_containers(self.client, name)


@pytest.fixture
def dock(engine, tmp_path):
    home = tmp_path / "gpuprov-home"
    home.mkdir(mode=0o700)
    control_dir = tempfile.mkdtemp(prefix="gpcp-")
    runner = Docker(home, engine, control_dir)
    try:
        yield runner
    finally:
        runner.cleanup()
        shutil.rmtree(control_dir, ignore_errors=True)


def _options(**docker_options) -> str:
    return json.dumps({"gpuprov_cloud_options": {"docker": docker_options}})


def _this_run(events):
    return events[[i for i, e in enumerate(events) if e["event"] == "begin"][-1]:]


def _published_port(container) -> int:
    container.reload()
    return int(container.attrs["NetworkSettings"]["Ports"]["22/tcp"][0]["HostPort"])


def _assert_nothing_leaked(dock, name):
    assert dock.containers(name) == []
    row, events, vm = dock.row(name)
    # the journal row is terminal and owns nothing (or nothing was journalled at all)
    if row is not None:
        assert row.terminal, (row.label, events)
        assert launch.owned_targets(row.state, row.kind) == [], row.state
        assert not row.lease_owner
    assert vm is None or vm["status"] != "running"


# --- the tests ------------------------------------------------------------------------

def test_provision_ssh_reprovision_down(dock):
    name = dock.name("life")
    first = dock.provision("-e", "vm=%s" % name)
    assert first.rc == 0, first
    assert first.recap()[name]["changed"] == 1, first
    assert "-> Ready" in first.out and "Preparing" in first.out and "Booting" in first.out, first
    # SSH checks before sshd answers (docker-proxy drops them) print no paramiko traceback as a warning
    assert "errantly sent data" not in first.out and "Traceback" not in first.out, first
    assert "[WARNING]" not in first.out.split("PLAY [Provision", 1)[1], first
    # the smoke command ran in the container over SSH: its hostname is the VM name
    smoke = re.search(r"smoke command: (Linux \S+ .*)", first.out)
    assert smoke and smoke.group(1).split()[1] == name, first
    row, _events, vm = dock.row(name)
    assert (row.kind, row.state["kind"]) == ("launch", "Ready")
    record = row.state["vm"]
    assert record["location"]["cloud"] == "docker" and record["python_interpreter"] == "/usr/bin/python3"
    [container] = dock.containers(name)
    assert container.id == record["instance_id"] and container.status == "running"
    assert container.name == "gpuprov-%s" % name
    assert vm["status"] == "running" and vm["ssh_port"] == _published_port(container)

    # A command over plain ssh, through the written config and the pinned host key.
    ssh = subprocess.run(["ssh", "-F", str(dock.home / "ssh_config"), "-o", "BatchMode=yes", name,
                          "cat /etc/debian_version; hostname"], capture_output=True, text=True, timeout=120,
                         check=False)
    assert ssh.returncode == 0, ssh.stderr
    assert ssh.stdout.split()[0].startswith("12") and ssh.stdout.split()[1] == name

    second = dock.provision("-e", "vm=%s" % name)
    assert second.rc == 0, second
    assert second.recap()[name]["changed"] == 0, second
    row, events, _vm = dock.row(name)
    assert row.state["kind"] == "Ready" and row.state["reused"] is True
    assert row.state["vm"]["instance_id"] == container.id
    assert [e["to"] for e in _this_run(events) if e["event"] == "transition"] == ["Connecting", "Ready"]
    assert [c.id for c in dock.containers(name)] == [container.id]

    down = dock.playbook("down", "-e", "vm=%s" % name)
    assert down.rc == 0, down
    assert down.recap()[name]["changed"] == 1, down
    assert dock.containers(name) == []
    row, _events, vm = dock.row(name)
    assert (row.kind, row.state["kind"]) == ("teardown", "Done") and vm is None
    assert row.state["targets"][0]["instance_ids"] == [container.id]
    assert "Host %s\n" % name not in (dock.home / "ssh_config").read_text()

    again = dock.playbook("down", "-e", "vm=%s" % name)
    assert again.rc == 0 and again.recap()[name]["changed"] == 0, again


def test_crash_after_create_is_adopted(dock):
    """SIGKILL right after create returned, before Booting is journalled; the re-run finds the
    container by its label and adopts it: no second container."""
    name = dock.name("crash")
    point = "before commit Creating -> Booting #1"
    points = dock.home.parent / "crashpoints"
    crashed = dock.provision("-e", "vm=%s" % name, extra_env=crashpoints.crash_env(point, points, dock.env))
    assert crashed.rc == -signal.SIGKILL and crashpoints.killed_at(points) == point, crashed
    row, _events, _vm = dock.row(name)
    assert row.state["kind"] == "Creating"          # the create happened, its commit did not
    assert not row.state.get("instance_id")
    [orphan] = dock.containers(name)

    rerun = dock.provision("-e", "vm=%s" % name)
    assert rerun.rc == 0, rerun
    assert "adopted %s" % orphan.id in rerun.out, rerun
    row, _events, _vm = dock.row(name)
    assert row.state["kind"] == "Ready" and row.state["vm"]["instance_id"] == orphan.id
    assert [c.id for c in dock.containers(name)] == [orphan.id]   # exactly one container

    down = dock.playbook("down", "-e", "vm=%s" % name)
    assert down.rc == 0, down
    assert dock.containers(name) == []


def test_fleet_inventory_ping_and_down(dock):
    """Three VMs in one play; the journal inventory lists them with working connection
    variables; ad-hoc ansible reaches each; down (through that inventory) removes all three."""
    names = [dock.name("fleet%d" % i) for i in (1, 2, 3)]
    fleet = dock.home / "fleet.yml"
    fleet.write_text("gpuprov_vms:\n  hosts:\n%s  vars:\n    gpuprov_clouds: [docker]\n"
                     % "".join("    %s:\n" % n for n in names))
    up = dock.playbook("provision", "-i", str(fleet), "--forks", "3")
    assert up.rc == 0, up
    recap = up.recap()
    assert all(recap[n]["changed"] == 1 and recap[n]["failed"] == 0 for n in names), up
    containers = {n: dock.containers(n) for n in names}
    assert all(len(found) == 1 for found in containers.values()), containers
    ports = {n: _published_port(found[0]) for n, found in containers.items()}
    assert len(set(ports.values())) == 3

    source = dock.home / "gpuprov.journal.yml"
    source.write_text("plugin: gpuprov.cloud.journal\n")
    graph = dock.tool("ansible-inventory", "-i", str(source), "--graph")
    assert graph.rc == 0, (graph.out, graph.err)
    for group in ("gpuprov_vms", "cloud_docker", "region_local", "status_running"):
        block = graph.out.split("@%s:" % group, 1)[1].split("@", 1)[0]
        assert sorted(re.findall(r"\|--(\S+)", block)) == sorted(names), (group, graph.out)

    listing = dock.tool("ansible-inventory", "-i", str(source), "--list")
    assert listing.rc == 0, listing.err
    hostvars = json.loads(listing.out)["_meta"]["hostvars"]
    assert sorted(hostvars) == sorted(names)
    for n in names:
        host = {k: v["__ansible_unsafe"] if isinstance(v, dict) and "__ansible_unsafe" in v else v
                for k, v in hostvars[n].items()}
        assert (host["ansible_host"], host["ansible_port"], host["ansible_user"]) == ("127.0.0.1", ports[n], "root")
        assert host["ansible_python_interpreter"] == "/usr/bin/python3"
        assert host["ansible_ssh_private_key_file"] == str(dock.home / "id_ed25519")
        assert "UserKnownHostsFile=%s" % (dock.home / "known_hosts") in host["ansible_ssh_common_args"]
        assert "StrictHostKeyChecking=yes" in host["ansible_ssh_common_args"]
        # The VM's record beyond the connection is the one `gpuprov` dict.
        record = {k: v["__ansible_unsafe"] if isinstance(v, dict) and "__ansible_unsafe" in v else v
                  for k, v in host["gpuprov"].items()}
        assert "HostKeyAlias=%s" % record["host_key_alias"] in host["ansible_ssh_common_args"]
        assert record["instance_id"] == containers[n][0].id

    ping = dock.tool("ansible", "-i", str(source), "gpuprov_vms", "-m", "ansible.builtin.ping", "--forks", "3")
    assert ping.rc == 0, (ping.out, ping.err)
    for n in names:
        assert re.search(r"^%s \| SUCCESS =>" % re.escape(n), ping.out, re.M), ping.out
    assert ping.out.count('"ping": "pong"') == 3, ping.out
    # each host name reaches its own container
    who = dock.tool("ansible", "-i", str(source), "gpuprov_vms", "-m", "ansible.builtin.command",
                    "-a", "hostname", "--forks", "3")
    assert who.rc == 0, (who.out, who.err)
    for n in names:
        assert re.search(r"^%s \| CHANGED \| rc=0 >>\n%s$" % (re.escape(n), re.escape(n)), who.out, re.M), who.out

    down = dock.playbook("down", "-i", str(source), "--forks", "3")
    assert down.rc == 0, down
    assert all(down.recap()[n]["changed"] == 1 for n in names), down
    for n in names:
        assert dock.containers(n) == []
        row, _events, vm = dock.row(n)
        assert (row.kind, row.state["kind"]) == ("teardown", "Done") and vm is None
    empty = dock.tool("ansible-inventory", "-i", str(source), "--list")
    assert empty.rc == 0 and json.loads(empty.out)["_meta"]["hostvars"] == {}, empty.err


# --- bad input: one clear failed task, nothing leaked ---------------------------------------

def test_engine_not_reachable(dock):
    name = dock.name("noengine")
    run = dock.provision("-e", "vm=%s" % name, "-e", _options(docker_host="tcp://127.0.0.1:1"))
    assert run.rc != 0, run
    assert run.recap()[name]["failed"] == 1, run
    assert "Docker engine is not reachable at tcp://127.0.0.1:1" in run.out, run
    assert "Traceback" not in run.out, run
    _assert_nothing_leaked(dock, name)


def test_image_build_failure(dock, engine):
    """A base image without an OpenSSH server: the sshd image build fails with its log."""
    name = dock.name("nosshd")
    repository, tag = "gpuprov-test/no-sshd", uuid.uuid4().hex[:10]
    broken = "%s:%s" % (repository, tag)
    fixer = engine.containers.create(docker_mod.DEFAULT_BASE_IMAGE, entrypoint=["rm", "-f", "/usr/sbin/sshd"],
                                     labels={VM_NAME_TAG: name + "-fixer"})
    try:
        fixer.start()
        assert fixer.wait(timeout=120)["StatusCode"] == 0
        fixer.commit(repository=repository, tag=tag)   # the base minus sshd
    finally:
        fixer.remove(force=True)
    try:
        sshd_tag = docker_mod.default_image_tag(engine.images.get(broken).id)
        run = dock.provision("-e", "vm=%s" % name, "-e", _options(base_image=broken))
        assert run.rc != 0, run
        assert run.recap()[name]["failed"] == 1, run
        assert "building the sshd image" in run.out and "no OpenSSH server" in run.out, run
        assert "Traceback" not in run.out, run
        _assert_nothing_leaked(dock, name)
        with pytest.raises(de.docker.errors.ImageNotFound):
            engine.images.get(sshd_tag)
    finally:
        de.remove_image_and_build_cache(engine, broken)


def test_port_collision(dock, engine):
    """ssh_port fixed to a host port another container publishes: create fails, nothing is left."""
    name = dock.name("port")
    holder = engine.containers.run(docker_mod.DEFAULT_BASE_IMAGE, entrypoint=["sleep", "infinity"], detach=True,
                                   name="gpuprov-%s-holder" % name, labels={VM_NAME_TAG: name + "-holder"},
                                   ports={"22/tcp": ("127.0.0.1", None)})
    try:
        port = _published_port(holder)
        run = dock.provision("-e", "vm=%s" % name, "-e", _options(ssh_port=port))
        assert run.rc != 0, run
        assert run.recap()[name]["failed"] == 1, run
        assert "host port %d (option ssh_port) is already in use" % port in run.out, run
        assert "Traceback" not in run.out, run
        _assert_nothing_leaked(dock, name)
        holder.reload()
        assert holder.status == "running" and _published_port(holder) == port   # untouched
    finally:
        holder.remove(force=True)
