"""The journal inventory on a large journal (bench/inventory_big.py measures 10,000 VMs): the journal is
read in one statement (no query, and no whole machine state, per VM), the ssh config is rewritten in one
pass, and listing imports neither paramiko nor psycopg; what it returns stays what
test_inventory_journal.py asserts.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from ansible_collections.gpuprov.cloud.plugins.inventory import journal as inv
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection, ssh
from ansible_collections.gpuprov.cloud.tests.unit.test_inventory_journal import (
    COLLECTIONS, _ready_state, _row, write_journal,
)


def _journal_of_kinds(path):
    """r0 Ready (Python recorded), r1 Booting, r2 Ready whose vm is not a record, r3 no machine at all."""
    rows = [_row("r%d" % n) for n in range(4)]
    write_journal(path, rows, pythons={"r0": "/py0"})
    journal = Journal(str(path))
    try:
        for name, state in (("r1", {"kind": "Booting", "vm": {"tags": {"x": "y"}}}), ("r2", {"kind": "Ready", "vm": "?"})):
            journal.begin(name, "launch", state, state["kind"], False, "test-owner", 60.0, None)
            journal.release(name, "test-owner")
    finally:
        journal.close()
    return rows


def test_read_journal_is_one_statement_not_a_load_per_vm(tmp_path, monkeypatch):
    path = tmp_path / "journal.sqlite"
    rows = _journal_of_kinds(path)
    queries = []

    def refuse_load(self, key):
        raise AssertionError("journal.load(%r): a query per VM" % key)

    real_query = Journal.query

    def counted(self, sql, args=()):
        queries.append(sql)
        return real_query(self, sql, args)

    monkeypatch.setattr(Journal, "load", refuse_load)
    monkeypatch.setattr(Journal, "query", counted)
    found, states = inv.read_journal(str(path))
    assert [r["name"] for r in found] == ["r0", "r1", "r2", "r3"] and len(queries) == 1, queries
    # Only a Ready state's vm record is read, which is all tags_of and python_of look at.
    assert states == {"r0": {"kind": "Ready", "vm": _ready_state(rows[0], "/py0")["vm"]}}
    assert inv.python_of(found[0], states["r0"]) == "/py0"


def test_ready_vm_records_without_sqlite_json_functions(tmp_path, monkeypatch):
    """Before SQLite 3.38 its JSON functions were optional: the listing then reads whole states, same result."""
    path = tmp_path / "journal.sqlite"
    _journal_of_kinds(path)
    journal = projection.open_journal(str(path))
    try:
        listing = projection.vms_with_ready_vm(journal)
        assert [row for row, _vm in listing] == projection.vms(journal)
        assert [vm is not None for _row, vm in listing] == [True, False, False, False]
        real_query = journal.query

        def without_json(sql, args=()):
            if "json_extract" in sql:
                raise sqlite3.OperationalError("no such function: json_extract")
            return real_query(sql, args)

        monkeypatch.setattr(journal, "query", without_json)
        assert projection.vms_with_ready_vm(journal) == listing
    finally:
        journal.close()


def test_ssh_config_blocks_replaced_in_one_pass_as_one_at_a_time(tmp_path):
    files = ssh.ControllerFiles(str(tmp_path), str(tmp_path / "k"))

    def block(name, body):
        begin, end = files._markers(name)
        return begin + body + end

    text = ("Host *\n    ServerAliveInterval 30\n" + block("a", "old a\n") + "# the user's own line\n"
            + block("b", "old b\n") + block("c", "kept c\n") + block("a", "second a\n") + "Host other\n")
    blocks = {"b": "new b\n", "a": "new a\n", "d": "new d\n", "e": ""}
    one_at_a_time = text
    for name, body in sorted(blocks.items()):
        one_at_a_time = files._with_block(one_at_a_time, name, body)
    assert files._with_blocks(text, blocks) == one_at_a_time
    again = one_at_a_time
    for name, body in sorted(blocks.items()):
        again = files._with_block(again, name, body)
    assert files._with_blocks(one_at_a_time, blocks) == again       # the next read (a's second block goes)
    many = {"vm%04d" % n: "Host vm%04d\n" % n for n in range(300)}
    written = files._with_blocks("", many)
    assert files._with_blocks(written, many) == written and written.count("# BEGIN gpuprov ") == 300   # unchanged


def test_reading_an_inventory_imports_neither_paramiko_nor_psycopg():
    probe = ("import sys; from ansible_collections.gpuprov.cloud.plugins.inventory import journal; "
             "print(sorted(m for m in ('paramiko', 'psycopg') if m in sys.modules)); "
             "from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import ssh; "
             "print(ssh.HAS_PARAMIKO, ssh.paramiko.SSHException.__name__, 'paramiko' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(COLLECTIONS))
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    # paramiko is imported by the first SSH check (or health's ssh.paramiko), never by a listing.
    assert proc.stdout.split("\n")[:2] == ["[]", "True SSHException True"], proc.stdout + proc.stderr


def test_ready_vm_records_on_postgresql():
    pg_server = pytest.importorskip("ansible_collections.gpuprov.cloud.tests.pg_server")
    why = pg_server.unavailable()
    if why:
        pytest.skip(why)
    server = pg_server.PgServer()
    try:
        journal = projection.open_journal(server.new_database(), password=pg_server.PASSWORD)
        try:
            rows = [_row("p%d" % n) for n in range(3)]
            for row in rows:
                projection.upsert_vm(journal, row["name"], **{k: v for k, v in row.items() if k not in ("name", "updated_at")})
            for name, state in (("p0", _ready_state(rows[0], "/py0", {"team": "ml"})), ("p1", {"kind": "Booting"})):
                journal.begin(name, "launch", state, state["kind"], state["kind"] == "Ready", "test-owner", 60.0, None)
                journal.release(name, "test-owner")
            listing = projection.vms_with_ready_vm(journal)
            assert [row for row, _vm in listing] == projection.vms(journal)
            assert [vm for _row, vm in listing] == [_ready_state(rows[0], "/py0", {"team": "ml"})["vm"], None, None]
        finally:
            journal.close()
    finally:
        server.destroy()
