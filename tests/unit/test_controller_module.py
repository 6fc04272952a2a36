"""plugin_utils/controller_module.py: when an action may run its module's task in Ansible's process."""

from __future__ import annotations

import os

from ansible_collections.gpuprov.cloud.plugins.plugin_utils.controller_module import same_python


def test_same_python_is_one_file_in_one_folder(tmp_path):
    base = tmp_path / "base" / "bin"
    venv = tmp_path / "venv" / "bin"
    base.mkdir(parents=True)
    venv.mkdir(parents=True)
    real = base / "python3.11"
    real.write_text("")
    other = base / "python3.12"
    other.write_text("")
    os.symlink(real, venv / "python")
    os.symlink("python", venv / "python3")
    # A virtual environment's python and python3 are one environment...
    assert same_python(str(venv / "python3"), str(venv / "python"))
    assert same_python(str(venv / "python"), str(venv / ".." / "bin" / "python"))
    # ... its base Python is the same file but not the same packages ...
    assert not same_python(str(venv / "python"), str(real))
    # ... and another file in the same folder is another Python.
    assert not same_python(str(real), str(other))
