# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gpuprov.cloud.ssh_files``: the state directory's known_hosts and ssh config generated from
the journal (ssh.ControllerFiles.write_from_journal), for a task that uses them without a vm
run before it (the tunnel playbook in a new AWX job, a user's ``ssh <name>``)."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import shown
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import group_argument_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import (
    default_state_dir, journal_exists, journal_location,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection, ssh

SSH_FILES_ARGUMENT_SPEC = group_argument_spec(name=dict(type="str"))


class SshFilesError(Exception):
    """The files cannot be generated for what was asked; the message says why and what to do."""


def _contents(path: str) -> Optional[bytes]:
    if not os.path.exists(path):
        return None
    with open(path, "rb") as handle:
        return handle.read()


def reachable(rows) -> list:
    """Names of the rows write_from_journal writes a Host block for: running, with a journalled host key."""
    found = []
    for row in rows:
        detail = row.get("detail") if isinstance(row.get("detail"), dict) else {}
        if row.get("status") == "running" and detail.get("host_key") and row.get("host_key_alias"):
            found.append(row["name"])
    return sorted(found)


def generate(params: Dict[str, Any], credential_key: Optional[str] = None, check_mode: bool = False) -> Dict[str, Any]:
    """Write known_hosts and the ssh config from the journal (nothing in check mode); the result
    the module returns. SshFilesError when ``name`` has no Host block to write."""
    state_dir = default_state_dir()
    source, key_path = ssh.key_source(params.get("ssh_key"), credential_key, state_dir)
    files = ssh.ControllerFiles(state_dir, key_path)
    location = journal_location(params.get("journal"))
    before = (_contents(files.ssh_config), _contents(files.known_hosts))
    read: Dict[str, Any] = {"rows": []}
    if journal_exists(location):
        journal = projection.open_journal(location, password=params.get("journal_password"))
        try:
            def rows_read():
                read["rows"] = projection.vms(journal)
                return read["rows"]

            if check_mode:
                rows_read()
            else:
                files.write_from_journal(rows_read)
        finally:
            journal.close()
    hosts = reachable(read["rows"])
    name = params.get("name")
    if name and name not in hosts:
        raise SshFilesError("%s has no running VM with a pinned host key in the journal %s: provision it first "
                            "(ansible-playbook gpuprov.cloud.provision -e vm=%s)" % (name, shown(location), name))
    changed = not check_mode and (_contents(files.ssh_config), _contents(files.known_hosts)) != before
    return {"changed": changed, "journal": shown(location), "ssh_config": files.ssh_config,
            "known_hosts": files.known_hosts, "ssh_key": key_path,
            "ssh_key_source": source or "state directory", "hosts": hosts}
