"""The k3s installer (roles/k3s/files/k3s-install.sh) run on its own, as root, in containers of the
docker test cloud's base image on the real Docker engine, with the stand-ins of tests/fixtures playing
what cannot run here: the FAKE k3s (and copies of it "built for" one architecture), a FAKE ``uname``
that reports another machine, a FAKE ``curl`` that serves a FAKE k3s release from a folder (the
download fallback fetches from GitHub), a FAKE ``systemctl`` with ``/run/systemd/system`` (a systemd
host), the FAKE k3s install script, a FAKE ``nvidia-smi`` and a FAKE NVIDIA runtime.

Skipped, with the reason, only when no Docker engine answers. Containers are named ``k3i-<hex>-...``
and removed at the end, pass or fail.
"""

from __future__ import annotations

import hashlib
import io
import json
import pathlib
import tarfile
import uuid

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import boot_probe
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import VM_NAME_TAG
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker import DEFAULT_BASE_IMAGE
from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de

pytestmark = pytest.mark.xdist_group("docker")

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
INSTALLER = REPO / "roles" / "k3s" / "files" / "k3s-install.sh"
PREFIX = "k3i-%s" % uuid.uuid4().hex[:6]
VERSION = "v1.36.3+k3s1"
RELEASE = "github.com/k3s-io/k3s/releases/download/%s" % VERSION
BUNDLE = "/var/lib/gpuprov/k3s-airgap-bundle"
# k3s's names per architecture (its install.sh: setup_verify_arch; scripts/package-cli)
BINARIES = {"amd64": "k3s", "arm64": "k3s-arm64", "arm": "k3s-armhf"}
MACHINES = {"amd64": "x86_64", "arm64": "aarch64", "arm": "armv7l"}


def fake_k3s_for(arch):
    """The FAKE k3s as a binary built for ``arch``: on another host it fails as the kernel would."""
    text = (FIXTURES / "fake-k3s").read_text()
    assert 'FAKE_K3S_BUILT_FOR = "any"' in text
    return text.replace('FAKE_K3S_BUILT_FOR = "any"', 'FAKE_K3S_BUILT_FOR = "%s"' % arch).encode()


def fake_uname(machine):
    """A FAKE uname (tests only) that reports ``machine`` for -m and asks the real one otherwise."""
    return ("#!/bin/sh\n# FAKE uname (tests only): this host plays a %s machine\n"
            'if [ "${1:-}" = -m ]; then echo %s; else exec /usr/bin/uname "$@"; fi\n' % (machine, machine)).encode()


def fake_release():
    """A FAKE k3s release (tests only), as k3s publishes one: per architecture the binary, the images
    tarball and sha256sum-<arch>.txt. Returns {path under the fake curl's root: bytes}."""
    files = {}
    for arch, binary in BINARIES.items():
        images = "k3s-airgap-images-%s.tar.zst" % arch
        body = {binary: fake_k3s_for(arch), images: b"FAKE k3s images (tests only) " + arch.encode()}
        sums = "".join("%s  %s\n" % (hashlib.sha256(data).hexdigest(), name) for name, data in sorted(body.items()))
        for name, data in body.items():
            files["%s/%s" % (RELEASE, name)] = data
        files["%s/sha256sum-%s.txt" % (RELEASE, arch)] = sums.encode()
    return files


class Host:
    """A container of the base image, root inside; ``run`` runs the installer."""

    def __init__(self, client, tag):
        self.name = "%s-%s-%s" % (PREFIX, tag, uuid.uuid4().hex[:4])
        self.container = client.containers.run(DEFAULT_BASE_IMAGE, ["sleep", "infinity"], detach=True,
                                               name=self.name, labels={VM_NAME_TAG: self.name}, init=True)
        self.put({"/opt/gpuprov-test/k3s-install.sh": INSTALLER.read_bytes()})

    def put(self, files, mode=0o755):
        """Write {absolute path: bytes} into the container (parent folders made)."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            folders = set()
            for path in files:
                parts = pathlib.PurePosixPath(path).parts[1:-1]
                for i in range(1, len(parts) + 1):
                    folders.add("/".join(parts[:i]))
            for folder in sorted(folders):
                info = tarfile.TarInfo(folder)
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            for path, data in files.items():
                info = tarfile.TarInfo(path.lstrip("/"))
                info.size = len(data)
                info.mode = mode
                tar.addfile(info, io.BytesIO(data))
        buffer.seek(0)
        assert self.container.put_archive("/", buffer.getvalue())

    def sh(self, script, env=None):
        code, out = self.container.exec_run(["sh", "-c", script], environment=env or {})
        return code, out.decode(errors="replace")

    def run(self, **env):
        """The installer over "SSH" (route ssh), GPU off unless asked, no metadata lookups."""
        base = {"GPUPROV_K3S_ROUTE": "ssh", "GPUPROV_K3S_METADATA": "off", "GPUPROV_K3S_GPU": "false",
                "GPUPROV_K3S_START_WAIT": "60", "GPUPROV_K3S_VERSION": VERSION, "FAKE_CURL_ROOT": "/srv/fake-curl"}
        base.update({k: str(v) for k, v in env.items()})
        return self.sh("sh /opt/gpuprov-test/k3s-install.sh 2>&1", base)

    def marker(self):
        _code, out = self.sh("cat /var/lib/gpuprov/k3s-install.status")
        return boot_probe.parse_marker(out) or {}

    def kubectl(self, *args):
        """What ``k3s kubectl`` prints on stdout (it must succeed)."""
        code, (out, err) = self.container.exec_run(["/usr/local/bin/k3s", "kubectl"] + list(args), demux=True)
        assert code == 0, (out, err)
        return (out or b"").decode()

    def serve(self, files):
        """Files the fake curl serves: {path under its root (host/path): bytes}."""
        files = dict(files, README=b"the FAKE curl's root (tests only)\n")
        self.put({"/srv/fake-curl/%s" % path: data for path, data in files.items()}, mode=0o644)
        self.put({"/usr/local/bin/curl": (FIXTURES / "fake-curl").read_bytes()})

    def requests(self):
        return self.sh("cat /srv/fake-curl/requests.log 2>/dev/null")[1].split()


@pytest.fixture(scope="module")
def engine():
    client, why = de.engine()
    if client is None:
        pytest.skip("the k3s installer tests need a Docker engine: %s" % why)
    de.ensure_base_image(client, DEFAULT_BASE_IMAGE)
    try:
        yield client
    finally:
        de.remove_containers(client, PREFIX)


@pytest.fixture
def host(engine, request):
    made = []

    def make(tag):
        made.append(Host(engine, tag))
        return made[-1]

    try:
        yield make
    finally:
        for found in made:
            de.remove_containers(engine, found.name)


def airgap_bundle(arch, binaries=None):
    """{path: bytes} of an air-gap bundle pushed to the VM: the binaries named (name -> arch built for;
    default: the release's for ``arch``) and the images tarball for ``arch``."""
    binaries = binaries or {BINARIES[arch]: arch}
    files = {"%s/%s" % (BUNDLE, name): fake_k3s_for(built) for name, built in binaries.items()}
    files["%s/k3s-airgap-images-%s.tar.zst" % (BUNDLE, arch)] = b"FAKE k3s images (tests only)"
    return files


# --- 1. the architecture: the release binary k3s publishes for this host ----------------------------------

@pytest.mark.parametrize("arch", ["amd64", "arm64", "arm"])
def test_the_download_fallback_takes_the_release_binary_and_checksums_for_this_hosts_architecture(host, arch):
    vm = host("dl-%s" % arch)
    vm.put({"/usr/local/bin/uname": fake_uname(MACHINES[arch])})
    vm.serve(fake_release())
    code, out = vm.run()
    assert code == 0, out
    marker = vm.marker()
    assert (marker["state"], marker["k3s_version"]) == ("done", "v1.31.4+fake-k3s1"), marker
    base = "https://github.com/k3s-io/k3s/releases/download/v1.36.3%2Bk3s1/"
    # the names k3s's install.sh downloads: k3s${SUFFIX} and sha256sum-${ARCH}.txt
    assert vm.requests() == [base + "sha256sum-%s.txt" % arch, base + BINARIES[arch]], vm.requests()
    # the installed binary is the one built for this host, and it runs here
    assert vm.sh("sha256sum /usr/local/bin/k3s")[1].split()[0] == hashlib.sha256(fake_k3s_for(arch)).hexdigest()
    again_code, again = vm.run()
    assert again_code == 0 and vm.marker()["changed"] is False, again
    assert len(vm.requests()) == 2                            # nothing downloaded twice


def test_a_download_that_does_not_match_the_release_checksum_is_refused(host):
    vm = host("sum")
    release = fake_release()
    release["%s/k3s" % RELEASE] = b"#!/bin/sh\necho tampered\n"
    vm.serve(release)
    code, out = vm.run()
    assert code != 0, out
    error = vm.marker()["error"]
    assert "v1.36.3%2Bk3s1/k3s does not match its checksum in sha256sum-amd64.txt" in error, error
    assert vm.sh("test -e /usr/local/bin/k3s")[0] != 0


def test_an_airgap_bundle_without_this_hosts_binary_names_the_one_it_needs_and_the_ones_it_has(host):
    vm = host("nobin")
    vm.put(airgap_bundle("amd64", {"k3s-arm64": "arm64"}))
    code, out = vm.run(GPUPROV_K3S_AIRGAP_DIR=BUNDLE)
    assert code != 0, out
    error = vm.marker()["error"]
    assert "the air-gap bundle has no k3s binary for this x86_64 host (k3s); it has k3s-arm64" in error
    assert "it has k3s-arm64, which k3s publishes for other architectures" in error, error
    # on an aarch64 host the same bundle's k3s-arm64 is the one
    vm.put({"/usr/local/bin/uname": fake_uname("aarch64")})
    vm.put(airgap_bundle("arm64", {"k3s-arm64": "arm64"}))
    code, out = vm.run(GPUPROV_K3S_AIRGAP_DIR=BUNDLE)
    assert code == 0, out
    assert vm.marker()["state"] == "done"


# --- 3. the version gate: a binary that cannot run, or says no version, is refused -------------------------

def test_a_binary_for_another_architecture_is_refused_naming_it_and_what_it_printed(host):
    vm = host("arch")
    vm.put({"/usr/local/bin/uname": fake_uname("aarch64")})
    # a bundle assembled with the amd64 binary saved as "k3s" (what docs/airgap.md once told arm64 users to do)
    vm.put(airgap_bundle("arm64", {"k3s": "amd64"}))
    code, out = vm.run(GPUPROV_K3S_AIRGAP_DIR=BUNDLE)
    assert code != 0, out
    marker = vm.marker()
    assert marker["state"] == "failed", marker
    assert ("the k3s binary %s/k3s cannot run on this aarch64 host: '--version' exited 126 and printed" % BUNDLE
            in marker["error"]), marker
    assert "Exec format error" in marker["error"] and "k3s publishes this host's as k3s-arm64" in marker["error"]
    # nothing was installed or started
    assert vm.sh("ls /usr/local/bin/k3s /usr/local/bin/k3s.gpuprov-candidate /var/lib/gpuprov/k3s.pid 2>&1")[1] \
        .count("No such file") == 3


@pytest.mark.parametrize("output, status, words", [
    ("", 1, "'--version' exited 1 and printed nothing"),
    ("", 0, "cannot read the version of the k3s binary /opt/k3s: '--version' printed nothing"),
    ("Usage: k3s [global options]\nmore\n", 0,
     "cannot read the version of the k3s binary /opt/k3s: '--version' printed 'Usage: k3s [global options]', not "
     "'k3s version v<major>.<minor>.<patch>+k3s<n> (<commit>)'"),
])
def test_a_version_that_cannot_be_read_is_refused_saying_what_was_printed(host, output, status, words):
    vm = host("ver")
    vm.put({"/opt/k3s": (FIXTURES / "fake-k3s").read_bytes()})
    code, out = vm.run(GPUPROV_K3S_BINARY="/opt/k3s", FAKE_K3S_VERSION_OUTPUT=output, FAKE_K3S_VERSION_EXIT=status)
    assert code != 0, out
    marker = vm.marker()
    assert marker["state"] == "failed" and words in marker["error"], marker
    assert vm.sh("test -e /var/lib/gpuprov/k3s.pid")[0] != 0          # k3s was never started


# --- 5. systemd hosts: k3s's own air-gap install (its install script, INSTALL_K3S_SKIP_DOWNLOAD=true) --------

def systemd_host(vm):
    vm.put({"/usr/local/bin/systemctl": (FIXTURES / "fake-systemctl").read_bytes()})
    assert vm.sh("mkdir -p /run/systemd/system")[0] == 0


def test_a_systemd_host_gets_k3s_service_from_k3s_install_script_with_skip_download(host):
    vm = host("sysd")
    systemd_host(vm)
    files = airgap_bundle("amd64")
    files["%s/install.sh" % BUNDLE] = (FIXTURES / "fake-k3s-install.sh").read_bytes()
    # the unit an earlier installer wrote itself is replaced by k3s's
    files["/etc/systemd/system/k3s.service"] = (b"[Unit]\nDescription=Lightweight Kubernetes (installed by gpuprov.cloud)"
                                                b"\n\n[Service]\nExecStart=/usr/local/bin/k3s server\n")
    vm.put(files)
    code, out = vm.run(GPUPROV_K3S_AIRGAP_DIR=BUNDLE, HTTPS_PROXY="http://proxy.internal:3128",
                       K3S_NODE_NAME="sysd-node")
    assert code == 0, out
    marker = vm.marker()
    assert (marker["state"], marker["manager"]) == ("done", "systemd"), marker
    ran = vm.sh("cat /var/log/fake-k3s-install.log")[1]
    assert "run: server" in ran and "INSTALL_K3S_SKIP_DOWNLOAD=true" in ran, ran
    unit = vm.sh("cat /etc/systemd/system/k3s.service")[1]
    assert "EnvironmentFile=-/etc/systemd/system/k3s.service.env" in unit, unit
    env_file = vm.sh("cat /etc/systemd/system/k3s.service.env")[1]
    assert "HTTPS_PROXY=http://proxy.internal:3128" in env_file and "K3S_NODE_NAME=sysd-node" in env_file
    assert vm.sh("test -x /usr/local/bin/k3s-killall.sh && test -x /usr/local/bin/k3s-uninstall.sh")[0] == 0
    assert vm.sh("systemctl is-active k3s")[1].strip() == "active"
    # a re-run changes nothing and runs the script no more
    code, out = vm.run(GPUPROV_K3S_AIRGAP_DIR=BUNDLE)
    assert code == 0 and vm.marker()["changed"] is False, out
    assert vm.sh("grep -c '^run:' /var/log/fake-k3s-install.log")[1].strip() == "1"


def test_a_systemd_host_without_k3s_install_script_fails_saying_where_to_put_it(host):
    vm = host("noscript")
    systemd_host(vm)
    vm.serve({})                                  # get.k3s.io cannot be reached: every download is a 404
    vm.put(airgap_bundle("amd64"))
    code, out = vm.run(GPUPROV_K3S_AIRGAP_DIR=BUNDLE)
    assert code != 0, out
    error = vm.marker()["error"]
    assert "k3s's air-gap install runs k3s's install script with INSTALL_K3S_SKIP_DOWNLOAD=true" in error, error
    assert "the air-gap bundle has no install.sh and https://get.k3s.io cannot be downloaded" in error, error
    assert vm.sh("test -e /etc/systemd/system/k3s.service")[0] != 0      # no unit of the installer's own


# --- 6. GPU: a k3s that would not find the NVIDIA runtime where it is ------------------------------------

def gpu_host(vm, runtime_dir="/usr/bin"):
    vm.put({"/usr/local/bin/nvidia-smi": (FIXTURES / "fake-nvidia-smi").read_bytes(),
            "%s/nvidia-container-runtime" % runtime_dir:
                (FIXTURES / "fake-nvidia-container-toolkit" / "usr" / "bin" / "nvidia-container-runtime").read_bytes()})
    files = airgap_bundle("amd64")
    files["%s/nvidia-device-plugin.tar" % BUNDLE] = b"FAKE NVIDIA device plugin image (tests only)"
    vm.put(files)


def test_a_k3s_that_searches_only_its_path_is_refused_when_the_runtime_is_only_in_the_toolkit_folder(host):
    vm = host("rtpath")
    gpu_host(vm, "/usr/local/nvidia/toolkit")          # where NVIDIA's GPU Operator puts the toolkit
    code, out = vm.run(GPUPROV_K3S_AIRGAP_DIR=BUNDLE, GPUPROV_K3S_GPU="true", FAKE_K3S_VERSION="v1.29.9+k3s1")
    assert code != 0, out
    marker = vm.marker()
    assert marker["state"] == "failed", marker
    assert "k3s v1.29.9+k3s1 looks for nvidia-container-runtime only on its PATH" in marker["error"], marker
    assert "v1.29.10+k3s1, v1.30.6+k3s1 and v1.31.2+k3s1" in marker["error"], marker
    assert vm.sh("test -e /var/lib/gpuprov/k3s.pid")[0] != 0
    # the backport's release finds it there: the node gets the GPU
    code, out = vm.run(GPUPROV_K3S_AIRGAP_DIR=BUNDLE, GPUPROV_K3S_GPU="true", FAKE_K3S_VERSION="v1.29.10+k3s1")
    assert code == 0, out
    assert "nvidia (/usr/local/nvidia/toolkit/nvidia-container-runtime)" in vm.sh("cat /var/log/k3s.log")[1]
    node = json.loads(vm.kubectl("get", "nodes", "-o", "json"))["items"][0]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "1", node


# --- 2. GPU off: the device plugin's objects and the node label go, once -----------------------------------

def test_gpu_off_removes_the_device_plugin_objects_and_the_node_label_then_changes_nothing(host):
    vm = host("gpuoff")
    gpu_host(vm)
    code, out = vm.run(GPUPROV_K3S_AIRGAP_DIR=BUNDLE, GPUPROV_K3S_GPU="true")
    assert code == 0, out
    assert vm.kubectl("get", "daemonset", "-n", "kube-system", "-o", "name").split() == [
        "daemonset.apps/nvidia-device-plugin-daemonset"]
    assert vm.kubectl("get", "addon", "-n", "kube-system", "-o", "name").split() == [
        "addon.k3s.cattle.io/gpuprov-nvidia-device-plugin"]
    node = vm.kubectl("get", "nodes", "-l", "gpuprov.cloud/gpu", "-o", "name").split()
    assert len(node) == 1, node

    code, out = vm.run(GPUPROV_K3S_AIRGAP_DIR=BUNDLE, GPUPROV_K3S_GPU="false")
    assert code == 0, out
    marker = vm.marker()
    assert (marker["state"], marker["gpu"], marker["changed"]) == ("done", False, True), marker
    assert ("GPU off: removed daemonset.apps/nvidia-device-plugin-daemonset "
            "addon.k3s.cattle.io/gpuprov-nvidia-device-plugin %s:gpuprov.cloud/gpu" % node[0]) in out, out
    assert vm.kubectl("get", "daemonset", "-n", "kube-system", "-o", "name").split() == []
    assert vm.kubectl("get", "addon", "-n", "kube-system", "-o", "name").split() == []
    assert vm.kubectl("get", "nodes", "-l", "gpuprov.cloud/gpu", "-o", "name").split() == []
    assert vm.sh("test -e /var/lib/rancher/k3s/server/manifests/gpuprov-nvidia-device-plugin.yaml")[0] != 0
    config = vm.sh("cat /etc/rancher/k3s/config.yaml")[1]
    assert "default-runtime" not in config and "gpuprov.cloud/gpu" not in config, config

    code, out = vm.run(GPUPROV_K3S_AIRGAP_DIR=BUNDLE, GPUPROV_K3S_GPU="false")
    assert code == 0 and vm.marker()["changed"] is False, out
    assert "GPU off" not in out
