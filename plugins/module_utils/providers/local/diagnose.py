# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``diagnose`` for the local cloud: what observe reports, and for each instance the
state of its sshd processes (from /proc), whether its port is listening (from
/proc/net/tcp), the markers of its folder and the last lines of its log.

Read-only: one scan of /proc and of the listening sockets, no connection attempt."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Set

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Location, Status
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import (
    DELETED, SPAWNED, LocalProvider, _sshd_processes,
)

# /proc/<pid>/stat state letters, in words.
_PROCESS_STATES = {"R": "running", "S": "sleeping", "D": "waiting on I/O", "T": "stopped (SIGSTOP)",
                   "t": "stopped by a tracer", "Z": "zombie", "X": "dead", "I": "idle"}
_TCP_LISTEN = "0A"


def process_state(pid: int) -> Optional[str]:
    """The state letter of ``pid`` (R, S, T, ...), None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def listening_ports() -> Set[int]:
    """Every local TCP port in LISTEN state (IPv4 and IPv6), from /proc/net."""
    ports: Set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                lines = handle.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == _TCP_LISTEN:
                try:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
                except (IndexError, ValueError):
                    continue
    return ports


def diagnose(provider: LocalProvider, location: Location, vm_name: str) -> Dict[str, Any]:
    found = provider.observe(location, vm_name)
    scan = _sshd_processes()
    listening = listening_ports()
    instances: List[Dict[str, Any]] = []
    findings: List[str] = []
    for item in found:
        folder = provider._folder(vm_name, item.instance_id)
        record = provider._record(folder) or {}
        port = record.get("port")
        pids = provider._processes(folder, scan)
        states = {pid: process_state(pid) for pid in pids}
        vendor = {
            "folder": folder, "port": port, "pids": pids,
            "process_states": {str(pid): _PROCESS_STATES.get(state or "", state or "gone")
                               for pid, state in states.items()},
            "listening": bool(port) and int(port) in listening,
            "spawned": os.path.exists(os.path.join(folder, SPAWNED)),
            "deleted": os.path.exists(os.path.join(folder, DELETED)),
            "created_at": record.get("created_at"),
            "log_tail": provider._log_tail(folder),
        }
        entry = item.to_dict()
        entry["vendor"] = vendor
        instances.append(entry)
        label = item.instance_id
        if item.status == Status.RUNNING:
            stopped = [pid for pid, state in states.items() if state in ("T", "t")]
            if stopped:
                findings.append("%s: sshd %s stopped (SIGSTOP): it accepts no login until continued"
                                % (label, ", ".join(str(p) for p in stopped)))
            if not vendor["listening"]:
                findings.append("%s: sshd runs (pid %s) but nothing listens on 127.0.0.1:%s; log: %s"
                                % (label, ", ".join(str(p) for p in pids), port, vendor["log_tail"]))
        elif item.status == Status.TERMINATING:
            findings.append("%s: deleted, but sshd %s still runs" % (label, ", ".join(str(p) for p in pids)))
        else:
            findings.append("%s: %s" % (label, item.reason or item.status))
    return {"instances": instances, "findings": findings}
