# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A user's first contact, from the tarball: the collection is built, then docs/install.md's first block runs as
written, line by line, in a fresh HOME with a clean venv (python3 -m venv, pip install ansible-core from PyPI,
ansible-galaxy collection install of the tarball, pip install -r of the installed collection's
requirements/local.txt, then provision, ssh, status and down of a local VM). Nothing of this checkout is on
PATH, PYTHONPATH or the collections path. Between the collection's install and its requirements', one run that
is not in the docs: provision without paramiko fails before anything is made, printing the exact install command
with the installed collection's path, the same file the docs' pip line installs. pip's own cache (the real
user's) keeps the downloads to the first run."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpuprov.cloud.tests.integration.conftest import kill_sshds, live_sshd_folders

REPO = pathlib.Path(__file__).resolve().parents[2]
INSTALL_PAGE = REPO / "docs" / "install.md"
BIN = pathlib.Path(sys.executable).parent
# The step that is not in the docs runs right after this documented one.
BEFORE_REQUIREMENTS = "ansible-galaxy collection install "
# A clean venv, PyPI and a local VM up and down: a few minutes at most on a loaded machine.
TIMEOUT = 900


def documented_steps():
    """The lines of the install page's first sh block: what a user types, as written."""
    text = INSTALL_PAGE.read_text()
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_documented_install_from_the_tarball_in_a_clean_venv(tmp_path):
    if not (shutil.which("sshd") or os.access("/usr/sbin/sshd", os.X_OK)):
        pytest.skip("the local cloud needs sshd (apt-get install openssh-server; .ci/run installs it)")
    steps = documented_steps()
    (install,) = [i for i, step in enumerate(steps) if step.startswith(BEFORE_REQUIREMENTS)]
    (pip_line,) = [step for step in steps if step.startswith("pip install -r ")]

    dist = tmp_path / "dist"
    built = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(dist), str(REPO)],
                           capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    # The docs name the tarball by this version's name: a release that bumps galaxy.yml updates the page.
    assert shlex.split(steps[install])[3] in [path.name for path in dist.iterdir()], steps[install]

    home = tmp_path / "home"
    home.mkdir()
    tools = tmp_path / "tools"
    tools.mkdir()
    # python3 is the Python this test runs on, not this checkout's venv (PATH below has nothing of the checkout).
    (tools / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ANSIBLE_", "GPUPROV_", "PIP_", "XDG_")) and key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HOME=str(home), PATH="%s:/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin" % tools,
               PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR") or os.path.expanduser("~/.cache/pip"),
               PIP_DISABLE_PIP_VERSION_CHECK="1", ANSIBLE_NOCOLOR="1")
    probe = tmp_path / "probe.log"
    script = ["set -ex"] + steps[:install + 1]
    script += ["ansible-playbook gpuprov.cloud.provision -e vm=first > %s 2>&1 && exit 97 || true" % shlex.quote(
        str(probe))]
    script += steps[install + 1:]
    state = home / ".local" / "state" / "gpuprov"
    try:
        done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=dist, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT, check=False)
        assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-6000:]
    finally:
        left = live_sshd_folders(state)
        kill_sshds(state)
    assert left == [], "the documented down left a local VM running: %s" % left

    installed = home / ".ansible" / "collections" / "ansible_collections" / "gpuprov" / "cloud"
    assert (installed / "MANIFEST.json").is_file()
    # The run without paramiko: the exact command, this venv's Python and the installed collection's file.
    said = probe.read_text()
    match = re.search(r"paramiko is not installed for the Python that runs gpuprov\.cloud \((\S+)\); install the "
                      r"local cloud's requirements: (\S+) -m pip install -r (\S+)", said)
    assert match, said[-4000:]
    python, command_python, path = match.groups()
    assert python == command_python and python.startswith(str(home / "gpuprov-venv" / "bin") + "/"), said[-2000:]
    assert path == str(installed / "requirements" / "local.txt")
    assert shlex.split(pip_line)[3].replace("~", str(home), 1) == path   # the file the docs' pip line installs
    assert "unexpected" not in said and "Creating" not in said   # failed before anything was made

    out = done.stdout
    assert "first is up on local/local" in out, out[-4000:]
    assert re.search(r"^Linux ", out, flags=re.M), out[-4000:]           # ssh -F ... first uname -a
    assert "Traceback" not in done.stderr
