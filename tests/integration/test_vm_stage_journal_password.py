"""gpuprov.cloud.vm_stage, as the k3s role calls it (journal, name, stage, note), on a PostgreSQL
journal whose password comes only from the module_defaults group's journal_password: no DSN
password, no PGPASSWORD. The stage is recorded and the password never shows in the output."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.tests.integration.conftest import Ansible

pg_server = pytest.importorskip("ansible_collections.gpuprov.cloud.tests.pg_server")


def _journal_with_vm(dsn: str, name: str) -> None:
    journal = projection.open_journal(dsn, password=pg_server.PASSWORD)
    try:
        journal.begin(name, "launch", {"kind": "Ready"}, "Ready", True, "test-owner", 60.0, None)
        journal.release(name, "test-owner")
        projection.upsert_vm(journal, name, cloud="local", region="local", status="running", stage="Ready")
    finally:
        journal.close()


def _stage_of(dsn: str, name: str):
    journal = projection.open_journal(dsn, password=pg_server.PASSWORD)
    try:
        return projection.vm(journal, name)["stage"]
    finally:
        journal.close()


def test_the_group_default_journal_password_reaches_vm_stage(postgres, tmp_path: pathlib.Path):
    dsn = postgres.new_database()
    _journal_with_vm(dsn, "stage1")
    playbook = tmp_path / "stage.yml"
    playbook.write_text(textwrap.dedent("""\
        - hosts: localhost
          gather_facts: false
          module_defaults:
            group/gpuprov.cloud.gpuprov:
              journal_password: "{{ pg_password }}"
          tasks:
            - name: Record a stage as the k3s role does
              gpuprov.cloud.vm_stage:
                name: stage1
                stage: Installing
                note: from a group default
                journal: "{{ pg_dsn }}"
        """))
    runner = Ansible(tmp_path)
    runner.env.pop("PGPASSWORD", None)
    runner.env.pop("PGPASSFILE", None)
    argv = ["-e", "pg_dsn=%s" % dsn, "-e", "pg_password=%s" % pg_server.PASSWORD, "-v", str(playbook)]
    run = runner.tool("ansible-playbook", *argv)
    assert run.rc == 0, run.out + run.err
    assert _stage_of(dsn, "stage1") == "k3s:Installing"
    assert pg_server.PASSWORD not in run.out + run.err

    # Without it: the clear error of a refused password, naming where a password comes from.
    without = tmp_path / "without.yml"
    without.write_text(playbook.read_text().replace('journal_password: "{{ pg_password }}"', "journal: '{{ pg_dsn }}'"))
    refused = runner.tool("ansible-playbook", *argv[:-1], str(without))
    assert refused.rc != 0 and "journal_password, PGPASSWORD or PGPASSFILE" in refused.out, refused.out
    assert "Traceback" not in refused.out + refused.err
