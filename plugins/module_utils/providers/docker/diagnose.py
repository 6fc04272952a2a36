# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``diagnose`` for the docker cloud: what observe reports, and for each container the
engine's own view: its state (status, exit code, OOMKilled, engine error, started
and finished at), its health check, and the last lines of its log.

Read-only: the label listing of observe, then one inspect and one log read per
container found."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Location, Status
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker import (
    DockerProvider, docker_errors,
)

LOG_LINES = 5
_NEVER = "0001-01-01T00:00:00Z"   # what the engine reports for a time that never happened


def _when(value: Any) -> Any:
    return None if not value or value == _NEVER else value


def _log_tail(api, instance_id: str) -> List[str]:
    raw = api.logs(instance_id, stdout=True, stderr=True, tail=LOG_LINES, timestamps=False)
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")
    return [line.rstrip() for line in text.splitlines() if line.strip()][-LOG_LINES:]


def diagnose(provider: DockerProvider, location: Location, vm_name: str) -> Dict[str, Any]:
    found = provider.observe(location, vm_name)
    instances: List[Dict[str, Any]] = []
    findings: List[str] = []
    api = provider._client("diagnose").api if found else None
    for item in found:
        short = item.instance_id[:12]
        entry = item.to_dict()
        instances.append(entry)
        try:
            info = api.inspect_container(item.instance_id)
            logs = _log_tail(api, item.instance_id)
        except Exception as exc:
            if isinstance(exc, docker_errors.NotFound):
                findings.append("%s: removed while being diagnosed" % short)
                continue
            raise provider._classify(exc, "diagnose", "container %s" % short) from exc
        state = info.get("State") or {}
        health = state.get("Health") or {}
        health_log = health.get("Log") or []
        vendor = {
            "name": (info.get("Name") or "").lstrip("/"), "image": (info.get("Config") or {}).get("Image"),
            "status": state.get("Status"), "exit_code": state.get("ExitCode"),
            "oom_killed": bool(state.get("OOMKilled")), "error": state.get("Error") or None,
            "started_at": _when(state.get("StartedAt")), "finished_at": _when(state.get("FinishedAt")),
            "restart_count": info.get("RestartCount"), "health": health.get("Status"),
            "log_tail": logs,
        }
        entry["vendor"] = vendor
        if item.status != Status.RUNNING:
            findings.append("%s: %s" % (short, item.reason or item.status))
        if vendor["oom_killed"]:
            findings.append("%s: killed by the kernel's OOM killer (raise the engine's memory or the VM's limit)"
                            % short)
        if vendor["error"]:
            findings.append("%s: engine error: %s" % (short, vendor["error"]))
        if vendor["health"] == "unhealthy":
            last = (health_log[-1].get("Output") or "").strip() if health_log else ""
            findings.append("%s: health check unhealthy%s" % (short, ": " + last if last else ""))
        if item.status == Status.RUNNING and item.endpoint is None:
            findings.append("%s: running, but port 22 is not published (no SSH endpoint)" % short)
        if item.status != Status.RUNNING and logs:
            findings.append("%s: last log lines: %s" % (short, " | ".join(logs)))
    return {"instances": instances, "findings": findings}
