"""The inventory plugin gpuprov.cloud.journal: hosts from the journal's vms projection.

The helpers are tested in process; the plugin itself through the real
``ansible-inventory`` (as users run it), against journals built under tmp_path.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys

import pytest

from ansible_collections.gpuprov.cloud.plugins.inventory import journal as inv
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal, JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import ssh
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import local as local_mod

REPO = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "build" / "collections"
BIN = pathlib.Path(sys.executable).parent


# --- journals to read -----------------------------------------------------------------

def _row(name, **fields):
    row = {"name": name, "cloud": "docker", "region": "local", "zone": None, "instance_id": "id-" + name,
           "instance_type": "container", "gpu": None, "gpu_count": None, "ssh_host": "127.0.0.1",
           "ssh_port": 40022, "ssh_user": "root", "host_key_alias": "gpuprov-%s-0123456789ab" % name,
           "status": "running", "stage": "Ready", "detail": None, "updated_at": 1000.0}
    row.update(fields)
    return row


def _ready_state(row, python=None, tags=None):
    return {"kind": "Ready", "reused": False, "search": None,
            "vm": {"name": row["name"], "instance_id": row["instance_id"],
                   "location": {"cloud": row["cloud"], "region": row["region"], "zone": row["zone"]},
                   "ssh": {"host": row["ssh_host"], "port": row["ssh_port"], "user": row["ssh_user"]},
                   "host_key_alias": row["host_key_alias"], "python_interpreter": python, "tags": tags or {}}}


def write_journal(path, rows, pythons=None):
    """A journal at ``path`` holding ``rows`` in the vms projection and, for each name in
    ``pythons``, a Ready launch state recording that interpreter."""
    journal = Journal(str(path))
    try:
        for row in rows:
            fields = {k: v for k, v in row.items() if k not in ("name", "updated_at")}
            projection.upsert_vm(journal, row["name"], **fields)
            if pythons and row["name"] in pythons:
                journal.begin(row["name"], "launch", _ready_state(row, pythons[row["name"]]), "Ready", True,
                              "test-owner", 60.0, None)
                journal.release(row["name"], "test-owner")
    finally:
        journal.close()


def dump(path):
    db = sqlite3.connect(str(path))
    try:
        return list(db.iterdump())
    finally:
        db.close()


# --- helpers, in process --------------------------------------------------------------

def test_connection_vars_are_the_vm_tasks():
    row = _row("web1")
    found = inv.connection_vars(row, "/state", "/state/id_ed25519", "/usr/bin/python3")
    vm = {"ssh": {"host": "127.0.0.1", "port": 40022, "user": "root"}, "host_key_alias": row["host_key_alias"],
          "python_interpreter": "/usr/bin/python3"}
    assert found == ssh.connection_vars(vm, ssh.ControllerFiles("/state", "/state/id_ed25519"))
    assert found["ansible_ssh_common_args"] == (
        "-o UserKnownHostsFile=/state/known_hosts -o HostKeyAlias=gpuprov-web1-0123456789ab "
        "-o StrictHostKeyChecking=yes -o IdentitiesOnly=yes")
    assert found["ansible_port"] == 40022 and isinstance(found["ansible_port"], int)


def test_unknown_python_is_left_to_the_user():
    found = inv.connection_vars(_row("web1"), "/state", "/k", None)
    assert "ansible_python_interpreter" not in found


@pytest.mark.parametrize("missing", ["ssh_host", "ssh_port", "host_key_alias"])
def test_no_endpoint_no_connection_vars(missing):
    assert inv.connection_vars(_row("web1", **{missing: None}), "/state", "/k") is None


def test_the_plugin_loads_only_the_journal_and_the_ssh_helpers():
    """Layering: reading an inventory never loads the vm service, the machines or an adapter."""
    probe = ("import sys; import ansible_collections.gpuprov.cloud.plugins.inventory.journal; "
             "print('\\n'.join(m for m in sys.modules if m.startswith('ansible_collections.gpuprov')))")
    env = dict(os.environ, PYTHONPATH=str(COLLECTIONS))
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    loaded = {m.rsplit("plugins.", 1)[-1] for m in proc.stdout.split() if "plugins." in m}
    assert "module_utils.vm.ssh" in loaded and "module_utils.machine.journal" in loaded
    assert not {"module_utils.vm.service", "module_utils.vm.launch", "module_utils.machine.executor",
                "module_utils.providers.registry"} & loaded, sorted(loaded)


def test_python_precedence():
    row = _row("p1")
    ready = _ready_state(row, "/opt/recorded/python3")
    # the projection's detail first, then the Ready state of the same instance, then the cloud's default
    assert inv.python_of(_row("p1", detail={"python_interpreter": "/detail/py"}), ready) == "/detail/py"
    assert inv.python_of(row, ready) == "/opt/recorded/python3"
    other = _ready_state(_row("p1", instance_id="an-older-instance"), "/old/py")
    assert inv.python_of(row, other) == "/usr/bin/python3"
    assert inv.python_of(row, {"kind": "Creating"}) == "/usr/bin/python3"
    assert inv.python_of(_row("p1", cloud="local"), None) == sys.executable
    assert inv.python_of(_row("p1", cloud="aws"), None) is None
    assert inv.python_of(_row("p1", cloud="aws", detail={"targets": []}), None) is None


def test_groups_are_sanitised():
    rows = [_row("g1", cloud="gcp", region="us-central1", zone="us-central1-a"),
            _row("a1", cloud="aws", region="us-east-1")]
    entries = {name: groups for name, groups, _vars in inv.host_entries(rows, {}, "/s", "/s/k", "/s/j")}
    assert entries["g1"] == ["gpuprov_vms", "cloud_gcp", "region_us_central1", "zone_us_central1_a",
                             "status_running"]
    assert entries["a1"] == ["gpuprov_vms", "cloud_aws", "region_us_east_1", "status_running"]
    assert inv.group_name("region", "eu.west/1 b") == "region_eu_west_1_b"


def test_only_running_vms_by_default():
    rows = [_row("up1"), _row("gone1", status="leaked", stage="Leaked", ssh_host=None),
            _row("odd1", status="unknown")]
    assert [e[0] for e in inv.host_entries(rows, {}, "/s", "/s/k", "/s/j")] == ["up1"]
    both = inv.host_entries(rows, {}, "/s", "/s/k", "/s/j", statuses=["running", "leaked"])
    assert [e[0] for e in both] == ["up1", "gone1"]
    name, groups, variables = both[1]
    assert "status_leaked" in groups and "gpuprov_vms" in groups
    # no endpoint: listed (down can retry it, in its journal) but without connection variables
    assert list(variables) == ["gpuprov"] and variables["gpuprov"]["status"] == "leaked"
    assert variables["gpuprov"]["journal"] == "/s/j"


def test_host_variables_are_the_connection_and_one_gpuprov_dict():
    row = _row("v1", gpu="H100", gpu_count=2, detail={"tags": {"team": "ml"}})
    entries = inv.host_entries([row], {"v1": _ready_state(row, "/py")}, "/s", "/s/k", "/s/journal.sqlite")
    [(_name, _groups, variables)] = entries
    assert variables["ansible_python_interpreter"] == "/py"
    assert variables["ansible_ssh_private_key_file"] == "/s/k"
    # The connection variables, then the whole rest of the record under one dict: no other variable.
    assert sorted(variables) == ["ansible_host", "ansible_port", "ansible_python_interpreter",
                                 "ansible_ssh_common_args", "ansible_ssh_private_key_file", "ansible_user", "gpuprov"]
    assert variables["gpuprov"] == {
        "name": "v1", "journal": "/s/journal.sqlite", "cloud": "docker", "region": "local", "zone": None,
        "instance_id": "id-v1", "instance_type": "container", "gpu": "H100", "gpu_count": 2, "status": "running",
        "stage": "Ready", "host_key_alias": "gpuprov-v1-0123456789ab", "updated_at": 1000.0, "tags": {"team": "ml"}}


def test_hostnames_the_first_field_with_a_value_and_each_name_once():
    rows = [_row("h1", detail={"tags": {"team": "ml"}}), _row("h2", instance_id=None),
            _row("h3"), _row("h4", instance_id=None, ssh_host=None)]
    warnings = []
    entries = inv.host_entries(rows, {}, "/s", "/s/k", "/s/j", hostnames=["tag:team", "instance_id", "ssh_host"],
                               warn=warnings.append)
    assert [(host, variables["gpuprov"]["name"]) for host, _groups, variables in entries] == [
        ("ml", "h1"), ("127.0.0.1", "h2"), ("id-h3", "h3")]
    assert len(warnings) == 1 and "VM h4 has none of the hostnames fields" in warnings[0]
    same = inv.host_entries([_row("d1", instance_id="x"), _row("d2", instance_id="x")], {}, "/s", "/s/k", "/s/j",
                            hostnames=["instance_id"], warn=warnings.append)
    assert [host for host, _g, _v in same] == ["x"] and "VM d2 would be host x, which VM d1 already is" in warnings[-1]
    plain = inv.host_entries([_row("n1")], {}, "/s", "/s/k", "/s/j")
    assert plain[0][0] == "n1" and plain[0][2]["gpuprov"]["name"] == "n1"


@pytest.mark.parametrize("hostnames, message", [
    ([], "hostnames: expected a non-empty list"), (["ip"], "hostnames: 'ip' is not a field; expected one of name"),
    (["tag:"], "hostnames: 'tag:' is not a field"), ("name", "hostnames: expected a non-empty list"),
])
def test_bad_hostnames_name_the_field(hostnames, message):
    with pytest.raises(ValueError, match=message):
        inv.check_hostnames(hostnames)


def test_filters_by_cloud_region_status_and_tag():
    rows = [_row("a1", cloud="aws", region="us-east-1", detail={"tags": {"team": "ml", "cost-center": 42}}),
            _row("a2", cloud="aws", region="eu-west-1", detail={"tags": {"team": "web"}}),
            _row("g1", cloud="gcp", region="us-east-1"),
            _row("l1", cloud="aws", region="us-east-1", status="leaked")]

    def hosts(filters, **kwargs):
        found = inv.host_entries(rows, {}, "/s", "/s/k", "/s/j", filters=inv.check_filters(filters), **kwargs)
        return [host for host, _g, _v in found]

    assert hosts({}) == ["a1", "a2", "g1"]
    assert hosts({"cloud": "aws"}) == ["a1", "a2"]
    assert hosts({"cloud": ["aws", "gcp"], "region": "us-east-1"}) == ["a1", "g1"]
    assert hosts({"tag:team": "ml"}) == ["a1"]
    assert hosts({"tag:cost-center": 42}) == ["a1"]            # compared as strings
    assert hosts({"tag:team": ["ml", "web"], "region": "eu-west-1"}) == ["a2"]
    # status takes the place of statuses
    assert hosts({"status": "leaked"}) == ["l1"]
    assert hosts({"status": ["running", "leaked"], "cloud": "aws", "region": "us-east-1"}) == ["a1", "l1"]
    [(_host, _groups, variables)] = inv.host_entries(rows[:1], {}, "/s", "/s/k", "/s/j")
    assert variables["gpuprov"]["tags"] == {"team": "ml", "cost-center": 42}


def test_tags_come_from_the_ready_launch_state_of_the_same_instance():
    """The vm module journals a VM's user tags with its Ready record; the projection's detail wins when it has them."""
    row = _row("t1", cloud="aws")
    states = {"t1": _ready_state(row, tags={"team": "ml"})}
    entries = inv.host_entries([row], states, "/s", "/s/k", "/s/j", filters=inv.check_filters({"tag:team": "ml"}),
                               hostnames=["tag:team"])
    assert [(host, v["gpuprov"]["tags"]) for host, _g, v in entries] == [("ml", {"team": "ml"})]
    older = {"t1": _ready_state(_row("t1", instance_id="an-older-instance"), tags={"team": "ml"})}
    assert inv.tags_of(row, older["t1"]) == {}
    assert inv.tags_of(_row("t1", detail={"tags": {"team": "web"}}), states["t1"]) == {"team": "web"}


@pytest.mark.parametrize("filters, message", [
    ({"colud": "aws"}, "filters: unknown key 'colud'; expected one of cloud, region"),
    ({"cloud": []}, "filters: cloud: expected a value or a non-empty list"),
    ({"region": {"a": 1}}, "filters: region: expected a value"),
    (["cloud"], "filters: expected a dict of field: value"),
])
def test_bad_filters_name_the_key(filters, message):
    with pytest.raises(ValueError, match=message):
        inv.check_filters(filters)


def test_read_journal_never_creates_one(tmp_path):
    path = tmp_path / "nowhere" / "journal.sqlite"
    assert inv.read_journal(str(path)) == ([], {})
    assert not path.exists() and not path.parent.exists()


def test_read_journal_rejects_what_is_not_a_journal(tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not sqlite at all" * 10)
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    for path in (garbage, empty):
        with pytest.raises(JournalError, match="is not a gpuprov journal"):
            inv.read_journal(str(path))
    assert garbage.read_bytes() == b"not sqlite at all" * 10 and empty.read_bytes() == b""
    other = tmp_path / "other.sqlite"
    db = sqlite3.connect(str(other))
    db.execute("CREATE TABLE songs (title TEXT)")
    db.commit()
    db.close()
    with pytest.raises(JournalError, match="something else"):
        inv.read_journal(str(other))
    with pytest.raises(JournalError, match="is not a file"):
        inv.read_journal(str(tmp_path))


def test_read_journal_rows_and_states(tmp_path):
    path = tmp_path / "journal.sqlite"
    write_journal(path, [_row("r1"), _row("r2")], pythons={"r1": "/py1"})
    rows, states = inv.read_journal(str(path))
    assert [r["name"] for r in rows] == ["r1", "r2"]
    assert states["r1"]["vm"]["python_interpreter"] == "/py1" and "r2" not in states


@pytest.mark.parametrize("name, ok", [
    ("gpuprov.journal.yml", True), ("gpuprov.journal.yaml", True), ("team.gpuprov_journal.yml", True),
    ("x.gpuprov_journal.yaml", True), ("gpuprov.yml", True), ("gpuprov.yaml", True), ("team.gpuprov.yml", True),
    ("a.b.gpuprov.yaml", True), ("journal.yml", False), ("xgpuprov.yml", False), ("gpuprov.yml.bak", False),
    ("gpuprov_journal.yml.bak", False),
])
def test_verify_file(tmp_path, name, ok):
    path = tmp_path / name
    path.write_text("plugin: gpuprov.cloud.journal\n")
    assert inv.InventoryModule().verify_file(str(path)) is ok


# --- the plugin through ansible-inventory --------------------------------------------

class Inventory:
    def __init__(self, home):
        self.home = home
        self.env = dict(os.environ, GPUPROV_HOME=str(home), ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
                        ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_LOCAL_TEMP=str(home / "ansible-tmp"),
                        ANSIBLE_INVENTORY_UNPARSED_WARNING="True")
        for var in ("GPUPROV_JOURNAL", "XDG_STATE_HOME", "ANSIBLE_CONFIG", "ANSIBLE_INVENTORY"):
            self.env.pop(var, None)

    def config(self, text, name="gpuprov.journal.yml"):
        path = self.home / name
        path.write_text(text)
        return path

    def run(self, source, *args):
        return subprocess.run([str(BIN / "ansible-inventory"), "-i", str(source), *args], env=self.env,
                              cwd=str(self.home), capture_output=True, text=True, timeout=120, check=False)

    def list(self, source):
        proc = self.run(source, "--list")
        assert proc.returncode == 0, proc.stderr
        return _plain(json.loads(proc.stdout)), proc.stderr


def _plain(value):
    """ansible-inventory --list marks plugin-supplied strings as unsafe: unwrap them."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _members(listing, group):
    return sorted(listing.get(group, {}).get("hosts", []))


# Not conftest.py's home: ansible-inventory runs in a child process that Inventory hands this folder to, and this
# process's environment stays as it is.
@pytest.fixture
def home(tmp_path):
    folder = tmp_path / "gpuprov-home"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def ansible_inventory(home):
    return Inventory(home)


def test_list_hosts_groups_and_vars(home, ansible_inventory):
    journal = home / "journal.sqlite"
    rows = [_row("dock1"), _row("loc1", cloud="local", ssh_user="me"),
            _row("gcp1", cloud="gcp", region="us-central1", zone="us-central1-a", ssh_host="203.0.113.7",
                 ssh_port=22, ssh_user="gpuprov", gpu="L4", gpu_count=1),
            _row("dead1", cloud="aws", region="us-east-1", status="leaked", stage="Leaked")]
    write_journal(journal, rows, pythons={"gcp1": "/usr/bin/python3.11"})
    before = dump(journal)
    listing, _err = ansible_inventory.list(ansible_inventory.config("plugin: gpuprov.cloud.journal\n"))
    assert _members(listing, "gpuprov_vms") == ["dock1", "gcp1", "loc1"]
    assert _members(listing, "cloud_docker") == ["dock1"] and _members(listing, "cloud_local") == ["loc1"]
    assert _members(listing, "region_local") == ["dock1", "loc1"]
    assert _members(listing, "region_us_central1") == ["gcp1"]
    assert _members(listing, "zone_us_central1_a") == ["gcp1"]
    assert _members(listing, "status_running") == ["dock1", "gcp1", "loc1"]
    assert "dead1" not in listing["_meta"]["hostvars"]
    hostvars = listing["_meta"]["hostvars"]
    files = ssh.ControllerFiles(str(home), str(home / "id_ed25519"))
    for row in rows[:3]:
        vm = {"ssh": {"host": row["ssh_host"], "port": row["ssh_port"], "user": row["ssh_user"]},
              "host_key_alias": row["host_key_alias"], "python_interpreter": "unused"}
        expected = ssh.connection_vars(vm, files)
        got = hostvars[row["name"]]
        assert {k: got[k] for k in expected if k != "ansible_python_interpreter"} == \
               {k: v for k, v in expected.items() if k != "ansible_python_interpreter"}
    assert hostvars["dock1"]["ansible_python_interpreter"] == "/usr/bin/python3"
    assert hostvars["gcp1"]["ansible_python_interpreter"] == "/usr/bin/python3.11"   # recorded by the launch
    assert hostvars["loc1"]["ansible_python_interpreter"]                              # the controller's
    assert hostvars["gcp1"]["gpuprov"]["journal"] == str(journal)
    assert hostvars["gcp1"]["gpuprov"]["cloud"] == "gcp" and hostvars["gcp1"]["gpuprov"]["gpu"] == "L4"
    assert not [k for host in hostvars.values() for k in host if k.startswith("gpuprov_")]   # no flat names
    assert dump(journal) == before      # read-only


def test_graph(home, ansible_inventory):
    write_journal(home / "journal.sqlite", [_row("g-one"), _row("g-two", region="eu-west-1", cloud="aws")])
    proc = ansible_inventory.run(ansible_inventory.config("plugin: gpuprov.cloud.journal\n"), "--graph")
    assert proc.returncode == 0, proc.stderr
    assert "@gpuprov_vms:" in proc.stdout and "|--g-one" in proc.stdout and "@region_eu_west_1:" in proc.stdout


def test_journal_and_ssh_key_options(home, ansible_inventory, tmp_path):
    other = tmp_path / "team" / "shared.sqlite"
    other.parent.mkdir()
    write_journal(other, [_row("team1")])
    write_journal(home / "journal.sqlite", [_row("mine1")])
    config = tmp_path / "team" / "team.gpuprov_journal.yml"
    config.write_text("plugin: gpuprov.cloud.journal\njournal: shared.sqlite\nssh_key: ~/keys/team_ed25519\n")
    listing, _err = ansible_inventory.list(config)
    assert _members(listing, "gpuprov_vms") == ["team1"]     # relative to the config file, not the default
    team = listing["_meta"]["hostvars"]["team1"]
    assert team["ansible_ssh_private_key_file"] == os.path.expanduser("~/keys/team_ed25519")
    assert team["gpuprov"]["journal"] == str(other)
    # the known hosts file stays the state directory's (where the launch pinned the key)
    assert "UserKnownHostsFile=%s " % (home / "known_hosts") in team["ansible_ssh_common_args"]


def test_gpuprov_journal_env_is_the_default(home, ansible_inventory, tmp_path):
    elsewhere = tmp_path / "elsewhere.sqlite"
    write_journal(elsewhere, [_row("env1")])
    ansible_inventory.env["GPUPROV_JOURNAL"] = str(elsewhere)
    listing, _err = ansible_inventory.list(ansible_inventory.config("plugin: gpuprov.cloud.journal\n"))
    assert _members(listing, "gpuprov_vms") == ["env1"]


def test_statuses_option(home, ansible_inventory):
    write_journal(home / "journal.sqlite", [_row("ok1"), _row("bad1", status="leaked", stage="Leaked")])
    listing, _err = ansible_inventory.list(ansible_inventory.config(
        "plugin: gpuprov.cloud.journal\nstatuses: [running, leaked]\n"))
    assert _members(listing, "gpuprov_vms") == ["bad1", "ok1"]
    assert _members(listing, "status_leaked") == ["bad1"]


def test_constructed_features_read_the_gpuprov_dict(home, ansible_inventory):
    write_journal(home / "journal.sqlite", [_row("c1", gpu="H100", gpu_count=8, detail={"tags": {"team": "ml"}}),
                                            _row("c2")])
    listing, _err = ansible_inventory.list(ansible_inventory.config(
        "plugin: gpuprov.cloud.journal\n"
        "compose:\n  gpus: gpuprov.gpu_count | default(0, true)\n  where: gpuprov.cloud ~ '/' ~ gpuprov.region\n"
        "groups:\n  gpu_hosts: gpuprov.gpu is not none\n"
        "keyed_groups:\n  - key: gpuprov.cloud\n    prefix: via\n  - key: gpuprov.stage\n    prefix: stage\n"
        "  - key: gpuprov.tags.team | default('none')\n    prefix: team\n"))
    assert _members(listing, "gpu_hosts") == ["c1"]
    assert _members(listing, "via_docker") == ["c1", "c2"] and _members(listing, "stage_Ready") == ["c1", "c2"]
    assert _members(listing, "team_ml") == ["c1"] and _members(listing, "team_none") == ["c2"]
    hostvars = listing["_meta"]["hostvars"]
    assert hostvars["c1"]["gpus"] == 8 and hostvars["c2"]["gpus"] == 0 and hostvars["c1"]["where"] == "docker/local"


def test_the_flat_names_are_gone_from_constructed_features_too(home, ansible_inventory):
    """gpuprov_<key> (the flat names of earlier development snapshots) is undefined: strict says so by name."""
    write_journal(home / "journal.sqlite", [_row("f1")])
    config = ansible_inventory.config("plugin: gpuprov.cloud.journal\nstrict: true\n"
                                      "keyed_groups:\n  - key: gpuprov_cloud\n    prefix: via\n")
    proc = ansible_inventory.run(config, "--list")
    assert "gpuprov_cloud" in proc.stderr and "via_docker" not in proc.stdout, proc.stderr


def test_keyed_groups_alone_still_construct(home, ansible_inventory):
    """Hosts are read back for compose/groups/keyed_groups only when one is set; each alone still works."""
    write_journal(home / "journal.sqlite", [_row("k1", gpu="L4"), _row("k2")])
    listing, err = ansible_inventory.list(ansible_inventory.config(
        "plugin: gpuprov.cloud.journal\nkeyed_groups:\n  - key: gpuprov.gpu | default('none', true)\n    prefix: gpu\n"))
    assert _members(listing, "gpu_L4") == ["k1"] and _members(listing, "gpu_none") == ["k2"], err


def test_missing_journal_is_an_empty_inventory(home, ansible_inventory):
    listing, err = ansible_inventory.list(ansible_inventory.config("plugin: gpuprov.cloud.journal\n"))
    assert _members(listing, "gpuprov_vms") == [] and not listing["_meta"]["hostvars"]
    assert not (home / "journal.sqlite").exists()
    assert "no journal" not in err          # the default place: no VMs yet is normal
    explicit = ansible_inventory.config("plugin: gpuprov.cloud.journal\njournal: typo.sqlite\n",
                                        name="x.gpuprov_journal.yml")
    listing, err = ansible_inventory.list(explicit)
    assert not listing["_meta"]["hostvars"] and "no journal at %s" % (home / "typo.sqlite") in err
    assert not (home / "typo.sqlite").exists()


def test_bad_journal_is_a_clear_error(home, ansible_inventory):
    bad = home / "journal.sqlite"
    bad.write_bytes(b"garbage" * 50)
    proc = ansible_inventory.run(ansible_inventory.config("plugin: gpuprov.cloud.journal\n"), "--list")
    assert "is not a gpuprov journal" in proc.stderr, proc.stderr
    assert bad.read_bytes() == b"garbage" * 50


def test_other_plugin_name_is_not_ours(home, ansible_inventory):
    write_journal(home / "journal.sqlite", [_row("n1")])
    proc = ansible_inventory.run(ansible_inventory.config("plugin: gpuprov.cloud.nothere\n"), "--list")
    assert "n1" not in proc.stdout


# --- issue 15: cache, hostnames, filters, unknown options; issue 12: a fresh HOME ------

def test_cache_true_really_caches_until_flushed(home, ansible_inventory, tmp_path):
    journal = home / "journal.sqlite"
    write_journal(journal, [_row("c1")])
    cache_dir = tmp_path / "inventory-cache"
    config = ansible_inventory.config(
        "plugin: gpuprov.cloud.journal\ncache: true\ncache_plugin: ansible.builtin.jsonfile\n"
        "cache_connection: %s\ncache_timeout: 3600\n" % cache_dir, name="cached.gpuprov.yml")
    listing, _err = ansible_inventory.list(config)
    assert _members(listing, "gpuprov_vms") == ["c1"]
    cached = list(cache_dir.iterdir())
    assert len(cached) == 1 and "c1" in cached[0].read_text(), cached
    # A VM launched since: the cached hosts are served, the journal is not read...
    write_journal(journal, [_row("c2")])
    listing, _err = ansible_inventory.list(config)
    assert _members(listing, "gpuprov_vms") == ["c1"]
    # ...until the cache is flushed, which reads the journal and refreshes the cache.
    proc = ansible_inventory.run(config, "--list", "--flush-cache")
    assert proc.returncode == 0, proc.stderr
    assert sorted(_plain(json.loads(proc.stdout))["gpuprov_vms"]["hosts"]) == ["c1", "c2"]
    listing, _err = ansible_inventory.list(config)
    assert _members(listing, "gpuprov_vms") == ["c1", "c2"]


def test_without_cache_every_read_sees_the_journal(home, ansible_inventory):
    journal = home / "journal.sqlite"
    write_journal(journal, [_row("u1")])
    config = ansible_inventory.config("plugin: gpuprov.cloud.journal\n", name="plain.gpuprov.yaml")
    assert _members(ansible_inventory.list(config)[0], "gpuprov_vms") == ["u1"]
    write_journal(journal, [_row("u2")])
    assert _members(ansible_inventory.list(config)[0], "gpuprov_vms") == ["u1", "u2"]


def test_hostnames_and_filters_through_ansible_inventory(home, ansible_inventory):
    write_journal(home / "journal.sqlite", [
        _row("f1", cloud="aws", region="us-east-1", instance_id="i-0f1", detail={"tags": {"team": "ml"}}),
        _row("f2", cloud="aws", region="eu-west-1", instance_id="i-0f2", detail={"tags": {"team": "web"}}),
        _row("f3", cloud="gcp", region="us-east-1", instance_id="g-3")])
    listing, err = ansible_inventory.list(ansible_inventory.config(
        "plugin: gpuprov.cloud.journal\nhostnames: [instance_id]\n"
        "filters:\n  cloud: aws\n  'tag:team': [ml, ops]\n"))
    assert _members(listing, "gpuprov_vms") == ["i-0f1"], err
    assert listing["_meta"]["hostvars"]["i-0f1"]["gpuprov"]["name"] == "f1"
    proc = ansible_inventory.run(ansible_inventory.config(
        "plugin: gpuprov.cloud.journal\nfilters:\n  clouds: aws\n"), "--list")
    assert "filters: unknown key 'clouds'; expected one of cloud" in proc.stderr, proc.stderr
    assert "f1" not in proc.stdout


def test_an_unknown_option_warns_naming_it(home, ansible_inventory):
    write_journal(home / "journal.sqlite", [_row("w1")])
    listing, err = ansible_inventory.list(ansible_inventory.config(
        "plugin: gpuprov.cloud.journal\nstatus: [leaked]\nsshkey: ~/.ssh/id\n"))
    assert _members(listing, "gpuprov_vms") == ["w1"]
    assert "unknown option(s) sshkey, status, ignored" in " ".join(err.split()), err


def test_a_fresh_home_gets_known_hosts_and_ssh_config_from_the_journal(home, ansible_inventory, tmp_path):
    """Another controller's journal (an AWX job's): the inventory regenerates the pinned host key and the
    ssh config block in this empty state directory, with the key GPUPROV_SSH_KEY_FILE names."""
    shared = tmp_path / "shared" / "journal.sqlite"
    shared.parent.mkdir()
    key_b64 = "AAAAC3NzaC1lZDI1NTE5AAAAIK" + "k" * 42
    write_journal(shared, [_row("fresh1", detail={"host_key": {"type": "ssh-ed25519", "key": key_b64}}),
                           _row("nokey1")])
    fresh = home / "fresh-state"
    ansible_inventory.env.update(GPUPROV_HOME=str(fresh), GPUPROV_JOURNAL=str(shared),
                                 GPUPROV_SSH_KEY_FILE=str(tmp_path / "machine_key"))
    listing, _err = ansible_inventory.list(ansible_inventory.config("plugin: gpuprov.cloud.journal\n"))
    hostvars = listing["_meta"]["hostvars"]
    assert hostvars["fresh1"]["ansible_ssh_private_key_file"] == str(tmp_path / "machine_key")
    assert "UserKnownHostsFile=%s " % (fresh / "known_hosts") in hostvars["fresh1"]["ansible_ssh_common_args"]
    known = (fresh / "known_hosts").read_text()
    assert known == "gpuprov-fresh1-0123456789ab ssh-ed25519 %s\n" % key_b64
    config = (fresh / "ssh_config").read_text()
    assert "Host fresh1\n" in config and "IdentityFile %s\n" % (tmp_path / "machine_key") in config
    assert "Host nokey1" not in config      # no journalled host key: nothing to pin it to
    for name in ("known_hosts", "ssh_config"):
        assert oct((fresh / name).stat().st_mode & 0o777) == "0o600"


def test_a_postgresql_journal_with_the_journal_password_option(home, ansible_inventory):
    pg_server = pytest.importorskip("ansible_collections.gpuprov.cloud.tests.pg_server")
    why = pg_server.unavailable()
    if why:
        pytest.skip(why)
    server = pg_server.PgServer()
    try:
        dsn = server.new_database()
        journal = projection.open_journal(dsn, password=pg_server.PASSWORD)
        try:
            fields = {k: v for k, v in _row("pg1").items() if k not in ("name", "updated_at")}
            projection.upsert_vm(journal, "pg1", **fields)
        finally:
            journal.close()
        for variable in ("PGPASSWORD", "PGPASSFILE"):
            ansible_inventory.env.pop(variable, None)
        config = "plugin: gpuprov.cloud.journal\njournal: %s\n" % dsn
        listing, err = ansible_inventory.list(ansible_inventory.config(
            config + "journal_password: %s\n" % pg_server.PASSWORD, name="pg.gpuprov.yml"))
        assert _members(listing, "gpuprov_vms") == ["pg1"], err
        assert listing["_meta"]["hostvars"]["pg1"]["gpuprov"]["journal"] == dsn     # shown without a password
        assert pg_server.PASSWORD not in json.dumps(listing) + err
        # Without it: a clear error naming where a password comes from, never a traceback.
        proc = ansible_inventory.run(ansible_inventory.config(config, name="nopw.gpuprov.yml"), "--list")
        assert "journal_password, PGPASSWORD or PGPASSFILE" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    finally:
        server.destroy()


@pytest.mark.skipif(not os.path.exists("/usr/sbin/sshd"), reason="needs openssh-server (sshd)")
def test_the_tags_a_provision_set_select_and_name_hosts(tmp_path, monkeypatch):
    """The vm service (local cloud, real sshd) launches with user tags; the inventory filters and names by them."""
    monkeypatch.setenv("GPUPROV_HOME", str(tmp_path))
    monkeypatch.delenv("GPUPROV_JOURNAL", raising=False)
    monkeypatch.delenv("GPUPROV_SSH_KEY_FILE", raising=False)
    params = {"name": "tagged1", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
              "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
              "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None,
              "boot_script": None, "tags": {"team": "ml", "cost-center": "42"}}
    try:
        up = VmService(params).run()
        assert not up.get("failed"), up
        rows, states = inv.read_journal(str(tmp_path / "journal.sqlite"))
        entries = inv.host_entries(rows, states, str(tmp_path), str(tmp_path / "id_ed25519"), "/j",
                                   filters=inv.check_filters({"tag:team": "ml"}), hostnames=["tag:cost-center"])
        assert [(host, v["gpuprov"]["name"]) for host, _g, v in entries] == [("42", "tagged1")]
        assert inv.host_entries(rows, states, str(tmp_path), "/k", "/j", filters={"tag:team": ["web"]}) == []
    finally:
        for pid, cmdline in local_mod._sshd_processes():
            if str(tmp_path) + os.sep in cmdline:
                os.kill(pid, signal.SIGKILL)
