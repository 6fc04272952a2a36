"""The ``journal`` option is a ``str``, not a ``path``: a PostgreSQL DSN reaches the journal opener as the task
wrote it (a ``$`` in its password is the password's, not a variable), and only a file path gets ``~`` and
``$VAR`` expanded, once, by state_dir.journal_location, for every module, action plugin and the inventory."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuprov.cloud.plugins.inventory.journal import InventoryModule
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import primitive_tasks
from ansible_collections.gpuprov.cloud.plugins.module_utils.cluster import args as cluster_args
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import JournalError
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import shown
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.provider_args import GROUP_SPEC, validation_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import journal_location
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import args as vm_args
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import health_args, ssh_files, sweep
from ansible_collections.gpuprov.cloud.plugins.modules import journal_info
from ansible_collections.gpuprov.cloud.tests import pg_server
from ansible_collections.gpuprov.cloud.tests.unit.test_action_argument_specs import BIN, COLLECTIONS, REPO
from ansible_collections.gpuprov.cloud.tests.unit.test_inventory_journal import _row as inventory_row

# $HOME is set wherever a task runs, so a path-typed option would have turned this password into another.
PASSWORD = "pa$HOME-$word"
DSN = "postgresql://gpuprov:%s@127.0.0.1:9/journal" % PASSWORD

# Every argument spec that takes the journal option (the module_defaults group's members), and what else
# each one requires.
SPECS = {
    "vm": (vm_args.VM_ARGUMENT_SPEC, {"name": "v1"}),
    "vm_stage": (cluster_args.VM_STAGE_ARGUMENT_SPEC, {"name": "v1", "stage": "Ready"}),
    "health_info": (health_args.HEALTH_ARGUMENT_SPEC, {}),
    "ssh_files": (ssh_files.SSH_FILES_ARGUMENT_SPEC, {}),
    "orphans": (sweep.ORPHANS_ARGUMENT_SPEC, {}),
    "offers": (primitive_tasks.OFFERS.argument_spec, {}),
    "instance": (primitive_tasks.INSTANCE.argument_spec, {"name": "v1"}),
    "instance_info": (primitive_tasks.INSTANCE_INFO.argument_spec, {"name": "v1"}),
    "journal_info": (GROUP_SPEC, {}),   # it builds its spec from the group's shared options
}


@pytest.mark.parametrize("module", sorted(SPECS))
def test_every_spec_with_a_journal_keeps_a_dsn_as_written(module):
    spec, required = SPECS[module]
    assert spec["journal"]["type"] == "str"
    result = ArgumentSpecValidator(validation_spec(spec)).validate(dict(required, journal=DSN))
    assert not result.error_messages, result.error_messages
    assert result.validated_parameters["journal"] == DSN


@contextlib.contextmanager
def module_args(args):
    """The arguments an AnsibleModule made inside reads, as Ansible hands them to a module."""
    try:
        from ansible.module_utils.testing import patch_module_args  # pylint: disable=import-outside-toplevel
    except ImportError:   # ansible-core < 2.19
        saved = basic._ANSIBLE_ARGS
        basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode()
        try:
            yield
        finally:
            basic._ANSIBLE_ARGS = saved
        return
    with patch_module_args(args):
        yield


def run_journal_info(args, capsys):
    """journal_info's result for ``args``, through its real AnsibleModule (argument spec, no_log values)."""
    with module_args(args), pytest.raises(SystemExit):
        journal_info.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def opened(monkeypatch):
    """The locations the journal opener is handed; it opens nothing (there is no server)."""
    locations = []

    def opener(location, **_kwargs):
        locations.append(location)
        raise JournalError("journal: %s: not opened by this test" % shown(location))

    monkeypatch.setattr(projection, "open_location", opener)
    return locations


def test_a_module_hands_a_dsn_with_a_dollar_in_its_password_to_the_opener_unchanged(opened, capsys):
    result = run_journal_info({"journal": DSN}, capsys)
    assert opened == [DSN]
    assert result["failed"] is True and "not opened by this test" in result["msg"]
    # Still never shown: not in the message, nor in the task's invocation.
    assert "pa$HOME" not in json.dumps(result)
    assert result["invocation"]["module_args"]["journal"] == "postgresql://gpuprov:********@127.0.0.1:9/journal"


def test_a_module_expands_a_path_s_tilde_and_variables(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GPUPROV_TEST_TEAM", "team")
    for written, expected in (("~/mine/journal.sqlite", tmp_path / "mine" / "journal.sqlite"),
                              ("$HOME/${GPUPROV_TEST_TEAM}/journal.sqlite", tmp_path / "team" / "journal.sqlite")):
        result = run_journal_info({"journal": written}, capsys)
        assert result.get("failed") is not True, result
        assert result["journal"] == str(expected) and result["vms"] == []   # no journal there yet: none made
        assert not expected.exists()


@pytest.mark.parametrize("written", [DSN, "  %s " % DSN, DSN.replace("postgresql://", "postgres://"),
                                     "POSTGRESQL://u:p$HOME@h/db"])
def test_journal_location_takes_a_dsn_as_written(written):
    assert journal_location(written) == written.strip()


def test_journal_location_expands_a_path_once(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GPUPROV_TEST_DIR", "a$HOME")   # a value with a "$" of its own stays as it is
    assert journal_location("~/j.sqlite") == str(tmp_path / "j.sqlite")
    expanded = journal_location("$HOME/$GPUPROV_TEST_DIR/j.sqlite")
    assert expanded == str(tmp_path / "a$HOME" / "j.sqlite")
    assert journal_location("j.sqlite", relative_to=str(tmp_path / "conf")) == str(tmp_path / "conf" / "j.sqlite")
    assert journal_location("/abs/j.sqlite", relative_to=str(tmp_path)) == "/abs/j.sqlite"


def test_the_opener_is_handed_a_location_as_journal_location_made_it(opened, monkeypatch, tmp_path):
    monkeypatch.setenv("GPUPROV_TEST_DIR", "a$HOME")
    location = journal_location("%s/$GPUPROV_TEST_DIR/j.sqlite" % tmp_path)
    with pytest.raises(JournalError):
        projection.open_journal(location)
    assert opened == [str(tmp_path / "a$HOME" / "j.sqlite")]


def test_the_default_journal_dsn_is_taken_as_written(monkeypatch):
    monkeypatch.setenv("GPUPROV_JOURNAL", DSN)
    assert journal_location() == journal_location("") == DSN


def inventory_journal(config_path, journal):
    plugin = InventoryModule()
    plugin.get_option = {"journal": journal}.get
    return plugin._journal_path(str(config_path))   # pylint: disable=protected-access


def test_the_inventory_takes_a_dsn_as_written_and_expands_a_path(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = tmp_path / "conf" / "gpuprov.yml"
    assert inventory_journal(config, DSN) == (DSN, True)
    assert inventory_journal(config, "~/j.sqlite") == (str(tmp_path / "home" / "j.sqlite"), True)
    assert inventory_journal(config, "$HOME/j.sqlite") == (str(tmp_path / "home" / "j.sqlite"), True)
    assert inventory_journal(config, "j.sqlite") == (str(tmp_path / "conf" / "j.sqlite"), True)


def test_a_postgresql_journal_whose_password_has_a_dollar(tmp_path):
    """End to end, on a real server: a module and the inventory log in with the password as written."""
    why = pg_server.unavailable()
    if why:
        pytest.skip(why)
    server = pg_server.PgServer()
    try:
        server.admin("CREATE ROLE dollar LOGIN PASSWORD '%s'" % PASSWORD)
        database = "j_dollar"
        server.admin("CREATE DATABASE %s OWNER dollar" % database)
        dsn = "postgresql://dollar:%s@127.0.0.1:%d/%s" % (PASSWORD, server.port, database)
        journal = projection.open_journal(dsn)
        try:
            projection.upsert_vm(journal, "pg1", **{k: v for k, v in inventory_row("pg1").items()
                                                    if k not in ("name", "updated_at")})
        finally:
            journal.close()
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": ":".join(sys.path), "HOME": str(tmp_path),
               "GPUPROV_HOME": str(tmp_path / "state"), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
               "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp")}
        proc = subprocess.run([sys.executable, str(REPO / "plugins" / "modules" / "journal_info.py")],
                              input=json.dumps({"ANSIBLE_MODULE_ARGS": {"journal": dsn}}), env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        result = json.loads(proc.stdout)
        assert result.get("failed") is not True, result
        assert result["journal"] == "postgresql://dollar@127.0.0.1:%d/%s" % (server.port, database)
        assert PASSWORD not in proc.stdout + proc.stderr

        config = tmp_path / "pg.gpuprov.yml"
        config.write_text("plugin: gpuprov.cloud.journal\njournal: '%s'\n" % dsn)
        proc = subprocess.run([str(BIN / "ansible-inventory"), "-i", str(config), "--list"],
                              env=dict(env, ANSIBLE_INVENTORY_UNPARSED_FAILED="True"), cwd=str(tmp_path),
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["gpuprov_vms"]["hosts"] == ["pg1"], proc.stdout
        assert PASSWORD not in proc.stdout + proc.stderr
    finally:
        server.destroy()
