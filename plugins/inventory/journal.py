# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: journal
short_description: One host per VM recorded in the gpuprov journal
version_added: 0.1.0
description:
  - Reads the C(vms) projection of the SQLite journal that M(gpuprov.cloud.vm) (the C(provision) and C(down)
    playbooks) writes, and adds one host per VM that is up (status C(running); see O(statuses)).
  - Each host carries the connection variables that reach the VM with its pinned host key, exactly as
    C(provision) sets them after a launch (C(ansible_host), C(ansible_port), C(ansible_user),
    C(ansible_ssh_private_key_file), C(ansible_ssh_common_args) with C(UserKnownHostsFile), C(HostKeyAlias) and
    C(StrictHostKeyChecking=yes)), plus C(ansible_python_interpreter) where the VM's Python is known.
  - "Hosts are grouped: C(gpuprov_vms) (every host, the group the C(provision) and C(down) playbooks act on),
    C(cloud_<cloud>), C(region_<region>), C(zone_<zone>) where the cloud has zones, and C(status_<status>);
    characters that are not valid in a group name become C(_)."
  - Read-only. A journal that does not exist yet gives an empty inventory; nothing is created or changed.
  - "The configuration file must be named C(gpuprov.journal.yml) or C(gpuprov.journal.yaml), or end in
    C(.gpuprov_journal.yml) or C(.gpuprov_journal.yaml), and say C(plugin: gpuprov.cloud.journal)."
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.constructed
options:
  plugin:
    description: The name of this plugin; it must be V(gpuprov.cloud.journal) for the file to be read by it.
    required: true
    type: str
    choices:
      - gpuprov.cloud.journal
  journal:
    description:
      - Path of the journal to read. C(~) and environment variables are expanded; a relative path is relative
        to the directory of this configuration file.
      - Defaults to E(GPUPROV_JOURNAL), else C(journal.sqlite) in the gpuprov state directory
        (E(GPUPROV_HOME), else C($XDG_STATE_HOME/gpuprov), else C(~/.local/state/gpuprov)), the same default as
        M(gpuprov.cloud.vm).
    type: str
  ssh_key:
    description:
      - Private key the hosts are reached with (C(ansible_ssh_private_key_file)).
      - Defaults to the collection's own key, C(id_ed25519) in the gpuprov state directory, which is the key
        M(gpuprov.cloud.vm) installs on every VM unless its O(gpuprov.cloud.vm#module:ssh_key) is set; set this
        option to the same key when it was.
    type: path
  statuses:
    description:
      - Which projection statuses become hosts.
      - V(running) VMs are up and reachable. V(leaked) VMs are ones whose teardown failed and may still bill;
        listing them (group C(status_leaked)) lets C(ansible-playbook gpuprov.cloud.down -i <this file>) retry
        their teardown.
    type: list
    elements: str
    default: [running]
notes:
  - "The known hosts file and the key live in the gpuprov state directory of the user running Ansible, which
    must be the one that provisioned the VMs (the journal may be elsewhere)."
  - "Every host also gets C(gpuprov_journal) (the journal read) and C(gpuprov_clouds) (its cloud), so
    C(ansible-playbook gpuprov.cloud.down -i <this file>) tears down exactly these VMs, in the journal they came
    from, and C(gpuprov.cloud.provision -i <this file>) re-checks them without launching elsewhere."
  - "Other host variables, usable in O(compose), O(groups) and O(keyed_groups): C(gpuprov_cloud),
    C(gpuprov_region), C(gpuprov_zone), C(gpuprov_instance_id), C(gpuprov_instance_type), C(gpuprov_gpu),
    C(gpuprov_gpu_count), C(gpuprov_status), C(gpuprov_stage), C(gpuprov_host_key_alias),
    C(gpuprov_updated_at) (seconds since the epoch)."
"""

EXAMPLES = r"""
# gpuprov.journal.yml: every running VM of the default journal
plugin: gpuprov.cloud.journal

# Then:
#   ansible-inventory -i gpuprov.journal.yml --graph
#   ansible -i gpuprov.journal.yml gpuprov_vms -m ansible.builtin.ping
#   ansible-playbook -i gpuprov.journal.yml site.yml           # your own plays on the VMs
#   ansible-playbook gpuprov.cloud.down -i gpuprov.journal.yml  # tear them all down

---
# team.gpuprov_journal.yml: another journal and key, extra groups from the host variables
plugin: gpuprov.cloud.journal
journal: /srv/gpuprov/journal.sqlite
ssh_key: ~/.ssh/gpuprov_ed25519
statuses: [running, leaked]
groups:
  gpu_hosts: gpuprov_gpu is not none
keyed_groups:
  - key: gpuprov_gpu | default('none', true)
    prefix: gpu
compose:
  gpus: gpuprov_gpu_count | default(0, true)
"""

import os
import sys

from ansible.errors import AnsibleParserError
from ansible.inventory.group import to_safe_group_name
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import is_dsn, shown
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import default_journal_path, default_state_dir
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection, ssh

CONFIG_NAMES = ("gpuprov.journal.yml", "gpuprov.journal.yaml")
CONFIG_SUFFIXES = (".gpuprov_journal.yml", ".gpuprov_journal.yaml")
SQLITE_MAGIC = b"SQLite format 3\x00"

# The Python Ansible uses on a VM of each cloud when the journal does not record it.
# docker: the default base image (scripts/build-base-image.sh) installs python3.
# local: the "VM" is this host, where the controller's own Python is known to work.
CLOUD_PYTHON = {"docker": "/usr/bin/python3"}


def group_name(prefix, value):
    """``<prefix>_<value>`` with every character invalid in a group name made ``_``."""
    return to_safe_group_name("%s_%s" % (prefix, value), force=True, silent=True)


def cloud_python(cloud):
    if cloud == "local":
        return sys.executable
    return CLOUD_PYTHON.get(cloud)


def connection_vars(row, state_dir, key_path, python_interpreter=None):
    """The connection variables of one ``vms`` row: what ``ssh.connection_vars`` gives the vm
    task after a launch (the same function, on the same files), with
    ``ansible_python_interpreter`` only when known. None when the row has no SSH endpoint."""
    if not row.get("ssh_host") or not row.get("ssh_port") or not row.get("host_key_alias"):
        return None
    vm = {"ssh": {"host": row["ssh_host"], "port": int(row["ssh_port"]), "user": row.get("ssh_user") or "root"},
          "host_key_alias": row["host_key_alias"], "python_interpreter": python_interpreter}
    found = ssh.connection_vars(vm, ssh.ControllerFiles(state_dir, key_path))
    if not python_interpreter:
        # Unknown here: leave it to the user's configuration (group_vars, ansible.cfg).
        found.pop("ansible_python_interpreter", None)
    return found


def python_of(row, state):
    """The VM's Python: recorded in the projection's detail, else in the Ready launch state of
    the same instance, else the cloud's known default; None when unknown."""
    detail = row.get("detail")
    if isinstance(detail, dict) and detail.get("python_interpreter"):
        return detail["python_interpreter"]
    vm = (state or {}).get("vm") if (state or {}).get("kind") == "Ready" else None
    if vm and vm.get("instance_id") == row.get("instance_id") and vm.get("python_interpreter"):
        return vm["python_interpreter"]
    return cloud_python(row.get("cloud"))


def host_entries(rows, states, state_dir, key_path, journal_path, statuses=("running",)):
    """(name, groups, variables) for every row whose status is one of ``statuses``.

    ``states`` maps a VM name to its journalled machine state (for the Python interpreter)."""
    wanted = set(statuses)
    out = []
    for row in rows:
        if row.get("status") not in wanted:
            continue
        name = row["name"]
        groups = ["gpuprov_vms"]
        if row.get("cloud"):
            groups.append(group_name("cloud", row["cloud"]))
        if row.get("region"):
            groups.append(group_name("region", row["region"]))
        if row.get("zone"):
            groups.append(group_name("zone", row["zone"]))
        groups.append(group_name("status", row["status"]))
        variables = {
            "gpuprov_cloud": row.get("cloud"), "gpuprov_region": row.get("region"), "gpuprov_zone": row.get("zone"),
            "gpuprov_instance_id": row.get("instance_id"), "gpuprov_instance_type": row.get("instance_type"),
            "gpuprov_gpu": row.get("gpu"), "gpuprov_gpu_count": row.get("gpu_count"),
            "gpuprov_status": row.get("status"), "gpuprov_stage": row.get("stage"),
            "gpuprov_host_key_alias": row.get("host_key_alias"), "gpuprov_updated_at": row.get("updated_at"),
            "gpuprov_journal": shown(journal_path),
        }
        if row.get("cloud"):
            variables["gpuprov_clouds"] = [row["cloud"]]
        connection = connection_vars(row, state_dir, key_path, python_of(row, states.get(name)))
        if connection:
            variables.update(connection)
        out.append((name, groups, variables))
    return out


def read_journal(path):
    """(vms rows, {name: machine state}) from the journal at ``path``; ([], {}) when it does not
    exist. Never creates a journal file; JournalError when the file is not one. A PostgreSQL
    DSN is opened as it is (the journal refuses a database that is not one)."""
    if is_dsn(path):
        return _read_rows(path)
    if not os.path.exists(path):
        return [], {}
    if not os.path.isfile(path):
        raise JournalError("journal: %s is not a file; set the journal option to the journal's path" % path)
    try:
        with open(path, "rb") as handle:
            magic = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise JournalError("journal: cannot read %s (%s)" % (path, exc.strerror or exc))
    if magic != SQLITE_MAGIC:
        # Checked before opening: the journal code would initialise an empty file as a journal.
        raise JournalError("journal: %s is not a gpuprov journal (not an SQLite database); set the journal "
                           "option to the journal's path" % path)
    return _read_rows(path)


def _read_rows(path):
    journal = projection.open_journal(path)
    try:
        rows = projection.vms(journal)
        states = {}
        for row in rows:
            found = journal.load(row["name"])
            if found is not None:
                states[row["name"]] = found.state
        return rows, states
    finally:
        journal.close()


class InventoryModule(BaseInventoryPlugin, Constructable):
    """Hosts from the gpuprov journal's vms projection."""

    NAME = "gpuprov.cloud.journal"

    def verify_file(self, path):
        if not super().verify_file(path):
            return False
        base = os.path.basename(path)
        return base in CONFIG_NAMES or base.endswith(CONFIG_SUFFIXES)

    def _journal_path(self, config_path):
        configured = self.get_option("journal")
        if not configured:
            return default_journal_path(), False
        configured = os.path.expanduser(os.path.expandvars(configured))
        if is_dsn(configured):
            return configured.strip(), True
        if not os.path.isabs(configured):
            configured = os.path.join(os.path.dirname(os.path.abspath(config_path)), configured)
        return os.path.abspath(configured), True

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        journal_path, explicit = self._journal_path(path)
        state_dir = default_state_dir()
        key_path = os.path.abspath(os.path.expanduser(self.get_option("ssh_key") or
                                                      os.path.join(state_dir, "id_ed25519")))
        try:
            rows, states = read_journal(journal_path)
        except JournalError as exc:
            raise AnsibleParserError("gpuprov.cloud.journal: %s" % to_native(exc))
        if not is_dsn(journal_path) and not os.path.exists(journal_path):
            message = "gpuprov.cloud.journal: no journal at %s: no VMs yet" % journal_path
            if explicit:
                self.display.warning(message)
            else:
                self.display.vvv(message)

        strict = self.get_option("strict")
        self.inventory.add_group("gpuprov_vms")
        statuses = self.get_option("statuses") or ["running"]
        for name, groups, variables in host_entries(rows, states, state_dir, key_path, journal_path, statuses):
            for group in groups:
                self.inventory.add_group(group)
            self.inventory.add_host(name, group=groups[0])
            for group in groups[1:]:
                self.inventory.add_child(group, name)
            for key, value in variables.items():
                self.inventory.set_variable(name, key, value)
            hostvars = self.inventory.get_host(name).get_vars()
            self._set_composite_vars(self.get_option("compose"), hostvars, name, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, name, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, name, strict=strict)
