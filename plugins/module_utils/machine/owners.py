# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lease owners: who holds a journal key, and whether that very process still runs.

An owner is ``host:pid:starttime:uuid8`` (``host:pid:starttime:role-uuid8`` for a run that
says what it is, such as the orphan sweep). A holder on this host counts as alive only
while that pid runs, is no zombie, and started at the recorded time (a reused pid is
another process); holders on other hosts are trusted until their lease expires."""

from __future__ import annotations

import os
import socket
import uuid
from typing import Optional, Tuple


def _proc_stat(pid: int) -> Optional[Tuple[str, str]]:
    """(state, start time) of ``pid`` from /proc/<pid>/stat (fields 3 and 22), None when no
    such process exists. The command name may hold spaces and ')', so fields are counted
    from the last ')'."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            data = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = data[data.rindex(b")") + 1:].split()
    return fields[0].decode("ascii", "replace"), fields[19].decode("ascii", "replace")


def _has_procfs() -> bool:
    return os.path.exists("/proc/self/stat")


# What a holder is, by the role its owner carries (an owner without one is a run of a VM name).
ROLES = {"sweep": "an orphan sweep removing what this journal holds no row for"}


def new_owner(role: str = "") -> str:
    """``host:pid:starttime:uuid8`` (``...:role-uuid8`` with ``role``, one of ROLES); the start
    time tells this process from a later one that reuses its pid ("-" where there is no /proc)."""
    if role and role not in ROLES:
        raise ValueError("owner role %r: expected one of %s" % (role, ", ".join(sorted(ROLES))))
    pid = os.getpid()
    started = "-"
    if _has_procfs():
        found = _proc_stat(pid)
        if found is not None:
            started = found[1]
    tag = uuid.uuid4().hex[:8]
    return "%s:%d:%s:%s" % (socket.gethostname(), pid, started, "%s-%s" % (role, tag) if role else tag)


def owner_role(owner: str) -> str:
    """The role ``owner`` carries ("" for a plain run, or an owner in no known format)."""
    last = owner.rsplit(":", 1)[-1]
    role = last.split("-", 1)[0] if "-" in last else ""
    return role if role in ROLES else ""


def lease_held_message(key: str, holder: str, seconds_left: float) -> str:
    """Why ``key`` cannot be taken now: who holds it, for how long, and what to do."""
    role = owner_role(holder)
    if role:
        return ("%s is held by %s (%s) for up to %.0f s more; nothing was done. Run again once it has finished "
                "(it renews the lease while it works)" % (key, ROLES[role], holder, seconds_left))
    return ("%s is being worked on by another run (%s) for up to %.0f s more; wait for it, or if that run is "
            "dead, retry after the lease expires" % (key, holder, seconds_left))


def owner_alive(owner: str) -> bool:
    """False only when ``owner`` is provably dead: on this host, its pid is gone, is a zombie
    (a killed run nobody reaped yet), or now belongs to a process started at another time.
    Owners on other hosts, and owners in no known format, are trusted until their lease
    expires. Accepts ``host:pid:starttime:uuid8`` and the older ``host:pid:uuid8``."""
    parts = owner.split(":")
    if len(parts) not in (3, 4):
        return True
    host, pid_text = parts[0], parts[1]
    started = parts[2] if len(parts) == 4 else None
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    pid = int(pid_text)
    if not _has_procfs():
        return _pid_exists(pid)
    try:
        found = _proc_stat(pid)
    except (OSError, ValueError, IndexError):
        return True   # /proc cannot tell us: trust the lease until it expires
    if found is None:
        return False
    state, current_start = found
    if state in ("Z", "X", "x"):
        return False
    if started is not None and started.isdigit() and started != current_start:
        return False
    return True


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
