# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Recording a VM's k3s stages in the journal: the ``stage`` column of the VM's
``vms`` row (its ``status`` stays as the VM machine left it), the stage's facts
under ``detail.k3s``, and a ``stage`` event in the VM's event history, written
under the VM's lease so a run that works on the VM at the same time (a ``down``)
is never overtaken."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import (
    JournalError, LeaseHeld,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.owners import new_owner
from ansible_collections.gpuprov.cloud.plugins.module_utils.state_dir import journal_location
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection

PREFIX = "k3s:"
STAGES = ("CheckingBootInstall", "Installing", "AwaitingApi", "FetchingKubeconfig", "Validating", "Ready", "Failed",
          "Skipped")
STAGE_EVENT = "stage"


class StageError(Exception):
    """The stage cannot be recorded; the message says why."""


def label(stage: str) -> str:
    return stage if stage.startswith(PREFIX) else PREFIX + stage


def record(journal_path: Optional[str], name: str, stage: str, note: str = "",
           detail: Optional[Dict[str, Any]] = None, lease_ttl: float = 60.0,
           password: Optional[str] = None) -> Dict[str, Any]:
    """Write ``stage`` for VM ``name``; returns the VM's projection row after the write. ``password``:
    a PostgreSQL journal's, when neither its DSN nor libpq's environment gives it."""
    if stage.replace(PREFIX, "", 1) not in STAGES:
        raise StageError("stage: expected one of %s, got %r" % (", ".join(STAGES), stage))
    try:
        journal = projection.open_journal(journal_location(journal_path), password=password)
    except JournalError as exc:
        raise StageError(str(exc)) from exc
    try:
        row = journal.load(name)
        vm = projection.vm(journal, name)
        if row is None or vm is None:
            raise StageError("%s is not in the journal %s; provision it first (gpuprov.cloud.vm)" % (name, journal.path))
        owner = new_owner()
        try:
            journal.acquire(name, owner, lease_ttl)
        except LeaseHeld as exc:
            raise StageError("cannot record the k3s stage: %s" % exc) from exc
        try:
            text = label(stage)
            journal.note(name, owner, row.version, text, note, event=STAGE_EVENT)
            merged = dict(vm.get("detail") or {})
            k3s = dict(merged.get("k3s") or {})
            k3s.update(detail or {})
            k3s.update(stage=text.replace(PREFIX, "", 1), note=note, at=time.time())
            merged["k3s"] = k3s
            projection.upsert_vm(journal, name, stage=text, detail=merged)
        finally:
            journal.release(name, owner)
        return projection.vm(journal, name) or {}
    finally:
        journal.close()


def timings(events: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Seconds spent in each stage of the latest run, from the journal's events: the VM
    machine's transitions (from its ``begin``) and the k3s ``stage`` events after it."""
    begin = None
    for index in range(len(events) - 1, -1, -1):
        if events[index]["event"] == "begin":
            begin = index
            break
    run = events[begin:] if begin is not None else events
    marks = [(e["to"], e["at"]) for e in run if e["event"] in ("begin", "transition", STAGE_EVENT) and e["to"]]
    spans = []
    for (name, at), nxt in zip(marks, marks[1:] + [None], strict=True):
        spans.append({"stage": name, "at": at, "seconds": round(nxt[1] - at, 2) if nxt else None})
    out: Dict[str, Any] = {"spans": spans}
    if marks:
        out["total_s"] = round(marks[-1][1] - marks[0][1], 2)
        vm_ready = next((at for name, at in marks if name == "Ready"), None)
        k3s_start = next((at for name, at in marks if name.startswith(PREFIX)), None)
        k3s_end = next((at for name, at in reversed(marks) if name in (PREFIX + "Ready", PREFIX + "Failed")), None)
        if vm_ready is not None:
            out["vm_s"] = round(vm_ready - marks[0][1], 2)
        if k3s_start is not None and k3s_end is not None:
            out["k3s_s"] = round(k3s_end - k3s_start, 2)
    return out
