"""docs/airgap.md's bundle script, run as written for every architecture it offers, against a FAKE
k3s release served by the FAKE curl (tests/fixtures/fake-curl) and a FAKE docker; and the releases the
docs, the role and the installer pin agree."""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import subprocess

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
DOCS = (REPO / "docs" / "airgap.md").read_text()
DEFAULTS = yaml.safe_load((REPO / "roles" / "k3s" / "defaults" / "main.yml").read_text())
SPECS = yaml.safe_load((REPO / "roles" / "k3s" / "meta" / "argument_specs.yml").read_text())
INSTALLER = (REPO / "roles" / "k3s" / "files" / "k3s-install.sh").read_text()
VERSION = DEFAULTS["k3s_version"]
# k3s's names per architecture (its install.sh setup_verify_arch, scripts/package-cli)
BINARIES = {"amd64": "k3s", "arm64": "k3s-arm64", "arm": "k3s-armhf"}

FAKE_DOCKER = """#!/bin/sh
# FAKE docker (tests only): pull logs what it was asked; save -o FILE writes a stand-in image tarball.
echo "docker $*" >>"$FAKE_CURL_ROOT/docker.log"
if [ "$1" = save ]; then
    while [ $# -gt 0 ]; do [ "$1" = -o ] && { shift; echo "FAKE image tarball (tests only)" >"$1"; }; shift; done
fi
"""


def bundle_script():
    section = DOCS.split("## How to assemble it", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)


def fake_release(root):
    """A FAKE k3s release (tests only) of the pinned version under the fake curl's root, and get.k3s.io."""
    folder = root / "github.com" / "k3s-io" / "k3s" / "releases" / "download" / VERSION
    folder.mkdir(parents=True)
    for arch, binary in BINARIES.items():
        body = {binary: ("FAKE k3s binary for %s (tests only)\n" % arch).encode(),
                "k3s-airgap-images-%s.tar.zst" % arch: ("FAKE images for %s (tests only)\n" % arch).encode()}
        for name, data in body.items():
            (folder / name).write_bytes(data)
        (folder / ("sha256sum-%s.txt" % arch)).write_text(
            "".join("%s  %s\n" % (hashlib.sha256(d).hexdigest(), n) for n, d in sorted(body.items())))
    (root / "get.k3s.io").mkdir()
    (root / "get.k3s.io" / "index").write_text("#!/bin/sh\n# FAKE k3s install script (tests only)\n")
    return folder


def run_script(tmp_path, arch):
    root = tmp_path / "curl-root"
    root.mkdir()
    release = fake_release(root)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_bytes((REPO / "tests" / "fixtures" / "fake-curl").read_bytes())
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    bundle = tmp_path / "bundle"
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ["PATH"]), FAKE_CURL_ROOT=str(root), ARCH=arch,
               BUNDLE=str(bundle))
    proc = subprocess.run(["sh", "-c", bundle_script()], env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=120, check=False)
    requests = (root / "requests.log").read_text().split() if (root / "requests.log").exists() else []
    return proc, bundle, release, requests, root


@pytest.mark.parametrize("arch", sorted(BINARIES))
def test_the_docs_bundle_script_gets_the_binary_k3s_publishes_for_each_architecture(tmp_path, arch):
    proc, bundle, release, requests, root = run_script(tmp_path, arch)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    base = "https://github.com/k3s-io/k3s/releases/download/%s/" % VERSION.replace("+", "%2B")
    assert requests == [base + BINARIES[arch], base + "k3s-airgap-images-%s.tar.zst" % arch,
                        base + "sha256sum-%s.txt" % arch, "https://get.k3s.io"], requests
    binary = bundle / BINARIES[arch]
    assert binary.read_bytes() == (release / BINARIES[arch]).read_bytes() and os.access(binary, os.X_OK)
    assert (bundle / ("k3s-airgap-images-%s.tar.zst" % arch)).read_bytes() == (
        release / ("k3s-airgap-images-%s.tar.zst" % arch)).read_bytes()
    assert (bundle / "install.sh").is_file()
    # NVIDIA publishes the device plugin for amd64 and arm64: pulled for the bundle's platform
    docker = (root / "docker.log").read_text() if (root / "docker.log").exists() else ""
    if arch == "arm":
        assert docker == "" and not (bundle / "nvidia-device-plugin.tar").exists()
    else:
        assert "docker pull --platform linux/%s %s" % (arch, DEFAULTS["k3s_device_plugin_image"]) in docker
        assert (bundle / "nvidia-device-plugin.tar").is_file()
    # what the installer looks for on a host of that architecture is there
    names = {"amd64": "x86_64", "arm64": "aarch64", "arm": "armv7l"}
    wanted = subprocess.run(["sh", "-c", arch_snippet() + 'echo "$RELEASE_BINARY $ARCH"'],
                            env=dict(os.environ, FAKE_MACHINE=names[arch]), capture_output=True, text=True,
                            check=True).stdout.split()
    assert wanted == [BINARIES[arch], arch]


def arch_snippet():
    """The installer's architecture mapping, with uname -m replaced by $FAKE_MACHINE."""
    block = INSTALLER.split("MACHINE=$(uname -m)\n", 1)[1].split("RELEASE_BINARY=\"k3s$SUFFIX\"\n", 1)[0]
    return 'MACHINE=$FAKE_MACHINE\n' + block + 'RELEASE_BINARY="k3s$SUFFIX"\n'


def test_a_download_that_does_not_match_its_checksum_stops_the_docs_script(tmp_path):
    proc, _bundle, release, _requests, root = run_script(tmp_path, "arm64")
    assert proc.returncode == 0
    (release / "k3s-arm64").write_bytes(b"tampered\n")
    other = tmp_path / "again"
    other.mkdir()
    env = dict(os.environ, PATH="%s:%s" % (tmp_path / "bin", os.environ["PATH"]), FAKE_CURL_ROOT=str(root),
               ARCH="arm64", BUNDLE=str(other / "bundle"))
    proc = subprocess.run(["sh", "-c", bundle_script()], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode != 0 and "k3s-arm64: FAILED" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_the_docs_bundle_script_refuses_an_architecture_k3s_does_not_publish(tmp_path):
    proc, bundle, _release, requests, _root = run_script(tmp_path, "riscv")
    assert proc.returncode == 1 and "ARCH must be amd64, arm64 or arm, not riscv" in proc.stderr
    assert requests == [] and not bundle.exists()


def test_the_docs_the_role_and_the_installer_pin_the_same_releases():
    options = SPECS["argument_specs"]["main"]["options"]
    assert options["k3s_version"]["default"] == VERSION
    assert "VERSION=${VERSION:-%s}" % VERSION in DOCS
    image = DEFAULTS["k3s_device_plugin_image"]
    assert options["k3s_device_plugin_image"]["default"] == image
    assert 'PLUGIN_IMAGE="${GPUPROV_K3S_DEVICE_PLUGIN_IMAGE:-%s}"' % image in INSTALLER
    assert "PLUGIN=%s " % image in DOCS


def _release(text):
    return tuple(int(n) for n in re.match(r"^v(\d+)\.(\d+)\.(\d+)", text).groups())


def test_the_pins_have_the_fixes_the_gpu_path_needs():
    # NVIDIA's changelog: "Ignore errors getting device memory using NVML" is in v0.17.4 and v0.18.0
    assert _release(DEFAULTS["k3s_device_plugin_image"].rsplit(":", 1)[1]) >= (0, 18, 0)
    # the stable channel's line (v1.36) or later: default-runtime (v1.29.0) and the runtime search of k3s #10761
    assert _release(VERSION) >= (1, 36, 0)
