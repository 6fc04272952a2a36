# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""make demo installs the collection from its tarball into the project's own collections path (never
~/.ansible/collections), its closing hint for make demo-down carries DEMO_NAME, and a missing sshd is
installed (root with apt) or the exact command to run is named. One real run, with a throw-away HOME."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
DEMO_COLLECTIONS = REPO / "build" / "demo" / "collections"

pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def make(*args, env=None):
    return subprocess.run([MAKE, "--no-print-directory", "-C", str(REPO), *args], capture_output=True, text=True,
                          check=False, env=env)


def commands(out):
    """The commands of ``make -n`` output, without the lines that only say what is being done."""
    return [line for line in out.splitlines() if not line.startswith("echo ")]


def test_demo_installs_into_the_projects_collections_path():
    out = make("-n", "demo", "DEMO_NAME=trial7").stdout
    (install,) = [line for line in commands(out) if "ansible-galaxy collection install" in line]
    assert "-p %s" % DEMO_COLLECTIONS in install
    assert "ANSIBLE_COLLECTIONS_PATH=%s" % DEMO_COLLECTIONS in install
    (provision,) = [line for line in commands(out) if "gpuprov.cloud.provision -e vm=trial7" in line]
    assert "ANSIBLE_COLLECTIONS_PATH=%s" % DEMO_COLLECTIONS in provision
    assert "~/.ansible" not in out and "-u ANSIBLE_COLLECTIONS_PATH" not in out


def test_demo_installs_only_what_running_needs_as_a_user_would():
    """ansible-core, then the installed collection's requirements/local.txt: never requirements-dev.txt."""
    out = make("-n", "demo").stdout
    (pip,) = [line for line in commands(out) if "pip install" in line]
    assert pip.endswith("-r %s/ansible_collections/gpuprov/cloud/requirements/local.txt" % DEMO_COLLECTIONS), pip
    assert "requirements-dev" not in out
    # .venv gets ansible-core alone when it has no Ansible yet (a dev venv has it: then there is nothing to do).
    database = make("-p", "-n", "demo").stdout
    (recipe,) = [chunk for chunk in database.split("\n\n") if chunk.startswith(".venv/bin/ansible-playbook:")]
    assert "pip install" in recipe and "'ansible-core>=2.17'" in recipe and "requirements" not in recipe, recipe


def test_demo_says_what_it_does_at_each_step():
    out = make("-n", "demo").stdout
    said = [line for line in out.splitlines() if line.startswith('echo "demo: ') and line.endswith('"')]
    assert [line.split()[2] for line in said] == ["building", "installing", "installing", "provisioning"], said


def test_demo_down_hint_and_target_carry_demo_name():
    out = make("-n", "demo", "DEMO_NAME=trial7").stdout
    assert "make demo-down DEMO_NAME=trial7" in out
    down = make("-n", "demo-down", "DEMO_NAME=trial7").stdout
    assert "ANSIBLE_COLLECTIONS_PATH=%s" % DEMO_COLLECTIONS in down and "gpuprov.cloud.down -e vm=trial7" in down


def test_ansible_cfg_points_the_readme_commands_at_the_demos_collections():
    """From the repository's folder, with no ANSIBLE_COLLECTIONS_PATH, Ansible looks in build/demo/collections
    first; the Makefile's own targets set ANSIBLE_COLLECTIONS_PATH, which wins."""
    config = pathlib.Path(sys.executable).parent / "ansible-config"
    env = {k: v for k, v in os.environ.items() if k not in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_CONFIG")}
    shown = subprocess.run([str(config), "dump", "--only-changed"], cwd=REPO, env=env, capture_output=True,
                           text=True, check=True).stdout
    assert "COLLECTIONS_PATHS(%s) = ['%s'," % (REPO / "ansible.cfg", DEMO_COLLECTIONS) in shown, shown
    # The README's commands run without an inventory: no warning about the one they do not need.
    assert "LOCALHOST_WARNING(%s) = False" % (REPO / "ansible.cfg") in shown, shown
    assert "INVENTORY_UNPARSED_WARNING(%s) = False" % (REPO / "ansible.cfg") in shown, shown
    env["ANSIBLE_COLLECTIONS_PATH"] = "/elsewhere"
    shown = subprocess.run([str(config), "dump", "--only-changed"], cwd=REPO, env=env, capture_output=True,
                           text=True, check=True).stdout
    assert "COLLECTIONS_PATHS(env: ANSIBLE_COLLECTIONS_PATH) = ['/elsewhere']" in shown, shown


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


def readme_fresh_clone_commands():
    """The commands of the README's "On a fresh clone" block, comments dropped, between make demo and make
    demo-down: what a user runs after make demo, as written."""
    text = (REPO / "README.md").read_text()
    block = text.split("## On a fresh clone", 1)[1].split("```", 2)[1]
    lines = [re.split(r"\s+#\s", line, maxsplit=1)[0].strip() for line in block.splitlines() if line.strip()]
    return lines[lines.index("make demo") + 1:lines.index("make demo-down")]


def test_the_readme_shows_what_make_demo_prints():
    """make demo's closing lines and the README's block after it name the same commands."""
    out = make("-n", "demo").stdout.split(" is up. ", 1)[1]
    printed = [re.split(r"\s{2,}\(", line, maxsplit=1)[0].strip()
               for line in re.findall(r'^\s*echo "  ([^"]*)"', out, flags=re.M)]
    printed = [line.replace("$state", "~/.local/state/gpuprov") for line in printed]
    assert printed and set(printed) <= set(readme_fresh_clone_commands()), (printed, readme_fresh_clone_commands())


def test_demo_then_the_readme_commands_on_a_fresh_clone(tmp_path):
    """The real thing, on a copy of this checkout (its tracked and new files, as a clone has them) with a
    throw-away HOME: make demo installs the tarball into the copy's build/demo/collections, then every
    command of the README's fresh-clone block runs as written from the copy's folder, with nothing set in
    the environment; make demo-down tears down; nothing is written to ~/.ansible/collections."""
    if not (shutil.which("sshd") or os.access("/usr/sbin/sshd", os.X_OK)):
        pytest.skip("the local cloud needs sshd (apt-get install openssh-server; .ci/run installs it)")
    clone = tmp_path / "clone"
    clone.mkdir()
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"],
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, clone / name)
    # The checkout's venv stands in for the one make demo would create (its pip install is the network's).
    (clone / ".venv").symlink_to(pathlib.Path(sys.executable).parent.parent)
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home))
    for name in ("GPUPROV_HOME", "XDG_STATE_HOME", "GPUPROV_JOURNAL", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_CONFIG",
                 "PYTHONPATH", "VIRTUAL_ENV"):
        env.pop(name, None)
    env["PATH"] = ":".join(p for p in env.get("PATH", "").split(":") if not p.startswith(str(REPO)))

    def run(*args, **kwargs):
        return subprocess.run(args, cwd=clone, env=env, capture_output=True, text=True, check=False, **kwargs)

    up = run(MAKE, "--no-print-directory", "demo")
    try:
        assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
        assert (clone / "build" / "demo" / "collections" / "ansible_collections" / "gpuprov" / "cloud"
                / "MANIFEST.json").is_file()
        assert not (home / ".ansible" / "collections").exists()
        assert "Tear down: make demo-down DEMO_NAME=demo" in up.stdout
        script = "set -e\n" + "\n".join(readme_fresh_clone_commands()) + "\n"
        after = run("bash", "-c", script, timeout=600)
        assert after.returncode == 0, after.stdout[-4000:] + after.stderr[-4000:]
        assert "could not be found" not in after.stderr and "command not found" not in after.stderr
        assert re.search(r"^Linux ", after.stdout, flags=re.M), after.stdout[-2000:]   # ssh demo uname -a
        assert "demo" in after.stdout and "second" in after.stdout
    finally:
        down = run(MAKE, "--no-print-directory", "demo-down")
        run("bash", "-c", ". .venv/bin/activate && ansible-playbook gpuprov.cloud.down -e vm=second")
    assert down.returncode == 0, down.stdout[-4000:] + down.stderr[-4000:]
