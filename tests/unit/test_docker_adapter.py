"""The docker adapter against the REAL Docker engine: real images, containers, sshd.

Tests that need the engine skip with the reason when none answers (CI has one and
runs them). Every test uses VM names of its own and removes what it made, even
when it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import docker as docker_mod
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, BlockScope, BootScript, ErrorKind, InstanceSpec, K3sAccess, Location,
    ProviderError, ResourceRequest, Status,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker import (
    DEFAULT_BASE_IMAGE, DockerProvider, container_name,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.registry import get_provider
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import install_command
from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de

LOC = Location("docker", "local")
PREFIX = "tda-%s" % uuid.uuid4().hex[:6]   # every VM name of this session starts so


# --- fixtures -------------------------------------------------------------------------

@pytest.fixture(scope="session")
def engine():
    client, why = de.engine()
    if client is None:
        pytest.skip(why)
    de.ensure_base_image(client, DEFAULT_BASE_IMAGE)
    try:
        yield client
    finally:
        de.remove_containers(client, PREFIX)


@pytest.fixture(scope="session")
def provider(engine):
    return DockerProvider()


@pytest.fixture(scope="session")
def prepared(provider):
    """The sshd image, built once per session (a no-op when it exists)."""
    spec = InstanceSpec(vm_name=PREFIX + "-prep", ssh_public_key="unused")
    offer = provider.plan(ResourceRequest(vm_name=spec.vm_name))[0]
    return provider.prepare(offer, spec)


@pytest.fixture
def names(engine):
    """Unique VM names for one test; their containers are removed at the end."""
    made = []

    def new(tag="vm"):
        name = de.unique_name("%s-%s" % (PREFIX, tag))
        made.append(name)
        return name

    try:
        yield new
    finally:
        for name in made:
            de.remove_containers(engine, name)


@pytest.fixture(scope="session")
def key():
    return de.new_key()


def _offer(provider, name):
    return provider.plan(ResourceRequest(vm_name=name))[0]


def _launch(provider, prepared, name, public_key, **spec_kwargs):
    spec = InstanceSpec(vm_name=name, ssh_public_key=public_key, **spec_kwargs)
    offer = _offer(provider, name)
    instance_id = provider.create(offer, prepared, spec)
    return instance_id, de.wait_usable(provider, LOC, name)


def _free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


# --- without an engine ---------------------------------------------------------------

def test_registry_returns_the_docker_adapter():
    assert isinstance(get_provider("docker"), DockerProvider)


def test_missing_sdk_is_a_clear_invalid_request(monkeypatch):
    monkeypatch.setattr(docker_mod, "HAS_DOCKER", False)
    with pytest.raises(ProviderError) as err:
        DockerProvider()
    assert err.value.kind == ErrorKind.INVALID_REQUEST
    assert "requires docker" in err.value.msg and install_command("docker", "docker") in err.value.msg


def test_capabilities_follow_privileged():
    plain = DockerProvider().capabilities()
    assert plain.boot_script is True
    assert plain.kubernetes is False
    assert plain.k3s_access == K3sAccess.SSH_TUNNEL
    assert plain.poll_interval_s == 1.0 and plain.boot_timeout_s <= 300
    privileged = DockerProvider({"privileged": True}).capabilities()
    assert privileged.kubernetes is True


def test_default_base_image_is_what_the_build_script_makes():
    script = de.BUILD_SCRIPT.read_text()
    assert DockerProvider().base_image == DEFAULT_BASE_IMAGE
    assert "GPUPROV_BASE_IMAGE:-%s}" % DEFAULT_BASE_IMAGE in script


def test_image_tag_changes_with_the_base_image():
    one = docker_mod.default_image_tag("sha256:aaa")
    assert one == docker_mod.default_image_tag("sha256:aaa")
    assert one != docker_mod.default_image_tag("sha256:bbb")
    assert one.startswith("gpuprov/sshd:")


@pytest.mark.parametrize("host", ["unix:///nonexistent/gpuprov/docker.sock", "tcp://127.0.0.1:%d" % _free_port()],
                         ids=["unix-socket", "tcp-port"])
def test_unreachable_engine(host):
    """plan/prepare: Unavailable for the whole cloud (nothing exists, try other clouds);
    create/observe/delete: Transient (something may exist; the core retries and re-observes)."""
    provider = DockerProvider({"docker_host": host})
    with pytest.raises(ProviderError) as err:
        provider.plan(ResourceRequest(vm_name="unreachable"))
    assert err.value.kind == ErrorKind.UNAVAILABLE
    assert err.value.block_scope == BlockScope.CLOUD
    assert host in err.value.msg and "not reachable" in err.value.msg
    spec = InstanceSpec(vm_name="unreachable", ssh_public_key="ssh-ed25519 AAAA x")
    offer = docker_mod.Offer(cloud="docker", region="local", instance_type="container")
    with pytest.raises(ProviderError) as err:
        provider.prepare(offer, spec)
    assert err.value.kind == ErrorKind.UNAVAILABLE
    for call in (lambda: provider.create(offer, {"image": "x"}, spec),
                 lambda: provider.observe(LOC, "unreachable"),
                 lambda: provider.delete(LOC, "unreachable", ["0" * 64])):
        with pytest.raises(ProviderError) as err:
            call()
        assert err.value.kind == ErrorKind.TRANSIENT
        assert "not reachable" in err.value.msg


def test_engine_that_never_answers_is_transient():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts connections in the kernel, never answers
    try:
        provider = DockerProvider({"docker_host": "tcp://127.0.0.1:%d" % listener.getsockname()[1],
                                   "timeout": 1})
        with pytest.raises(ProviderError) as err:
            provider.plan(ResourceRequest(vm_name="hung"))
        assert err.value.kind == ErrorKind.TRANSIENT
        assert "did not answer" in err.value.msg
    finally:
        listener.close()


def test_bad_docker_host_url_is_invalid_request():
    with pytest.raises(ProviderError) as err:
        DockerProvider({"docker_host": "bogus://nowhere"}).plan(ResourceRequest(vm_name="x"))
    assert err.value.kind == ErrorKind.INVALID_REQUEST
    assert "bogus://nowhere" in err.value.msg


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root and setpriv to run a client as an unprivileged user")
def test_socket_permission_denied_is_credentials(tmp_path):
    """What a user outside the docker group gets: a clear Credentials error, not 'unreachable'."""
    tmp_path.chmod(0o755)
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    path.chmod(0)
    code = (
        "from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker import DockerProvider\n"
        "from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import *\n"
        "try:\n"
        "    DockerProvider({'docker_host': 'unix://%s'}).plan(ResourceRequest(vm_name='x'))\n"
        "except ProviderError as e:\n"
        "    print(e.kind + '|' + e.msg)\n" % path)
    try:
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               sys.executable, "-c", code], capture_output=True, text=True, check=False)
    finally:
        server.close()
    kind, _sep, msg = proc.stdout.strip().partition("|")
    assert kind == ErrorKind.CREDENTIALS, (proc.stdout, proc.stderr)
    assert "permission denied" in msg and "docker group" in msg


def test_cleanup_is_a_no_op():
    provider = DockerProvider({"docker_host": "unix:///nonexistent/gpuprov/docker.sock"})
    assert provider.cleanup(LOC, "anything") is None
    assert provider.cleanup(LOC, "anything") is None


# --- plan ------------------------------------------------------------------------------

def test_plan_one_local_offer(provider):
    offers = provider.plan(ResourceRequest(vm_name="plan1"))
    assert len(offers) == 1
    offer = offers[0]
    assert (offer.cloud, offer.region, offer.instance_type) == ("docker", "local", "container")
    assert offer.available and offer.gpu is None and offer.gpu_count == 0
    assert offer.offer_id == "docker:local:container"
    assert docker_mod.Offer.from_dict(offer.to_dict()) == offer


def test_gpu_ask_without_gpu_runtime_is_an_unavailable_offer(provider, engine):
    offers = provider.plan(ResourceRequest(vm_name="plan2", gpu="H100", gpu_count=2))
    assert len(offers) == 1
    offer = offers[0]
    if "nvidia" in (engine.info().get("Runtimes") or {}):
        assert offer.available and offer.gpu == "H100" and offer.gpu_count == 2
    else:
        assert not offer.available
        assert "exposes no GPUs" in offer.unavailable_reason
        assert "without a GPU" in offer.unavailable_reason


def test_other_regions_are_an_invalid_request(provider):
    with pytest.raises(ProviderError) as info:
        provider.plan(ResourceRequest(vm_name="plan3", regions=["us-east-1"]))
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    assert "us-east-1" in info.value.msg and "its regions: local" in info.value.msg
    assert provider.plan(ResourceRequest(vm_name="plan3", regions=["local"]))[0].available
    # regions is shared by the request's clouds: another cloud's region next to this one's is no error
    assert provider.plan(ResourceRequest(vm_name="plan3", regions=["us-east-1", "local"]))[0].available


def test_plan_rejects_a_bad_vm_name(provider):
    with pytest.raises(ProviderError) as err:
        provider.plan(ResourceRequest(vm_name="Bad_Name"))
    assert err.value.kind == ErrorKind.INVALID_REQUEST


# --- prepare ---------------------------------------------------------------------------

def test_prepare_is_idempotent(provider, prepared, engine):
    again = provider.prepare(_offer(provider, "prep2"), InstanceSpec(vm_name="prep2", ssh_public_key="x"))
    assert again["image"] == prepared["image"] and again["image_id"] == prepared["image_id"]
    assert again["built"] is False
    image = engine.images.get(prepared["image"])
    assert image.labels.get("gpuprov-image") == "sshd"
    # no host key is baked into the image: each container makes its own
    out = engine.containers.run(prepared["image"], entrypoint=["sh", "-c", "ls /etc/ssh"], remove=True)
    assert b"ssh_host_" not in out and b"sshd_config" in out


def test_prepare_builds_a_missing_image(engine):
    tag = "gpuprov-test/sshd:%s" % uuid.uuid4().hex[:10]
    provider = DockerProvider({"image": tag})
    spec = InstanceSpec(vm_name="prep3", ssh_public_key="x")
    try:
        first = provider.prepare(_offer(provider, "prep3"), spec)
        assert first["built"] is True and first["image"] == tag
        assert engine.images.get(tag).id == first["image_id"]
        second = provider.prepare(_offer(provider, "prep3"), spec)
        assert second["built"] is False and second["image_id"] == first["image_id"]
    finally:
        engine.images.remove(tag, noprune=True)


def test_missing_base_image_is_invalid_request(engine):
    provider = DockerProvider({"base_image": "gpuprov-test/no-such-base:%s" % uuid.uuid4().hex[:8]})
    with pytest.raises(ProviderError) as err:
        provider.prepare(_offer(provider, "prep4"), InstanceSpec(vm_name="prep4", ssh_public_key="x"))
    assert err.value.kind == ErrorKind.INVALID_REQUEST
    assert "scripts/build-base-image.sh" in err.value.msg and "base_image" in err.value.msg


def test_build_failure_is_failed_with_the_log(engine):
    """A base image without sshd: the build's check fails; the error carries the log."""
    repository, tag = "gpuprov-test/no-sshd", uuid.uuid4().hex[:10]
    broken = "%s:%s" % (repository, tag)
    fixer = engine.containers.create(DEFAULT_BASE_IMAGE, entrypoint=["rm", "-f", "/usr/sbin/sshd"])
    try:
        fixer.start()
        assert fixer.wait(timeout=120)["StatusCode"] == 0
        fixer.commit(repository=repository, tag=tag)   # the base, minus the OpenSSH server
    finally:
        fixer.remove(force=True)
    try:
        provider = DockerProvider({"base_image": broken})
        sshd_tag = docker_mod.default_image_tag(engine.images.get(broken).id)
        with pytest.raises(ProviderError) as err:
            provider.prepare(_offer(provider, "prep5"), InstanceSpec(vm_name="prep5", ssh_public_key="x"))
        assert err.value.kind == ErrorKind.FAILED
        assert "no OpenSSH server" in err.value.msg
        assert "last lines of the build log" in err.value.msg
        # nothing left behind: no image under the sshd tag, no intermediate container
        with pytest.raises(de.docker.errors.ImageNotFound):
            engine.images.get(sshd_tag)
        assert engine.containers.list(all=True, filters={"ancestor": broken}) == []
    finally:
        de.remove_image_and_build_cache(engine, broken)


# --- create / observe / SSH / delete --------------------------------------------------

def test_full_lifecycle_with_a_real_ssh_login(provider, prepared, names, key, engine):
    pkey, public = key
    name = names("life")
    instance_id, seen = _launch(provider, prepared, name, public)
    assert seen.instance_id == instance_id
    assert seen.status == Status.RUNNING
    assert seen.endpoint.host == "127.0.0.1" and seen.endpoint.user == "root"
    assert seen.endpoint.port != 22 and seen.location == LOC

    container = engine.containers.get(instance_id)
    assert container.name == container_name(name) == "gpuprov-" + name
    assert container.labels[VM_NAME_TAG] == name
    assert container.attrs["HostConfig"]["RestartPolicy"]["Name"] in ("no", "")
    bindings = container.attrs["HostConfig"]["PortBindings"]["22/tcp"]
    assert bindings[0]["HostIp"] == "127.0.0.1"

    ssh = de.ssh_connect(seen.endpoint, pkey)
    try:
        rc, out, _err = de.run(ssh, "id -un; hostname; cat /etc/debian_version")
        assert rc == 0
        user, hostname, version = out.split()
        assert user == "root" and hostname == name and version.startswith("12")
    finally:
        ssh.close()

    provider.delete(LOC, name, [instance_id])
    assert provider.observe(LOC, name) == []
    from docker.errors import NotFound  # pylint: disable=import-outside-toplevel
    with pytest.raises(NotFound):
        engine.containers.get(instance_id)
    provider.delete(LOC, name, [instance_id])   # again: already gone = success
    provider.cleanup(LOC, name)


def test_password_and_wrong_key_logins_are_refused(provider, prepared, names, key):
    pkey, public = key
    name = names("auth")
    _id, seen = _launch(provider, prepared, name, public)
    de.ssh_connect(seen.endpoint, pkey).close()  # sshd is up
    other, _other_public = de.new_key()
    with pytest.raises(de.paramiko.AuthenticationException):
        de.ssh_connect(seen.endpoint, other)


def test_each_container_has_its_own_host_key(provider, prepared, names, key):
    pkey, public = key
    fingerprints = []
    for tag in ("hk1", "hk2"):
        _id, seen = _launch(provider, prepared, names(tag), public)
        ssh = de.ssh_connect(seen.endpoint, pkey)
        try:
            host_key = ssh.get_transport().get_remote_server_key()
            fingerprints.append((host_key.get_name(), host_key.get_base64()))
        finally:
            ssh.close()
    assert fingerprints[0][0] == fingerprints[1][0]
    assert fingerprints[0][1] != fingerprints[1][1]


def test_boot_script_runs_at_start_with_its_env(provider, prepared, names, key):
    pkey, public = key
    token = uuid.uuid4().hex
    script = BootScript("#!/bin/sh\nset -e\necho \"$MARKER\" > /root/boot-marker\necho booted-ok\n",
                        env={"MARKER": token})
    _id, seen = _launch(provider, prepared, names("boot"), public, boot_script=script)
    ssh = de.ssh_connect(seen.endpoint, pkey)
    try:
        rc, out, err = de.run(ssh, "for i in $(seq 1 300); do [ -s /var/lib/gpuprov/boot.status ] && break; "
                                   "sleep 0.2; done; cat /var/lib/gpuprov/boot.status /root/boot-marker "
                                   "/var/log/gpuprov-boot.log")
        assert rc == 0, err
        assert out.split() == ["0", token, "booted-ok"]
    finally:
        ssh.close()


def test_failing_boot_script_records_its_status(provider, prepared, names, key):
    pkey, public = key
    _id, seen = _launch(provider, prepared, names("bootfail"), public,
                        boot_script=BootScript("echo about-to-fail >&2\nexit 7\n"))
    ssh = de.ssh_connect(seen.endpoint, pkey)
    try:
        rc, out, _err = de.run(ssh, "for i in $(seq 1 300); do [ -s /var/lib/gpuprov/boot.status ] && break; "
                                    "sleep 0.2; done; cat /var/lib/gpuprov/boot.status /var/log/gpuprov-boot.log")
        assert rc == 0 and out.split() == ["7", "about-to-fail"]
    finally:
        ssh.close()


def test_non_root_ssh_user(provider, prepared, names, key):
    pkey, public = key
    _id, seen = _launch(provider, prepared, names("user"), public, ssh_user="ubuntu")
    assert seen.endpoint.user == "ubuntu"
    ssh = de.ssh_connect(seen.endpoint, pkey)
    try:
        assert de.run(ssh, "id -un")[1].strip() == "ubuntu"
    finally:
        ssh.close()


def test_second_create_of_the_same_name_is_transient_and_adoptable(provider, prepared, names, key):
    _pkey, public = key
    name = names("dup")
    first, _seen = _launch(provider, prepared, name, public)
    spec = InstanceSpec(vm_name=name, ssh_public_key=public)
    with pytest.raises(ProviderError) as err:
        provider.create(_offer(provider, name), prepared, spec)
    assert err.value.kind == ErrorKind.TRANSIENT
    assert "already exists" in err.value.msg
    assert [o.instance_id for o in provider.observe(LOC, name)] == [first]


def test_fixed_port_collision_fails_and_leaves_nothing(provider, prepared, names, key, engine):
    _pkey, public = key
    port = _free_port()
    holder = names("porta")
    DockerProvider({"ssh_port": port}).create(_offer(provider, holder), prepared,
                                              InstanceSpec(vm_name=holder, ssh_public_key=public))
    loser = names("portb")
    with pytest.raises(ProviderError) as err:
        DockerProvider({"ssh_port": port}).create(_offer(provider, loser), prepared,
                                                  InstanceSpec(vm_name=loser, ssh_public_key=public))
    assert err.value.kind == ErrorKind.FAILED
    assert str(port) in err.value.msg and "already" in err.value.msg
    assert provider.observe(LOC, loser) == []
    assert de.containers_of(engine, loser) == []
    assert de.wait_usable(provider, LOC, holder).endpoint.port == port


def test_create_needs_a_key_and_a_prepared_image(provider, prepared, names):
    name = names("bad")
    with pytest.raises(ProviderError) as err:
        provider.create(_offer(provider, name), prepared, InstanceSpec(vm_name=name, ssh_public_key=" "))
    assert err.value.kind == ErrorKind.INVALID_REQUEST
    with pytest.raises(ProviderError) as err:
        provider.create(_offer(provider, name), {}, InstanceSpec(vm_name=name, ssh_public_key="k"))
    assert err.value.kind == ErrorKind.INVALID_REQUEST
    assert provider.observe(LOC, name) == []


def test_observe_normalises_paused_and_exited(provider, prepared, names, key, engine):
    _pkey, public = key
    name = names("state")
    instance_id, _seen = _launch(provider, prepared, name, public)
    container = engine.containers.get(instance_id)
    container.pause()
    try:
        [paused] = provider.observe(LOC, name)
        assert paused.status == Status.STOPPED and paused.endpoint is None and not paused.usable
    finally:
        container.unpause()
    container.kill(signal="SIGKILL")
    container.wait(timeout=60)
    [dead] = provider.observe(LOC, name)
    assert dead.status == Status.FAILED and dead.endpoint is None
    assert "exit code 137" in dead.reason
    provider.delete(LOC, name, [instance_id])
    assert provider.observe(LOC, name) == []


def test_observe_sees_only_its_own_vm(provider, prepared, names, key):
    _pkey, public = key
    a, b = names("obsa"), names("obsb")
    id_a, _seen_a = _launch(provider, prepared, a, public)
    id_b, _seen_b = _launch(provider, prepared, b, public)
    assert [o.instance_id for o in provider.observe(LOC, a)] == [id_a]
    assert [o.instance_id for o in provider.observe(LOC, b)] == [id_b]
    assert provider.observe(LOC, names("nothing")) == []


def test_delete_unknown_id_succeeds(provider, names):
    provider.delete(LOC, names("unknown"), ["0" * 64, "deadbeef"])
    provider.delete(LOC, names("unknown"), [])


def test_delete_refuses_another_vms_container(provider, prepared, names, key, engine):
    _pkey, public = key
    owner, other = names("own"), names("other")
    instance_id, _seen = _launch(provider, prepared, owner, public)
    with pytest.raises(ProviderError) as err:
        provider.delete(LOC, other, [instance_id])
    assert err.value.kind == ErrorKind.INVALID_REQUEST
    assert engine.containers.get(instance_id).status == "running"


def test_diagnose_reports_failed_containers(provider, prepared, names, key, engine):
    _pkey, public = key
    name = names("diag")
    instance_id, _seen = _launch(provider, prepared, name, public)
    assert provider.diagnose(LOC, name)["findings"] == []
    engine.containers.get(instance_id).kill(signal="SIGKILL")
    engine.containers.get(instance_id).wait(timeout=60)
    report = provider.diagnose(LOC, name)
    assert report["instances"][0]["status"] == Status.FAILED
    assert "exit code 137" in report["findings"][0]


# --- journal identity ----------------------------------------------------------------

JOURNAL = "journal-a"


def test_containers_carry_the_journal_id_and_observe_reports_it(prepared, names, key, engine):
    _pkey, public = key
    name = names("jid")
    mine = DockerProvider(journal_id=JOURNAL)
    instance_id = mine.create(_offer(mine, name), prepared, InstanceSpec(vm_name=name, ssh_public_key=public))
    labels = engine.containers.get(instance_id).labels
    assert labels[JOURNAL_ID_TAG] == JOURNAL and labels[VM_NAME_TAG] == name
    [seen] = DockerProvider(journal_id="journal-b").observe(LOC, name)   # every journal sees it
    assert seen.journal_id == JOURNAL and not seen.owned_by("journal-b") and seen.owned_by(JOURNAL)


def test_a_container_without_a_journal_id_is_legacy(provider, prepared, names, key):
    _pkey, public = key
    name = names("legacy")
    instance_id, _seen = _launch(provider, prepared, name, public)   # an adapter without a journal id
    [seen] = DockerProvider(journal_id=JOURNAL).observe(LOC, name)
    assert seen.instance_id == instance_id and seen.journal_id is None and seen.owned_by(JOURNAL)


# --- crash windows inside create and delete ----------------------------------------------
#
# Every state-changing request the adapter sends to the engine is a step; a crash (a
# BaseException, which no `except Exception` of the adapter catches: what a SIGKILL
# leaves) is raised just before or just after each. A FRESH adapter must then report
# the truth, and its delete must leave nothing, after which a second create of the
# same (deterministic) container name works.

class Crash(BaseException):
    """The controller dies here."""


def _engine_steps(monkeypatch, crash_at=None, when=None, fail_at=None):
    """Trace (and crash at) the adapter's state-changing engine requests: (method, path)."""
    from docker.api.client import APIClient
    steps = []

    for method in ("_post", "_put", "_delete"):
        real = getattr(APIClient, method)

        def hooked(self, url, *args, _real=real, _method=method, **kwargs):
            index = len(steps)
            path = re.sub(r"/containers/[0-9a-f]{64}", "/containers/ID", re.sub(r"^.*?/v[0-9.]+", "", url))
            steps.append((_method.strip("_").upper(), path))
            if index == fail_at:
                raise de.docker.errors.APIError("injected failure of %s %s" % steps[-1])
            if index == crash_at and when == "before":
                raise Crash(steps[-1])
            result = _real(self, url, *args, **kwargs)
            if index == crash_at and when == "after":
                raise Crash(steps[-1])
            return result

        monkeypatch.setattr(APIClient, method, hooked)
    return steps


CREATE_STEPS = [("POST", "/containers/create"), ("PUT", "/containers/ID/archive"), ("POST", "/containers/ID/start")]


def test_create_sends_exactly_the_enumerated_steps(monkeypatch, prepared, names, key):
    """A new state-changing request inside create must get its crash window covered below."""
    _pkey, public = key
    name = names("steps")
    fresh = DockerProvider(journal_id=JOURNAL)
    offer = _offer(fresh, name)
    steps = _engine_steps(monkeypatch)
    fresh.create(offer, prepared, InstanceSpec(vm_name=name, ssh_public_key=public))
    monkeypatch.undo()
    assert steps == CREATE_STEPS


def _after_the_crash(engine, name, public, prepared, expected):
    """A fresh adapter: observe tells the truth; delete leaves nothing; create works again."""
    fresh = DockerProvider(journal_id=JOURNAL)
    found = fresh.observe(LOC, name)
    containers = de.containers_of(engine, name)
    assert sorted(o.instance_id for o in found) == sorted(c.id for c in containers)
    if expected is None:
        assert found == []
    else:
        [seen] = found
        assert seen.status == expected, seen
        assert seen.journal_id == JOURNAL
        if expected == Status.FAILED:
            assert seen.reason == docker_mod.CREATED_NOT_STARTED
            assert containers[0].status == "created"
    fresh.delete(LOC, name, [o.instance_id for o in found])
    fresh.cleanup(LOC, name)
    assert fresh.observe(LOC, name) == [] and de.containers_of(engine, name) == []
    again = fresh.create(_offer(fresh, name), prepared, InstanceSpec(vm_name=name, ssh_public_key=public))
    assert de.wait_usable(fresh, LOC, name).instance_id == again


# (index of the step in CREATE_STEPS, before/after) -> the status a fresh observe reports
CREATE_WINDOWS = [
    (0, "before", None),
    (0, "after", Status.FAILED),     # created: no files, not started
    (1, "after", Status.FAILED),     # created with its files, not started
    (2, "before", Status.FAILED),
    (2, "after", Status.RUNNING),    # started; create never returned the id
]


@pytest.mark.parametrize("index,when,expected", CREATE_WINDOWS,
                         ids=["%s-%s" % (w, CREATE_STEPS[i][1].rsplit("/", 1)[1]) for i, w, _e in CREATE_WINDOWS])
def test_crash_inside_create(monkeypatch, prepared, names, key, engine, index, when, expected):
    _pkey, public = key
    name = names("crash")
    adapter = DockerProvider(journal_id=JOURNAL)
    offer = _offer(adapter, name)
    _engine_steps(monkeypatch, crash_at=index, when=when)
    with pytest.raises(Crash):
        adapter.create(offer, prepared, InstanceSpec(vm_name=name, ssh_public_key=public))
    monkeypatch.undo()
    _after_the_crash(engine, name, public, prepared, expected)


def test_crash_while_create_removes_a_container_that_failed_to_start(monkeypatch, prepared, names, key, engine):
    """create removes a container whose start failed; a crash before that removal leaves it
    created, and observe says so."""
    _pkey, public = key
    name = names("crashrm")
    adapter = DockerProvider(journal_id=JOURNAL)
    offer = _offer(adapter, name)
    steps = _engine_steps(monkeypatch, fail_at=2, crash_at=3, when="before")
    with pytest.raises(Crash):
        adapter.create(offer, prepared, InstanceSpec(vm_name=name, ssh_public_key=public))
    monkeypatch.undo()
    assert steps[3] == ("DELETE", "/containers/ID")
    _after_the_crash(engine, name, public, prepared, Status.FAILED)


def test_a_create_interrupted_container_blocks_the_name_until_deleted(monkeypatch, prepared, names, key, engine):
    """What the core meets on the re-run: the deterministic name is taken (Transient: re-observe),
    observe says Failed (not Pending), and after delete the create succeeds."""
    _pkey, public = key
    name = names("rerun")
    adapter = DockerProvider(journal_id=JOURNAL)
    spec = InstanceSpec(vm_name=name, ssh_public_key=public)
    _engine_steps(monkeypatch, crash_at=0, when="after")
    with pytest.raises(Crash):
        adapter.create(_offer(adapter, name), prepared, spec)
    monkeypatch.undo()
    fresh = DockerProvider(journal_id=JOURNAL)
    with pytest.raises(ProviderError) as err:
        fresh.create(_offer(fresh, name), prepared, spec)
    assert err.value.kind == ErrorKind.TRANSIENT and "already exists" in err.value.msg
    _after_the_crash(engine, name, public, prepared, Status.FAILED)


DELETE_STEPS = [("DELETE", "/containers/ID")]


@pytest.mark.parametrize("when", ["before", "after"])
def test_crash_inside_delete(monkeypatch, prepared, names, key, engine, when):
    _pkey, public = key
    name = names("crashdel")
    adapter = DockerProvider(journal_id=JOURNAL)
    instance_id = adapter.create(_offer(adapter, name), prepared, InstanceSpec(vm_name=name, ssh_public_key=public))
    steps = _engine_steps(monkeypatch, crash_at=0, when=when)
    with pytest.raises(Crash):
        adapter.delete(LOC, name, [instance_id])
    monkeypatch.undo()
    assert steps == DELETE_STEPS
    _after_the_crash(engine, name, public, prepared, Status.RUNNING if when == "before" else None)


def test_created_container_is_failed_not_pending(provider, prepared, names, key, engine):
    """A container that never started (made behind the adapter's back here) is Failed at once."""
    _pkey, public = key
    name = names("created")
    container = engine.containers.create(prepared["image"], name=container_name(name),
                                         labels={VM_NAME_TAG: name})
    [seen] = provider.observe(LOC, name)
    assert seen.instance_id == container.id
    assert seen.status == Status.FAILED and seen.reason == docker_mod.CREATED_NOT_STARTED and seen.endpoint is None
    provider.delete(LOC, name, [container.id])
    assert provider.observe(LOC, name) == []


@pytest.mark.parametrize("when", ["before", "after"])
def test_crash_inside_prepare_build(monkeypatch, prepared, engine, when):
    """prepare's one state-changing request is the build; the engine tags the image only when
    the build succeeds (and cancels a build whose client went away), so after a crash a fresh
    prepare finds either no image under the tag (and builds it) or a complete one."""
    tag = "gpuprov-test/sshd:%s" % uuid.uuid4().hex[:10]
    spec = InstanceSpec(vm_name=PREFIX + "-prepcrash", ssh_public_key="x")
    adapter = DockerProvider({"image": tag}, journal_id=JOURNAL)
    offer = _offer(adapter, spec.vm_name)
    steps = _engine_steps(monkeypatch, crash_at=0, when=when)
    try:
        with pytest.raises(Crash):
            adapter.prepare(offer, spec)
        monkeypatch.undo()
        assert [method for method, _path in steps] == ["POST"] and steps[0][1].startswith("/build")
        again = DockerProvider({"image": tag}, journal_id=JOURNAL).prepare(offer, spec)
        image = engine.images.get(tag)
        assert again["image_id"] == image.id and image.labels.get("gpuprov-image") == "sshd"
    finally:
        monkeypatch.undo()
        try:
            engine.images.remove(tag, noprune=True)
        except de.docker.errors.ImageNotFound:
            pass
