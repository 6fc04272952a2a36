# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""make demo installs the collection from its tarball into the project's own collections path (never
~/.ansible/collections), its closing hint for make demo-down carries DEMO_NAME, and a missing sshd is
installed (root with apt) or the exact command to run is named. One real run, with a throw-away HOME."""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
DEMO_COLLECTIONS = REPO / "build" / "demo" / "collections"

pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def make(*args, env=None):
    return subprocess.run([MAKE, "--no-print-directory", "-C", str(REPO), *args], capture_output=True, text=True,
                          check=False, env=env)


def test_demo_installs_into_the_projects_collections_path():
    out = make("-n", "demo", "DEMO_NAME=trial7").stdout
    (install,) = [line for line in out.splitlines() if "ansible-galaxy collection install" in line]
    assert "-p %s" % DEMO_COLLECTIONS in install
    assert "ANSIBLE_COLLECTIONS_PATH=%s" % DEMO_COLLECTIONS in install
    (provision,) = [line for line in out.splitlines() if "gpuprov.cloud.provision" in line]
    assert "ANSIBLE_COLLECTIONS_PATH=%s" % DEMO_COLLECTIONS in provision
    assert "-e vm=trial7" in provision
    assert "~/.ansible" not in out and "-u ANSIBLE_COLLECTIONS_PATH" not in out


def test_demo_down_hint_and_target_carry_demo_name():
    out = make("-n", "demo", "DEMO_NAME=trial7").stdout
    assert "make demo-down DEMO_NAME=trial7" in out
    down = make("-n", "demo-down", "DEMO_NAME=trial7").stdout
    assert "ANSIBLE_COLLECTIONS_PATH=%s" % DEMO_COLLECTIONS in down and "gpuprov.cloud.down -e vm=trial7" in down


def fake_tool(folder, name, body):
    path = folder / name
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def no_sshd(tmp_path):
    """A PATH of fakes only (no sshd, no package manager unless a test adds one) and an empty sshd search."""
    fakes = tmp_path / "bin"
    fakes.mkdir()
    search = tmp_path / "sbin"
    search.mkdir()
    env = dict(os.environ, PATH=str(fakes))
    return fakes, search, env


def demo_sshd(search, env):
    return make("demo-sshd", "SSHD_SEARCH=%s" % search, env=env)


def test_demo_sshd_is_silent_when_sshd_is_there(no_sshd):
    search, env = no_sshd[1:]
    fake_tool(search, "sshd", "exit 0")
    result = demo_sshd(search, env)
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr


def test_demo_sshd_installs_openssh_server_as_root_with_apt(no_sshd, tmp_path):
    fakes, search, env = no_sshd
    log = tmp_path / "apt.log"
    fake_tool(fakes, "id", "echo 0")
    fake_tool(fakes, "apt-get", 'echo "$*" >> %s\n[ "$1" = install ] && printf "#!/bin/bash\\n" > %s/sshd '
                                '&& /bin/chmod +x %s/sshd\nexit 0' % (log, search, search))
    result = demo_sshd(search, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "installing openssh-server" in result.stdout
    assert log.read_text().splitlines() == ["update -qq", "install -y -qq openssh-server"]


def test_demo_sshd_names_the_sudo_command_without_root(no_sshd):
    fakes, search, env = no_sshd
    fake_tool(fakes, "id", "echo 1000")
    fake_tool(fakes, "apt-get", "echo apt-get must not run >&2; exit 1")
    result = demo_sshd(search, env)
    assert result.returncode != 0
    assert "  sudo apt-get install openssh-server\n" in result.stdout, result.stdout
    assert "apt-get must not run" not in result.stderr


def test_demo_sshd_names_the_command_of_another_package_manager(no_sshd):
    fakes, search, env = no_sshd
    fake_tool(fakes, "id", "echo 0")
    fake_tool(fakes, "dnf", "echo dnf must not run >&2; exit 1")
    result = demo_sshd(search, env)
    assert result.returncode != 0
    assert "  dnf install openssh-server\n" in result.stdout, result.stdout


def test_demo_sshd_without_a_known_package_manager_says_what_is_needed(no_sshd):
    fakes, search, env = no_sshd
    fake_tool(fakes, "id", "echo 1000")
    result = demo_sshd(search, env)
    assert result.returncode != 0
    assert "install OpenSSH's server (the sshd program)" in result.stdout


def test_demo_and_demo_down_with_a_fresh_home(tmp_path):
    """The real thing: the tarball installed into DEMO_COLLECTIONS, a local VM up and down, and nothing
    written to the user's ~/.ansible/collections."""
    if not (shutil.which("sshd") or os.access("/usr/sbin/sshd", os.X_OK)):
        pytest.skip("the local cloud needs sshd (apt-get install openssh-server; .ci/run installs it)")
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home))
    for name in ("GPUPROV_HOME", "XDG_STATE_HOME", "GPUPROV_JOURNAL", "ANSIBLE_COLLECTIONS_PATH"):
        env.pop(name, None)
    where = ["DEMO_NAME=h7fresh", "DEMO_COLLECTIONS=%s" % (tmp_path / "coll"), "DEMO_DIST=%s" % (tmp_path / "dist")]
    up = make("demo", *where, env=env)
    try:
        assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
        assert (tmp_path / "coll" / "ansible_collections" / "gpuprov" / "cloud" / "MANIFEST.json").is_file()
        assert not (home / ".ansible" / "collections").exists()
        assert "Tear down: make demo-down DEMO_NAME=h7fresh" in up.stdout
        assert "ssh -F %s/.local/state/gpuprov/ssh_config h7fresh" % home in up.stdout
    finally:
        down = make("demo-down", *where, env=env)
    assert down.returncode == 0, down.stdout[-4000:] + down.stderr[-4000:]
