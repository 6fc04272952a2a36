"""The soak's history: every operation it ran (what, on which name, from which controller, when, how it
ended, which signal it got and where) and what the world looked like after each round. The oracle
(oracle.py) reasons over it; a failure prints it with the seed that made it."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Optional

# Operation kinds. Each runs the real ansible-playbook, except "plant" (an orphan made through the
# provider's Python API, as a create whose journal was lost would leave one).
PROVISION = "provision"            # gpuprov.cloud.provision -e vm=NAME
RECREATE = "recreate"              # ... -e recreate=true
RECREATE_BAD = "recreate_bad"      # ... -e recreate=true -e gpu=H100: a request no cloud here can satisfy
DOWN = "down"                      # gpuprov.cloud.down -e vm=NAME
SWEEP_DRY = "sweep_dry"            # gpuprov.cloud.sweep
SWEEP_DELETE = "sweep_delete"      # gpuprov.cloud.sweep -e delete=true
STATUS = "status"                  # gpuprov.cloud.status (sometimes -e orphans=true)
HEALTH = "health"                  # gpuprov.cloud.health -e fail_on_disagreement=false
INSTANCE_PRESENT = "instance_present"  # gpuprov.cloud.instance state=present (a playbook of one task)
INSTANCE_ABSENT = "instance_absent"    # gpuprov.cloud.instance state=absent
PLANT = "plant"                    # an orphan: an instance carrying the name and the journal's id, no row

KINDS = (PROVISION, RECREATE, RECREATE_BAD, DOWN, SWEEP_DRY, SWEEP_DELETE, STATUS, HEALTH, INSTANCE_PRESENT,
         INSTANCE_ABSENT, PLANT)
VM_KINDS = (PROVISION, RECREATE, RECREATE_BAD, DOWN)
INSTANCE_KINDS = (INSTANCE_PRESENT, INSTANCE_ABSENT)
NAMELESS_KINDS = (SWEEP_DRY, SWEEP_DELETE, STATUS, HEALTH)


@dataclasses.dataclass
class Op:
    """One operation and how it ended. Times are the controller's clock (time.time()), the clock the
    journals stamp their events with (SQLite: this host's; PostgreSQL: the server's, on this host)."""

    id: int
    round: int
    kind: str
    controller: str                    # c1, c2 (the shared journal), c3 (its own)
    journal: str                       # the journal's label: "shared" or "own"
    name: Optional[str] = None         # the VM name (None: sweep, status, health of every name)
    cloud: Optional[str] = None        # the cloud asked for (provision, instance, plant)
    phase: str = "soak"                # soak | settle
    offset_s: float = 0.0              # when, after the round began, it was started
    nemesis: Dict[str, Any] = dataclasses.field(default_factory=dict)   # what was planned against it
    start: float = 0.0
    end: float = 0.0
    rc: Optional[int] = None
    signal: Optional[str] = None       # KILL | INT: what it actually got (None: ran to its end)
    signal_at: Optional[str] = None    # the crash point, or "t+1.23s"
    timed_out: bool = False            # killed by the soak after its time limit (a hang)
    skipped: str = ""                  # a plant whose precondition did not hold: why
    ready_id: Optional[str] = None     # provision: the instance it reported Ready ("NAME is up on ... (ID)")
    made_id: Optional[str] = None      # instance present / plant: the instance it made or kept
    removed: List[Dict[str, Any]] = dataclasses.field(default_factory=list)  # sweep: its `removed` entries
    lines: List[str] = dataclasses.field(default_factory=list)   # key output lines
    log: str = ""                      # where the whole output is

    @property
    def killed(self) -> bool:
        return self.signal is not None or self.timed_out

    @property
    def ok(self) -> bool:
        """It ran to its end and reported success."""
        return not self.killed and not self.skipped and self.rc == 0

    def overlaps(self, start: float, end: float) -> bool:
        return self.start < end and self.end > start

    def label(self) -> str:
        what = self.kind + ("(%s)" % self.name if self.name else "")
        return "#%d %s@%s" % (self.id, what, self.controller)

    def outcome(self) -> str:
        if self.skipped:
            return "skipped: %s" % self.skipped
        text = "rc %s" % self.rc
        if self.signal:
            text += " %s at %s" % (self.signal, self.signal_at)
        if self.timed_out:
            text += " (timed out)"
        if self.ready_id:
            text += " ready %s" % self.ready_id
        if self.made_id:
            text += " made %s" % self.made_id
        if self.removed:
            text += " removed %s" % ",".join("%s(%s)" % (r.get("id"), r.get("vm_name")) for r in self.removed)
        return text

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Op":
        return cls(**data)


@dataclasses.dataclass
class History:
    seed: str
    started: float = 0.0
    ops: List[Op] = dataclasses.field(default_factory=list)
    notes: List[str] = dataclasses.field(default_factory=list)

    def new_op(self, **kwargs) -> Op:
        op = Op(id=len(self.ops) + 1, **kwargs)
        self.ops.append(op)
        return op

    def of(self, journal: str, name: str) -> List[Op]:
        return [o for o in self.ops if o.journal == journal and o.name == name]

    def render(self, ops: Optional[List[Op]] = None) -> str:
        """The history as a table: times relative to the soak's start."""
        rows = ["seed %s: %d operation(s)" % (self.seed, len(self.ops))]
        base = self.started
        for op in (self.ops if ops is None else ops):
            nemesis = ""
            if op.nemesis:
                nemesis = " [%s]" % ", ".join("%s=%s" % (k, v) for k, v in sorted(op.nemesis.items()))
            rows.append("  r%-3d %-28s %-6s %-7s %8.2f-%8.2f  %s%s" % (
                op.round, op.label(), op.journal, op.cloud or "-", op.start - base, op.end - base, op.outcome(),
                nemesis))
        return "\n".join(rows)

    def to_json(self) -> str:
        return json.dumps({"seed": self.seed, "started": self.started, "notes": self.notes,
                           "ops": [o.to_dict() for o in self.ops]}, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "History":
        data = json.loads(text)
        return cls(seed=data["seed"], started=data["started"], notes=data.get("notes") or [],
                   ops=[Op.from_dict(o) for o in data["ops"]])
