"""The soak's oracle: what the promise says, checked against the history of operations and snapshots of
what is on the clouds and in the journals (taken after every round, when no operation runs).

The promise, per VM name and journal (README.md, docs/recovery.md):

  (a) at most one live instance (Pending or Running) of a name per journal;
  (b) no instance of a name after a successful ``down`` unless something that can make one (a provision,
      a recreate, an instance task, a planted orphan) ran later or concurrently;
  (c) a provision that reported Ready (rc 0, "NAME is up on ... (ID)") left that instance live and, for the
      latest one, reachable over SSH through its controller's ssh_config, unless a down, a recreate, an
      instance teardown or a killed operation of the name on that journal ran later or concurrently
      (anything of the name that can remove it); a sweep is never such an excuse, nor a recreate whose
      request no cloud can satisfy (it must fail before touching the VM), nor anything on another journal;
  (d) a sweep removed only orphans: never another journal's instance, never an instance that a provision
      (or instance task) of its journal had reported and that nothing else could have released before
      the removal, never while the name's own journal row held it the whole time the delete could have
      happened (the sweep's journal events bound that window);
  (e) a journal row of the name that says teardown Done while an instance of that name and journal
      exists (any status), unless that instance is an orphan no row ever claimed;
  (f) at quiescence, after a provision then a down of every name: the journal agrees with the clouds
      (Ready <-> exactly the journalled instance live; anything else <-> none), every down succeeds and
      leaves nothing, and a final sweep leaves nothing of the soak's journals.

Conservative by construction: where concurrent operations may legally interleave (a down overlapping a
provision may leave either outcome; a killed operation may leave a non-terminal row the next run resumes),
the check excuses it. Orphans the soak planted on purpose (kind "plant") are not the journal's until a
provision adopts them: a row's claim on an instance is read from the journal's own events (the instance
id in a note) and the operations' reports.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from ansible_collections.gpuprov.cloud.tests.soak.history import (
    DOWN, INSTANCE_ABSENT, INSTANCE_PRESENT, PLANT, PROVISION, RECREATE, RECREATE_BAD, SWEEP_DELETE, History, Op,
)

LIVE = ("Pending", "Running")
NOT_OWNING = ("Done", "Aborted", "Exhausted")    # row labels that hold nothing (Aborted: conservative)
TEARDOWN_KINDS = ("teardown", "instance-teardown")
INSTANCE_KEY = "instance:%s:%s"
SWEEP_PREFIX = "sweep:"
DELETION = re.compile(r"deletion requested for (.*)$")
TARGET = re.compile(r"(\S+) \[([^\]]*)\]")
FOREVER = float("inf")

# What can make an instance of a name, and what can remove one (for the excuses above).
CREATORS = (PROVISION, RECREATE, RECREATE_BAD, INSTANCE_PRESENT, PLANT)
REMOVERS = (DOWN, RECREATE, INSTANCE_ABSENT)
REMOVERS_WHEN_KILLED = (PROVISION, RECREATE_BAD, INSTANCE_PRESENT)
MAKERS = (PROVISION, RECREATE, INSTANCE_PRESENT)     # whose success reports an instance


# -- what a snapshot holds -------------------------------------------------------------------------

@dataclasses.dataclass
class Instance:
    cloud: str
    id: str
    vm_name: str
    journal_id: Optional[str]
    status: Optional[str]

    @property
    def live(self) -> bool:
        return self.status in LIVE


@dataclasses.dataclass
class RowFacts:
    key: str
    kind: str
    state_kind: str
    label: str
    terminal: bool
    instance_id: Optional[str] = None


@dataclasses.dataclass
class JournalFacts:
    label: str
    journal_id: str
    rows: Dict[str, RowFacts] = dataclasses.field(default_factory=dict)
    events: Dict[str, List[Dict[str, Any]]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Snapshot:
    at: float
    round: int
    phase: str = "soak"              # soak | settled-up | settled-down | swept
    instances: List[Instance] = dataclasses.field(default_factory=list)
    journals: Dict[str, JournalFacts] = dataclasses.field(default_factory=dict)
    reach: Dict[str, Tuple[bool, str]] = dataclasses.field(default_factory=dict)   # "controller/name"

    def journal_label(self, journal_id: Optional[str]) -> Optional[str]:
        for label, facts in self.journals.items():
            if facts.journal_id and facts.journal_id == journal_id:
                return label
        return None

    def of(self, journal: str, name: str, cloud: Optional[str] = None) -> List[Instance]:
        jid = self.journals[journal].journal_id if journal in self.journals else None
        return [i for i in self.instances if jid and i.journal_id == jid and i.vm_name == name
                and (cloud is None or i.cloud == cloud)]


@dataclasses.dataclass
class Violation:
    check: str            # a..f
    journal: str
    name: Optional[str]
    detail: str
    ops: List[int] = dataclasses.field(default_factory=list)
    round: int = 0
    phase: str = "soak"
    subject: str = ""     # what it is about (an operation, an instance): one report per subject and check

    def key(self) -> Tuple:
        return (self.check, self.journal, self.name, self.subject or self.detail)

    def __str__(self) -> str:
        return "(%s) %s/%s after round %d (%s): %s%s" % (
            self.check, self.journal, self.name or "-", self.round, self.phase, self.detail,
            " [ops %s]" % ", ".join("#%d" % i for i in self.ops) if self.ops else "")


# -- intervals -------------------------------------------------------------------------------------

def _end(op: Op, at: float) -> float:
    """When ``op`` ended, as of ``at`` (still running: never)."""
    return op.end if op.end and op.end <= at else FOREVER


def _seen(ops: Iterable[Op], at: float) -> List[Op]:
    """The operations begun by ``at`` that did something (a plant skipped made nothing)."""
    return [o for o in ops if o.start and o.start <= at and not o.skipped]


def creators(history: History, journal: str, name: str, at: float) -> List[Op]:
    return [o for o in _seen(history.of(journal, name), at) if o.kind in CREATORS]


def removers(history: History, journal: str, name: str, at: float) -> List[Op]:
    """Operations of the name on the journal that may remove an instance of it: a down, a recreate or an
    instance teardown (whatever they reported), and any killed operation that can tear down."""
    return [o for o in _seen(history.of(journal, name), at)
            if o.kind in REMOVERS or (o.killed and o.kind in REMOVERS_WHEN_KILLED)]


def _excusing(ops: List[Op], after: float, before: float, at: float, but: Optional[Op] = None) -> List[Op]:
    """Those of ``ops`` running at some time in (after, before)."""
    return [o for o in ops if o is not but and _end(o, at) > after and o.start < before]


# -- the journal's own events -----------------------------------------------------------------------

def label_at(events: List[Dict[str, Any]], t: float) -> Optional[str]:
    """The row's label at time ``t`` (None: no row yet), replayed from its events."""
    label = None
    for e in events:
        if e["at"] is not None and e["at"] <= t:
            label = e["to"]
    return label


def owning(label: Optional[str]) -> bool:
    return label is not None and label.split(" ", 1)[0] not in NOT_OWNING


def held_throughout(events: List[Dict[str, Any]], t0: float, t1: float) -> Optional[str]:
    """The labels of a row that owned what it names for the whole of [t0, t1] (None: not throughout)."""
    first = label_at(events, t0)
    if not owning(first):
        return None
    labels = [first]
    for e in events:
        if t0 < e["at"] <= t1:
            if not owning(e["to"]):
                return None
            labels.append(e["to"])
    return " -> ".join(dict.fromkeys(labels))


def sweep_deletions(facts: JournalFacts) -> List[Dict[str, Any]]:
    """Every delete a sweep of this journal journalled: {name, cloud, ids, t0, t1, key}. The delete
    happened after the event before (t0) and before the event that says it was requested (t1)."""
    out = []
    for key, events in facts.events.items():
        if not key.startswith(SWEEP_PREFIX):
            continue
        parts = key.split(":")
        foreign = len(parts) == 3
        name = parts[-1]
        previous = None
        for e in events:
            found = DELETION.search(e.get("note") or "")
            if found and previous is not None:
                for where, ids in TARGET.findall(found.group(1)):
                    ids = [i.strip() for i in ids.split(",") if i.strip() and i.strip() != "no instances"]
                    if ids:
                        out.append({"key": key, "name": name, "cloud": where.split("/")[0], "ids": ids,
                                    "t0": previous, "t1": e["at"], "foreign": foreign})
            previous = e["at"]
    return out


def claimed(history: History, snap: Snapshot, journal: str) -> Set[str]:
    """Instance ids this journal ever knew as its own: reported by its operations, or named in an event
    of one of its rows (not the sweep's)."""
    ids = {o.ready_id for o in history.ops if o.journal == journal and o.ready_id}
    ids |= {o.made_id for o in history.ops if o.journal == journal and o.made_id and o.kind != PLANT}
    facts = snap.journals.get(journal)
    if facts is None:
        return ids
    candidates = {i.id for i in snap.instances} | {o.made_id for o in history.ops if o.kind == PLANT and o.made_id}
    notes = [e.get("note") or "" for key, events in facts.events.items() if not key.startswith(SWEEP_PREFIX)
             for e in events]
    for candidate in candidates - ids:
        if any(candidate in note for note in notes):
            ids.add(candidate)
    return ids


def unclaimed_plants(history: History, snap: Snapshot, journal: str) -> Set[str]:
    """Orphans the soak planted for this journal that none of its rows or operations ever took."""
    planted = {o.made_id for o in history.ops if o.journal == journal and o.kind == PLANT and o.made_id}
    return planted - claimed(history, snap, journal)


# -- the checks ---------------------------------------------------------------------------------------

def check_a(history: History, snap: Snapshot) -> List[Violation]:
    out = []
    groups: Dict[Tuple[str, str], List[Instance]] = {}
    for i in snap.instances:
        journal = snap.journal_label(i.journal_id)
        if journal and i.live:
            groups.setdefault((journal, i.vm_name), []).append(i)
    for (journal, name), found in sorted(groups.items()):
        if len(found) > 1:
            out.append(Violation("a", journal, name, "%d live instances: %s" % (
                len(found), ", ".join("%s/%s (%s)" % (i.cloud, i.id, i.status) for i in found)),
                [o.id for o in history.of(journal, name)][-6:], subject=",".join(sorted(i.id for i in found))))
    return out


def check_b(history: History, snap: Snapshot) -> List[Violation]:
    out = []
    for journal in snap.journals:
        skip = unclaimed_plants(history, snap, journal)
        jid = snap.journals[journal].journal_id
        for name in sorted({i.vm_name for i in snap.instances if i.journal_id == jid}):
            present = [i for i in snap.of(journal, name) if i.id not in skip]
            if not present:
                continue
            downs = [o for o in history.of(journal, name) if o.kind == DOWN and o.ok and o.end <= snap.at]
            if not downs:
                continue
            last = max(downs, key=lambda o: o.end)
            later = _excusing(creators(history, journal, name, snap.at), last.start, FOREVER, snap.at)
            if not later:
                out.append(Violation("b", journal, name, "%s succeeded, nothing that can make one ran since, and "
                                     "%s exists" % (last.label(), ", ".join("%s/%s (%s)" % (i.cloud, i.id, i.status)
                                                                            for i in present)), [last.id],
                                     subject="down #%d" % last.id))
    return out


def check_c(history: History, snap: Snapshot) -> List[Violation]:
    out = []
    latest: Dict[Tuple[str, str], Op] = {}
    for op in history.ops:
        if op.kind not in MAKERS or not op.ok or op.end > snap.at:
            continue
        reported = op.ready_id or op.made_id
        if not reported:
            continue
        excuses = _excusing(removers(history, op.journal, op.name, snap.at), op.start, FOREVER, snap.at, but=op)
        if excuses:
            continue
        live = [i for i in snap.of(op.journal, op.name) if i.live]
        if reported not in [i.id for i in live]:
            since = [o for o in history.of(op.journal, op.name) if o is not op and _end(o, snap.at) > op.start]
            suspects = [o for o in history.ops if o.kind == SWEEP_DELETE and o.journal == op.journal
                        and _end(o, snap.at) > op.start]
            others = [o for o in history.ops if o.name == op.name and o.journal != op.journal
                      and o.kind in REMOVERS and _end(o, snap.at) > op.start]
            out.append(Violation("c", op.journal, op.name, "%s reported %s %s and nothing of that name on its "
                                 "journal that could remove it ran since, but it is %s; since: %s%s%s" % (
                                     op.label(), reported, "made" if op.kind == INSTANCE_PRESENT else "Ready",
                                     "replaced by %s" % ", ".join(i.id for i in live) if live else "gone",
                                     ", ".join("%s %s" % (o.label(), o.outcome()) for o in since) or "nothing",
                                     "; sweeps since: %s" % ", ".join(o.label() for o in suspects) if suspects
                                     else "",
                                     "; on another journal: %s" % ", ".join(o.label() for o in others) if others
                                     else ""),
                                 [op.id] + [o.id for o in since + suspects + others], subject="gone %s" % reported))
            continue
        if op.kind in (PROVISION, RECREATE):
            key = (op.journal, op.name)
            if key not in latest or op.end > latest[key].end:
                latest[key] = op
    for (journal, name), op in sorted(latest.items()):
        reached = snap.reach.get("%s/%s" % (op.controller, name))
        if reached is not None and not reached[0]:
            detail = "%s reported %s Ready and it is live, but `ssh -F <%s's state>/ssh_config %s true` fails: %s" % (
                op.label(), op.ready_id, op.controller, name, reached[1])
            out.append(Violation("c", journal, name, detail, [op.id], subject="ssh %s" % op.ready_id))
    return out


def reach_targets(history: History, snap: Snapshot) -> List[Tuple[str, str, str]]:
    """(controller, name, instance id) of each journal's latest Ready provision whose instance should still be
    there and is live: the ones check (c) wants an SSH login to."""
    latest: Dict[Tuple[str, str], Op] = {}
    for op in history.ops:
        if op.kind in (PROVISION, RECREATE) and op.ok and op.ready_id and op.end <= snap.at:
            key = (op.journal, op.name)
            if key not in latest or op.end > latest[key].end:
                latest[key] = op
    out = []
    for (journal, name), op in sorted(latest.items()):
        if _excusing(removers(history, journal, name, snap.at), op.start, FOREVER, snap.at, but=op):
            continue
        if op.ready_id in [i.id for i in snap.of(journal, name) if i.live]:
            out.append((op.controller, name, op.ready_id))
    return out


def _removals(history: History, snap: Snapshot) -> List[Dict[str, Any]]:
    """Every removal a sweep made, from its own report and from its journal's events (tighter window)."""
    out = []
    for op in history.ops:
        for r in op.removed:
            if r.get("kind", "instance") == "instance":
                out.append({"journal": op.journal, "name": r.get("vm_name"), "cloud": r.get("cloud"), "id": r.get("id"),
                            "journal_id": r.get("journal_id"), "t0": op.start, "t1": _end(op, snap.at), "by": op.label(),
                            "op": op.id, "foreign": False})
    for journal, facts in snap.journals.items():
        for d in sweep_deletions(facts):
            for instance_id in d["ids"]:
                by = [o for o in history.ops if o.journal == journal and o.kind == SWEEP_DELETE
                      and o.start <= d["t1"] and _end(o, snap.at) >= d["t0"]]
                out.append({"journal": journal, "name": d["name"], "cloud": d["cloud"], "id": instance_id,
                            "journal_id": None, "t0": d["t0"], "t1": d["t1"], "by": "journal %s" % d["key"],
                            "op": by[0].id if by else None, "foreign": d["foreign"]})
    return out


def check_d(history: History, snap: Snapshot, identities: Dict[str, Optional[str]]) -> List[Violation]:
    """``identities``: instance id -> the journal id it carried, as any snapshot saw it."""
    out = []
    for r in _removals(history, snap):
        journal, name, instance_id = r["journal"], r["name"], r["id"]
        facts = snap.journals.get(journal)
        if facts is None or not name:
            continue
        ops = [r["op"]] if r["op"] else []
        carried = r["journal_id"] or identities.get(instance_id)
        if carried and carried != facts.journal_id and not r["foreign"]:
            out.append(Violation("d", journal, name, "a sweep (%s) removed %s, which carries another journal's id %s"
                                 % (r["by"], instance_id, carried), ops, subject=instance_id))
            continue
        for maker in history.of(journal, name):
            if maker.kind not in MAKERS or not maker.ok or instance_id not in (maker.ready_id, maker.made_id):
                continue
            if maker.start >= r["t1"]:
                continue
            excuses = _excusing(removers(history, journal, name, snap.at), maker.start, r["t1"], snap.at, but=maker)
            if not excuses:
                out.append(Violation("d", journal, name, "a sweep (%s, by t=%.2fs) removed %s, which %s had reported "
                                     "at t=%.2fs, and nothing of the name could have released it" % (
                                         r["by"], r["t1"] - history.started, instance_id, maker.label(),
                                         maker.end - history.started), ops + [maker.id], subject=instance_id))
                break
        else:
            if r["t1"] == FOREVER:
                continue
            for key in (name, INSTANCE_KEY % (r["cloud"], name)):
                held = held_throughout(facts.events.get(key) or [], r["t0"], r["t1"])
                if held:
                    out.append(Violation("d", journal, name, "a sweep (%s) deleted %s while row %s held the name for "
                                         "the whole window the delete happened in (%s)" % (r["by"], instance_id, key, held),
                                         ops, subject=instance_id))
                    break
    return out


def check_e(history: History, snap: Snapshot) -> List[Violation]:
    out = []
    for journal, facts in snap.journals.items():
        skip = unclaimed_plants(history, snap, journal)
        for key, row in sorted(facts.rows.items()):
            if key.startswith(SWEEP_PREFIX) or row.kind not in TEARDOWN_KINDS or row.state_kind != "Done":
                continue
            parts = key.split(":")
            name, cloud = (parts[2], parts[1]) if key.startswith("instance:") else (key, None)
            present = [i for i in snap.of(journal, name, cloud) if i.id not in skip]
            in_flight = [o for o in creators(history, journal, name, snap.at) if _end(o, snap.at) == FOREVER]
            if present and not in_flight:
                out.append(Violation("e", journal, name, "row %s says teardown Done while %s exists" % (
                    key, ", ".join("%s/%s (%s)" % (i.cloud, i.id, i.status) for i in present)),
                    [o.id for o in history.of(journal, name)][-4:],
                    subject="%s %s" % (key, ",".join(sorted(i.id for i in present)))))
    return out


def check_round(history: History, snap: Snapshot, identities: Dict[str, Optional[str]]) -> List[Violation]:
    found = check_a(history, snap) + check_b(history, snap) + check_c(history, snap) + \
        check_d(history, snap, identities) + check_e(history, snap)
    for v in found:
        v.round, v.phase = snap.round, snap.phase
    return found


# -- at quiescence -----------------------------------------------------------------------------------

def check_settled_up(history: History, snap: Snapshot, names: List[str]) -> List[Violation]:
    """(f) after a provision of every name: Ready <-> exactly the journalled instance live; else none."""
    out = []
    for journal, facts in snap.journals.items():
        skip = unclaimed_plants(history, snap, journal)
        for name in names:
            row = facts.rows.get(name)
            live = [i for i in snap.of(journal, name) if i.live and i.id not in skip]
            if row is not None and row.kind == "launch" and row.state_kind == "Ready":
                if [i.id for i in live] != [row.instance_id]:
                    out.append(Violation("f", journal, name, "journal says Ready (%s) but live: %s" % (
                        row.instance_id, ", ".join(i.id for i in live) or "nothing")))
            elif live:
                out.append(Violation("f", journal, name, "journal says %s but %s is live" % (
                    "%s %s" % (row.kind, row.label) if row else "nothing", ", ".join(i.id for i in live))))
    for v in out:
        v.round, v.phase = snap.round, snap.phase
    return out


def check_settled_down(history: History, snap: Snapshot, downs: List[Op], names: List[str],
                       instance_names: List[str]) -> List[Violation]:
    """(f) after a down (instance absent) of every name: each succeeded, each row says Done (or there is none,
    or it is a launch that ended Aborted or Exhausted: down had nothing to tear down) and nothing of the name
    and journal is left, orphans the soak planted excepted."""
    out = []
    for op in downs:
        if not op.ok:
            out.append(Violation("f", op.journal, op.name, "%s at quiescence failed: %s" % (
                op.label(), op.outcome() + (": " + op.lines[-1] if op.lines else "")), [op.id]))
    for journal, facts in snap.journals.items():
        skip = unclaimed_plants(history, snap, journal)
        for name in names + instance_names:
            keys = [name] if name in names else [k for k in facts.rows if k.startswith("instance:") and
                                                 k.endswith(":" + name)]
            for key in keys:
                row = facts.rows.get(key)
                # A down with nothing to tear down leaves a launch that ended owning nothing as it was.
                if row is not None and not (row.kind in TEARDOWN_KINDS and row.state_kind == "Done") and \
                        not (row.kind == "launch" and row.state_kind in ("Aborted", "Exhausted")):
                    out.append(Violation("f", journal, name, "after a down at quiescence row %s says %s %s" % (
                        key, row.kind, row.label)))
            left = [i for i in snap.of(journal, name) if i.id not in skip]
            if left:
                out.append(Violation("f", journal, name, "after a down at quiescence %s is left" % ", ".join(
                    "%s/%s (%s)" % (i.cloud, i.id, i.status) for i in left)))
    for v in out:
        v.round, v.phase = snap.round, snap.phase
    return out


def check_swept(snap: Snapshot) -> List[Violation]:
    """(f) after every name was taken down and a sweep removed the orphans: nothing of the journals is left."""
    out = []
    for journal, facts in snap.journals.items():
        left = [i for i in snap.instances if i.journal_id == facts.journal_id]
        if left:
            out.append(Violation("f", journal, None, "after the downs and a final sweep, left: %s" % ", ".join(
                "%s/%s of %s (%s)" % (i.cloud, i.id, i.vm_name, i.status) for i in left)))
    for v in out:
        v.round, v.phase = snap.round, snap.phase
    return out
