"""The vms projection (vm/projection.py): one user-facing row per VM in the journal, and the
layering rule that the journal itself knows no VM columns.
Every journal lives under pytest's tmp_path; time is a FakeClock, never slept on."""

from __future__ import annotations

import inspect
import re

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine import journal as journal_module
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine import journal_file
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.projection import (
    VM_COLUMNS, delete_vm, open_journal, upsert_vm, vm, vms,
)


# clock and jpath are tests/unit/conftest.py's; journal is the projection's own (open_journal adds the vms table).
@pytest.fixture
def journal(jpath, clock):
    j = open_journal(jpath, clock=clock)
    yield j
    j.close()


def test_upsert_vm_inserts_with_unknown_status_by_default(journal, clock):
    upsert_vm(journal, "gpu-1", cloud="aws", region="us-east-1")
    row = vm(journal, "gpu-1")
    assert row["status"] == "unknown"
    assert (row["cloud"], row["region"], row["zone"], row["instance_id"]) == ("aws", "us-east-1", None, None)
    assert row["updated_at"] == 1000.0
    assert set(row) == {"name", "updated_at"} | set(VM_COLUMNS)


def test_upsert_vm_updates_only_the_given_columns(journal, clock):
    upsert_vm(journal, "gpu-1", cloud="aws", region="us-east-1", status="creating", stage="Creating",
              detail={"attempt": 1})
    clock.advance(7)
    upsert_vm(journal, "gpu-1", instance_id="i-123", ssh_port=22, gpu_count=1)
    row = vm(journal, "gpu-1")
    assert (row["cloud"], row["region"], row["status"], row["stage"]) == ("aws", "us-east-1", "creating", "Creating")
    assert (row["instance_id"], row["ssh_port"], row["gpu_count"]) == ("i-123", 22, 1)
    assert row["detail"] == {"attempt": 1}
    assert row["updated_at"] == 1007.0
    # status=None never overwrites a known status; an explicit one does
    upsert_vm(journal, "gpu-1", status=None)
    assert vm(journal, "gpu-1")["status"] == "creating"
    upsert_vm(journal, "gpu-1", status="running", detail={"targets": [{"id": "i-123"}]})
    row = vm(journal, "gpu-1")
    assert row["status"] == "running" and row["detail"] == {"targets": [{"id": "i-123"}]}
    # idempotent: writing the same thing twice is the same row
    upsert_vm(journal, "gpu-1", status="running", detail={"targets": [{"id": "i-123"}]})
    assert len(vms(journal)) == 1 and vm(journal, "gpu-1")["detail"] == {"targets": [{"id": "i-123"}]}


READY_VM = {"name": "gpu-1", "location": {"cloud": "aws", "region": "us-east-1", "zone": "us-east-1a"},
            "instance_id": "i-123", "instance_type": "g5.xlarge", "gpu": "A10G", "gpu_count": 1,
            "ssh": {"host": "203.0.113.7", "port": 22, "user": "ubuntu"}, "host_key_alias": "gpuprov-gpu-1-i-123",
            "python_interpreter": "/usr/bin/python3", "host_key": {"type": "ssh-ed25519", "key": "AAAA"},
            "ssh_key_fingerprint": "SHA256:k"}


def _commit_ready_rows(journal, rows):
    with journal.transaction() as tx:
        for sql, args in rows:
            tx.execute(sql, args)


def test_ready_vm_rows_insert_the_whole_row_and_overwrite_an_earlier_one(journal, clock):
    """The Ready transition commits these rows with the state: every column is the Ready VM's, whatever
    an earlier stage (or an earlier instance of the VM) left in the row."""
    upsert_vm(journal, "gpu-1", cloud="gcp", region="us-central1", instance_id="old", status="leaked",
              stage="Leaked", ssh_port=2222, detail={"targets": ["old"]})
    clock.advance(5)
    _commit_ready_rows(journal, projection.ready_vm_rows(journal, READY_VM))
    row = vm(journal, "gpu-1")
    assert (row["cloud"], row["region"], row["zone"], row["instance_id"], row["instance_type"]) == (
        "aws", "us-east-1", "us-east-1a", "i-123", "g5.xlarge")
    assert (row["gpu"], row["gpu_count"], row["ssh_host"], row["ssh_port"], row["ssh_user"]) == (
        "A10G", 1, "203.0.113.7", 22, "ubuntu")
    assert (row["status"], row["stage"], row["host_key_alias"], row["updated_at"]) == (
        "running", "Ready", "gpuprov-gpu-1-i-123", 1005.0)
    assert row["detail"] == {"python_interpreter": "/usr/bin/python3", "host_key": {"type": "ssh-ed25519", "key": "AAAA"},
                             "ssh_key_fingerprint": "SHA256:k"}
    _commit_ready_rows(journal, projection.ready_vm_rows(journal, dict(READY_VM, name="gpu-2")))
    assert [r["name"] for r in vms(journal)] == ["gpu-1", "gpu-2"] and vm(journal, "gpu-2")["status"] == "running"


def test_ready_vm_rows_replace_the_row_whole_so_they_name_every_column(journal):
    """The Ready write deletes the row and inserts it again: a column it left out would be emptied."""
    (delete, _args), (insert, args) = projection.ready_vm_rows(journal, READY_VM)
    assert delete.startswith("DELETE FROM vms WHERE name = ?")
    named = insert[insert.index("(") + 1:insert.index(")")].split(", ")
    assert named == ["name"] + list(VM_COLUMNS) + ["updated_at"] and len(args) == len(named)


def test_ready_vm_rows_make_the_table_of_a_journal_opened_without_it(jpath, clock):
    bare = Journal(jpath, clock=clock)
    try:
        rows = projection.ready_vm_rows(bare, READY_VM)
        _commit_ready_rows(bare, rows)
        assert vm(bare, "gpu-1")["status"] == "running"
    finally:
        bare.close()


def test_upsert_vm_rejects_unknown_columns_and_writes_nothing(journal):
    with pytest.raises(ValueError) as info:
        upsert_vm(journal, "gpu-1", status="up", colour="red", size=3)
    assert "colour" in str(info.value) and "size" in str(info.value)
    assert vms(journal) == []


def test_delete_vm_and_listing_order(journal):
    for name in ("zeta", "alpha", "mid"):
        upsert_vm(journal, name, status="running")
    assert [v["name"] for v in vms(journal)] == ["alpha", "mid", "zeta"]
    assert [v["name"] for v in vms(journal, "mid")] == ["mid"]
    delete_vm(journal, "mid")
    delete_vm(journal, "never-existed")   # idempotent
    assert [v["name"] for v in vms(journal)] == ["alpha", "zeta"]
    assert vm(journal, "mid") is None
    assert vm(journal, "nope") is None


def test_vms_projection_persists_across_connections(jpath, clock):
    a = open_journal(jpath, clock=clock)
    upsert_vm(a, "gpu-1", status="running", detail={"k": [1]})
    b = open_journal(jpath, clock=clock)
    try:
        assert vm(b, "gpu-1")["detail"] == {"k": [1]}
    finally:
        a.close()
        b.close()


def test_upsert_vm_with_a_text_detail_reads_back(journal):
    upsert_vm(journal, "gpu-1", status="leaked", detail="teardown failed: throttled")
    assert vm(journal, "gpu-1")["detail"] == "teardown failed: throttled"


def test_a_new_journal_has_the_vms_table_from_the_start(jpath, clock):
    open_journal(jpath, clock=clock).close()
    j = Journal(jpath, clock=clock)   # a plain opener: the table is already in the file
    try:
        assert j.query("SELECT name FROM sqlite_master WHERE name = 'vms'") == [("vms",)]
    finally:
        j.close()


def test_a_journal_made_by_the_machine_layer_alone_gets_the_table_when_used(jpath, clock):
    plain = Journal(jpath, clock=clock)
    try:
        assert plain.query("SELECT name FROM sqlite_master WHERE name = 'vms'") == []
        assert vms(plain) == []
        upsert_vm(plain, "gpu-1", status="running")
        assert vm(plain, "gpu-1")["status"] == "running"
    finally:
        plain.close()


def test_open_journal_defaults_to_the_environments_journal(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUPROV_JOURNAL", str(tmp_path / "j" / "x.sqlite"))
    j = open_journal()
    try:
        assert j.path == str(tmp_path / "j" / "x.sqlite")
    finally:
        j.close()


def test_the_journal_module_knows_no_vm_columns():
    opening = inspect.getsource(journal_file)
    # The frozen schema-1 fingerprint (a legacy file format, never edited) is the one place allowed.
    start = opening.index("# The exact tables and columns of a schema-1 journal")
    opening = opening[:start] + opening[opening.index("}", opening.index("_SCHEMA_1_COLUMNS = {")) + 1:]
    source = inspect.getsource(journal_module) + opening
    for column in VM_COLUMNS:
        if column in ("status", "detail", "cloud"):   # generic words the journal uses on its own
            continue
        assert not re.search(r"\b%s\b" % column, source), column
    for name in ("upsert_vm", "delete_vm", "VM_COLUMNS", "default_state_dir", "default_journal_path"):
        assert name not in source
    assert "vms" not in source
    assert projection.TABLES[0].lstrip().startswith("CREATE TABLE IF NOT EXISTS vms")
