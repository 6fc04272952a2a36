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
  - Reads the C(vms) projection of the journal that M(gpuprov.cloud.vm) (the C(provision) and C(down)
    playbooks) writes, SQLite or PostgreSQL, and adds one host per VM that is up (status C(running); see
    O(statuses) and O(filters)).
  - Each host carries the connection variables that reach the VM with its pinned host key, exactly as
    C(provision) sets them after a launch (C(ansible_host), C(ansible_port), C(ansible_user),
    C(ansible_ssh_private_key_file), C(ansible_ssh_common_args) with C(UserKnownHostsFile), C(HostKeyAlias),
    C(StrictHostKeyChecking=yes) and C(IdentitiesOnly=yes)), plus C(ansible_python_interpreter) where the VM's
    Python is known, and one dict, C(gpuprov), with the rest of the VM's record (see the notes). A VM the journal
    has no SSH endpoint for (a leaked one) has no connection variables.
  - The pinned host keys are the journal's. Before the hosts are added, C(known_hosts) and the ssh config in the
    gpuprov state directory are generated from the journal (as every M(gpuprov.cloud.vm) run does), so a new
    controller with an empty state directory (a new AWX job) reaches every VM with the key pinned for it.
  - "Hosts are grouped: C(gpuprov_vms) (every host, the group the C(provision) and C(down) playbooks act on),
    C(cloud_<cloud>), C(region_<region>), C(zone_<zone>) where the cloud has zones, and C(status_<status>);
    characters that are not valid in a group name become C(_)."
  - The journal is only read; a journal that does not exist yet gives an empty inventory and is not created.
  - "The configuration file must say C(plugin: gpuprov.cloud.journal) and be named C(gpuprov.yml),
    C(gpuprov.yaml), C(gpuprov.journal.yml) or C(gpuprov.journal.yaml), or end in C(.gpuprov.yml),
    C(.gpuprov.yaml), C(.gpuprov_journal.yml) or C(.gpuprov_journal.yaml)."
  - An option this plugin does not know (a misspelt one) is warned about, naming the option, not ignored.
requirements:
  - psycopg (for a C(postgresql://) O(journal); C(requirements/postgresql.txt) of the collection)
author:
  - gpuprov.cloud contributors (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.constructed
  - ansible.builtin.inventory_cache
options:
  plugin:
    description: The name of this plugin; it must be V(gpuprov.cloud.journal) for the file to be read by it.
    required: true
    type: str
    choices:
      - gpuprov.cloud.journal
  journal:
    description:
      - The journal to read. A path is an SQLite journal; C(~) and environment variables (C($VAR)) are expanded,
        and a relative path is relative to the directory of this configuration file. A C(postgresql://) DSN is a
        PostgreSQL journal, taken as written (a C($) in its password is kept).
      - Defaults to E(GPUPROV_JOURNAL), else C(journal.sqlite) in the gpuprov state directory
        (E(GPUPROV_HOME), else C($XDG_STATE_HOME/gpuprov), else C(~/.local/state/gpuprov)), the same default as
        M(gpuprov.cloud.vm).
    type: str
  journal_password:
    description:
      - Password of a PostgreSQL journal, when the DSN does not carry one and libpq's environment (E(PGPASSWORD),
        E(PGPASSFILE)) does not give it. Prefer the environment (an AWX credential injects it), as this file is
        plain text.
    type: str
  ssh_key:
    description:
      - Private key the hosts are reached with (C(ansible_ssh_private_key_file)).
      - When unset, E(GPUPROV_SSH_KEY_FILE), else the collection's own key, C(id_ed25519) in the gpuprov state
        directory, which is the key M(gpuprov.cloud.vm) installs on every VM unless told another one; set this
        option (or the variable) to the same key when it was.
    type: path
  statuses:
    description:
      - Which projection statuses become hosts.
      - V(running) VMs are up and reachable. V(leaked) VMs are ones whose teardown failed and may still bill;
        listing them (group C(status_leaked)) lets C(ansible-playbook gpuprov.cloud.down -i <this file>) retry
        their teardown.
      - A C(status) key in O(filters), when set, takes the place of this option.
    type: list
    elements: str
    default: [running]
  hostnames:
    description:
      - Which field of the VM names its host, in order of preference; the first one with a value is used.
      - V(name) (the VM name, the default), V(instance_id) (the cloud's id of the VM's instance),
        V(host_key_alias) (unique per instance), V(ssh_host) (the address SSH reaches), or V(tag:<key>) (the
        value of one of the VM's user tags).
      - "A VM none of whose fields has a value is left out, with a warning, as is a VM whose host name another VM
        already has. The VM name is C(gpuprov.name) whichever field names the host."
      - The C(provision) and C(down) playbooks take the VM name from the host name; use the default with them.
    type: list
    elements: str
    default: [name]
  filters:
    description:
      - Only the VMs that match every key; a key given a list matches any of its values.
      - "Keys: V(cloud), V(region), V(zone), V(status), V(instance_type), V(gpu), and V(tag:<key>) (one of the VM's
        user tags, as the C(tags) of M(gpuprov.cloud.vm) set it). Values are compared as strings."
      - V(status) takes the place of O(statuses).
      - An unknown key is an error that names it.
    type: dict
    default: {}
notes:
  - "With O(cache) on, the journal is read once per O(cache_timeout) and the hosts come from the cache plugin
    (O(cache_plugin)) in between; C(--flush-cache) reads it again. A cached read does not regenerate
    C(known_hosts): a VM launched since then is not in the cached hosts either."
  - "The known hosts file and the ssh config are the state directory's of the user running Ansible, generated
    from the journal on every uncached read. Under AWX, an inventory source is synced in a job of its own, so its
    file paths do not reach later jobs: there, the job templates add the VM with C(add_host) from the journal
    instead (see the collection's docs/awx.md)."
  - "Each host has the connection variables above and one more variable, C(gpuprov), a dict with the rest of the
    VM's record: C(name) (the VM name, whichever field names the host), C(journal) (the journal read, a DSN shown
    without its password), C(cloud), C(region), C(zone), C(instance_id), C(instance_type), C(gpu), C(gpu_count),
    C(status), C(stage) (the launch's or k3s's last stage), C(host_key_alias), C(tags) (the VM's user tags, a dict)
    and C(updated_at) (seconds since the epoch). A key the journal has no value for is there as null. In a play:
    C(gpuprov.instance_id); in O(compose), O(groups) and O(keyed_groups): C(gpuprov.cloud), C(gpuprov.tags.team)."
  - "The C(down) playbook reads C(gpuprov.journal), and C(provision) C(gpuprov.journal), C(gpuprov.cloud),
    C(gpuprov.gpu) and C(gpuprov.gpu_count) (before the C(gpuprov_journal), C(gpuprov_clouds), ... variables of
    the inventory's groups), so C(ansible-playbook gpuprov.cloud.down -i <this file>) tears down exactly these
    VMs, in the journal they came from, and C(gpuprov.cloud.provision -i <this file>) re-checks them as they were
    asked for, without launching elsewhere."
  - "There are no other host variables. The flat names of earlier development snapshots (C(gpuprov_journal),
    C(gpuprov_clouds), C(gpuprov_gpu), C(gpuprov_gpu_count) on each host, and C(gpuprov_<key>) for each key of
    C(gpuprov) in compose, groups and keyed_groups) are gone: use C(gpuprov.<key>)."
"""

EXAMPLES = r"""
# gpuprov.yml: every running VM of the default journal
plugin: gpuprov.cloud.journal

# Then:
#   ansible-inventory -i gpuprov.yml --graph
#   ansible -i gpuprov.yml gpuprov_vms -m ansible.builtin.ping
#   ansible-playbook -i gpuprov.yml site.yml           # your own plays on the VMs
#   ansible-playbook gpuprov.cloud.down -i gpuprov.yml  # tear them all down

---
# team.gpuprov.yml: a shared PostgreSQL journal (password from PGPASSWORD), the team's AWS and GCP VMs only,
# the hosts named by instance id, read at most every 5 minutes
plugin: gpuprov.cloud.journal
journal: postgresql://gpuprov@db.example.com/gpuprov
ssh_key: ~/.ssh/gpuprov_ed25519
filters:
  cloud: [aws, gcp]
  "tag:team": ml
hostnames: [instance_id, name]
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/gpuprov-inventory
cache_timeout: 300

---
# leaked.gpuprov_journal.yml: another journal, leaked VMs too, extra groups and variables from the gpuprov dict
plugin: gpuprov.cloud.journal
journal: /srv/gpuprov/journal.sqlite
statuses: [running, leaked]
groups:
  gpu_hosts: gpuprov.gpu is not none
keyed_groups:
  - key: gpuprov.gpu | default('none', true)
    prefix: gpu
  - key: gpuprov.tags.team | default('none')
    prefix: team
  - key: gpuprov.cloud
    prefix: via
compose:
  gpus: gpuprov.gpu_count | default(0, true)
  instance: gpuprov.instance_id
"""

import os
import sys

from ansible.errors import AnsibleParserError
from ansible.inventory.group import to_safe_group_name
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import is_dsn, shown
from ansible_collections.gpuprov.cloud.plugins.module_utils.private_files import PrivateFileError
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import (
    default_journal_path, default_state_dir, journal_location,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection, ssh
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.launch_states import ready_part, ready_vm_in

CONFIG_NAMES = ("gpuprov.yml", "gpuprov.yaml", "gpuprov.journal.yml", "gpuprov.journal.yaml")
CONFIG_SUFFIXES = (".gpuprov.yml", ".gpuprov.yaml", ".gpuprov_journal.yml", ".gpuprov_journal.yaml")
SQLITE_MAGIC = b"SQLite format 3\x00"

# The fields a host may be named by (``hostnames``), besides ``tag:<key>``.
HOSTNAME_FIELDS = ("name", "instance_id", "host_key_alias", "ssh_host")
# The fields ``filters`` may select on, besides ``tag:<key>``.
FILTER_FIELDS = ("cloud", "region", "zone", "status", "instance_type", "gpu")
TAG_PREFIX = "tag:"
# The one host variable besides the connection's: the VM's record, its keys the projection's columns of the
# same name (``journal`` and ``tags`` besides, set in record_of). One dict, not a variable per key: Ansible's
# cost per host grows with every variable and value it is given (checked, tagged, copied, written out).
RECORD = "gpuprov"
RECORD_KEYS = ("name", "cloud", "region", "zone", "instance_id", "instance_type", "gpu", "gpu_count", "status",
               "stage", "host_key_alias", "updated_at")

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


def tags_of(row, state=None):
    """The VM's user tags: as the projection's detail records them, else as the Ready launch state of
    the same instance does (the vm record's ``tags``); {} when neither has any."""
    detail = row.get("detail")
    tags = detail.get("tags") if isinstance(detail, dict) else None
    if not isinstance(tags, dict):
        vm = ready_vm_in(state)
        tags = vm.get("tags") if vm and vm.get("instance_id") == row.get("instance_id") else None
    return dict(tags) if isinstance(tags, dict) else {}


def field_value(row, field, tags):
    """The value of ``field`` (a projection column, or ``tag:<key>`` of ``tags``) for ``row``; None when unset."""
    if field.startswith(TAG_PREFIX):
        return tags.get(field[len(TAG_PREFIX):])
    return row.get(field)


def check_hostnames(hostnames):
    """``hostnames`` as a list of fields; ValueError naming the bad entry."""
    if not isinstance(hostnames, list) or not hostnames:
        raise ValueError("hostnames: expected a non-empty list of fields among %s or tag:<key>, got %r"
                         % (", ".join(HOSTNAME_FIELDS), hostnames))
    for field in hostnames:
        if not isinstance(field, str) or not (field in HOSTNAME_FIELDS or (
                field.startswith(TAG_PREFIX) and len(field) > len(TAG_PREFIX))):
            raise ValueError("hostnames: %r is not a field; expected one of %s or tag:<key>"
                             % (field, ", ".join(HOSTNAME_FIELDS)))
    return hostnames


def check_filters(filters):
    """``filters`` as {field: [accepted values as strings]}; ValueError naming the bad key or value."""
    if filters is None:
        return {}
    if not isinstance(filters, dict):
        raise ValueError("filters: expected a dict of field: value(s), got %s" % type(filters).__name__)
    checked = {}
    for key, value in filters.items():
        if not isinstance(key, str) or not (key in FILTER_FIELDS or (
                key.startswith(TAG_PREFIX) and len(key) > len(TAG_PREFIX))):
            raise ValueError("filters: unknown key %r; expected one of %s or tag:<key>"
                             % (key, ", ".join(FILTER_FIELDS)))
        values = value if isinstance(value, list) else [value]
        if not values or any(isinstance(v, (dict, list)) or v is None for v in values):
            raise ValueError("filters: %s: expected a value or a non-empty list of values, got %r" % (key, value))
        checked[key] = [str(v) for v in values]
    return checked


def matches(row, tags, filters):
    """True when ``row`` (with its ``tags``) matches every key of the checked ``filters``."""
    for key, accepted in filters.items():
        value = field_value(row, key, tags)
        if value is None or str(value) not in accepted:
            return False
    return True


def record_of(row, tags, journal_shown):
    """The VM's record as the ``gpuprov`` host variable holds it."""
    record = {key: row.get(key) for key in RECORD_KEYS}
    record["journal"] = journal_shown
    record["tags"] = tags
    return record


def connection_vars(row, state_dir, key_path, python_interpreter=None, files=None):
    """The connection variables of one ``vms`` row: what ``ssh.connection_vars`` gives the vm
    task after a launch (the same function, on the same files), with
    ``ansible_python_interpreter`` only when known. None when the row has no SSH endpoint.
    ``files``: the ssh.ControllerFiles of ``state_dir`` and ``key_path``, when the caller has them."""
    if not row.get("ssh_host") or not row.get("ssh_port") or not row.get("host_key_alias"):
        return None
    vm = {"ssh": {"host": row["ssh_host"], "port": int(row["ssh_port"]), "user": row.get("ssh_user") or "root"},
          "host_key_alias": row["host_key_alias"], "python_interpreter": python_interpreter}
    found = ssh.connection_vars(vm, files or ssh.ControllerFiles(state_dir, key_path))
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
    vm = ready_vm_in(state)
    if vm and vm.get("instance_id") == row.get("instance_id") and vm.get("python_interpreter"):
        return vm["python_interpreter"]
    return cloud_python(row.get("cloud"))


def host_entries(rows, states, state_dir, key_path, journal_path, statuses=("running",), filters=None,
                 hostnames=("name",), warn=lambda message: None):
    """(host name, groups, variables) for every row whose status is one of ``statuses`` (or, when
    ``filters`` has a ``status`` key, one of its values) and that matches the checked ``filters``;
    each host named by the first of ``hostnames`` with a value. ``warn`` is told of each VM left out
    for want of a (unique) host name.

    ``states`` maps a VM name to its journalled machine state (for the Python interpreter)."""
    filters = dict(filters or {})
    wanted = set(filters.pop("status", None) or statuses)
    out = []
    named = {}
    # The same for every host: made once, not per VM (thousands of them).
    files = ssh.ControllerFiles(state_dir, key_path)
    journal_shown = shown(journal_path)
    group_names = {}

    def group(prefix, value):
        if (prefix, value) not in group_names:
            group_names[prefix, value] = group_name(prefix, value)
        return group_names[prefix, value]

    for row in rows:
        name = row["name"]
        tags = tags_of(row, states.get(name))
        if str(row.get("status")) not in wanted or not matches(row, tags, filters):
            continue
        host = next((str(field_value(row, f, tags)) for f in hostnames if field_value(row, f, tags) not in (None, "")),
                    None)
        if host is None:
            warn("VM %s has none of the hostnames fields (%s): left out" % (name, ", ".join(hostnames)))
            continue
        if host in named:
            warn("VM %s would be host %s, which VM %s already is: left out" % (name, host, named[host]))
            continue
        named[host] = name
        groups = ["gpuprov_vms"]
        if row.get("cloud"):
            groups.append(group("cloud", row["cloud"]))
        if row.get("region"):
            groups.append(group("region", row["region"]))
        if row.get("zone"):
            groups.append(group("zone", row["zone"]))
        groups.append(group("status", row["status"]))
        variables = connection_vars(row, state_dir, key_path, python_of(row, states.get(name)), files) or {}
        variables[RECORD] = record_of(row, tags, journal_shown)
        out.append((host, groups, variables))
    return out


def read_journal(path, password=None, files=None):
    """(vms rows, {name: machine state}) from the journal at ``path``; ([], {}) when it does not
    exist. Never creates a journal file; JournalError when the file is not one. A PostgreSQL
    DSN is opened as it is (the journal refuses a database that is not one). With ``files``
    (ssh.ControllerFiles), known_hosts and the ssh config are generated from the rows read."""
    if is_dsn(path):
        return _read_rows(path, password, files)
    if not os.path.exists(path):
        return [], {}
    if not os.path.isfile(path):
        raise JournalError("journal: %s is not a file; set the journal option to the journal's path" % path)
    try:
        with open(path, "rb") as handle:
            magic = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise JournalError("journal: cannot read %s (%s)" % (path, exc.strerror or exc)) from exc
    if magic != SQLITE_MAGIC:
        # Checked before opening: the journal code would initialise an empty file as a journal.
        raise JournalError("journal: %s is not a gpuprov journal (not an SQLite database); set the journal "
                           "option to the journal's path" % path)
    return _read_rows(path, password, files)


def _read_rows(path, password, files):
    journal = projection.open_journal(path, password=password)
    try:
        read = {}

        def rows_read():
            # One statement for the rows and their launch records, not a load (and a whole state) per VM.
            read["listing"] = projection.vms_with_ready_vm(journal)
            return [row for row, _vm in read["listing"]]

        if files is not None:
            # Read under the ssh config's lock, so a down that removes a VM meanwhile is not undone.
            files.write_from_journal(rows_read)
        else:
            rows_read()
        rows = [row for row, _vm in read["listing"]]
        # Only a Ready state's vm record is read (tags_of, python_of): the rest of the state is not needed.
        states = {row["name"]: ready_part(vm) for row, vm in read["listing"] if vm is not None}
        return rows, states
    finally:
        journal.close()


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
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
        # A relative path is relative to this file, wherever ansible runs from.
        return journal_location(configured, relative_to=os.path.dirname(os.path.abspath(config_path))), True

    def _warn_unknown_options(self, config, path):
        unknown = sorted(str(key) for key in config if key not in self._options)
        if unknown:
            self.display.warning("gpuprov.cloud.journal: %s: unknown option(s) %s, ignored; the options are %s"
                                 % (path, ", ".join(unknown), ", ".join(sorted(self._options))))

    def _read(self, journal_path, state_dir, key_path):
        """The journal's rows and states, with known_hosts and the ssh config generated from them.
        A state directory that cannot be written is warned about; the hosts still come."""
        password = self.get_option("journal_password")
        try:
            try:
                rows, states = read_journal(journal_path, password, ssh.ControllerFiles(state_dir, key_path))
            except PrivateFileError as exc:
                self.display.warning("gpuprov.cloud.journal: cannot write known_hosts and the ssh config from the "
                                     "journal (%s): hosts are reached with the host keys already there" % exc)
                rows, states = read_journal(journal_path, password)
        except JournalError as exc:
            raise AnsibleParserError("gpuprov.cloud.journal: %s" % to_native(exc)) from exc
        return {"rows": rows, "states": states}

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        config = self._read_config_data(path)
        self._warn_unknown_options(config, path)
        try:
            hostnames = check_hostnames(self.get_option("hostnames"))
            filters = check_filters(self.get_option("filters"))
        except ValueError as exc:
            raise AnsibleParserError("gpuprov.cloud.journal: %s: %s" % (path, exc)) from exc
        journal_path, explicit = self._journal_path(path)
        state_dir = default_state_dir()
        _source, key_path = ssh.key_source(self.get_option("ssh_key"), None, state_dir)

        # As the aws_ec2 inventory: read the cache unless told to refresh it (cache=False: --flush-cache,
        # meta: refresh_inventory); read the journal and update the cache when it missed or was refreshed.
        cache_key = self.get_cache_key(path)
        use_cache = self.get_option("cache")
        needs_update = use_cache and not cache
        found = None
        if use_cache and cache:
            try:
                found = self._cache[cache_key]
            except KeyError:
                needs_update = True
        if found is None:
            found = self._read(journal_path, state_dir, key_path)
            if not is_dsn(journal_path) and not os.path.exists(journal_path):
                message = "gpuprov.cloud.journal: no journal at %s: no VMs yet" % journal_path
                if explicit:
                    self.display.warning(message)
                else:
                    self.display.vvv(message)
        if needs_update:
            self._cache[cache_key] = found
        self._populate(found["rows"], found["states"], state_dir, key_path, journal_path, filters, hostnames)

    def _populate(self, rows, states, state_dir, key_path, journal_path, filters, hostnames):
        strict = self.get_option("strict")
        self.inventory.add_group("gpuprov_vms")
        statuses = self.get_option("statuses") or ["running"]
        entries = host_entries(rows, states, state_dir, key_path, journal_path, statuses, filters, hostnames,
                               warn=lambda message: self.display.warning("gpuprov.cloud.journal: %s" % message))
        compose, composed, keyed = self.get_option("compose"), self.get_option("groups"), self.get_option("keyed_groups")
        added = set()
        for name, groups, variables in entries:
            for group in groups:
                if group not in added:
                    self.inventory.add_group(group)
                    added.add(group)
            self.inventory.add_host(name, group=groups[0])
            for group in groups[1:]:
                self.inventory.add_child(group, name)
            for key, value in variables.items():
                self.inventory.set_variable(name, key, value)
            if not (compose or composed or keyed):
                continue    # nothing to construct: the host's variables are not read back (thousands of hosts)
            hostvars = self.inventory.get_host(name).get_vars()
            self._set_composite_vars(compose, hostvars, name, strict=strict)
            self._add_host_to_composed_groups(composed, hostvars, name, strict=strict)
            self._add_host_to_keyed_groups(keyed, hostvars, name, strict=strict)
