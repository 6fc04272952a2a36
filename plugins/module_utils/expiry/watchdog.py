# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VM's own dead man's switch (issue 27): a POSIX sh watchdog that powers the VM off at its deadline plus a
grace, or after ``idle_stop`` with no SSH session, no GPU process and no pod requesting nvidia.com/gpu, with no
controller alive and no cloud credentials on the VM.

``WATCHDOG_SCRIPT``                    the watchdog (installed as ``/usr/local/sbin/gpuprov-watchdog``)
``watchdog_boot_part(limits, ...)``    the shell a boot script runs to install it: a systemd timer where systemd
                                       is PID 1, else a background loop (setsid/nohup) under the boot script
``deadline_update_command(limits)``    what the controller runs over SSH to move the limits (atomic rewrite of
                                       ``/etc/gpuprov/limits``, 0644 root)

The limits file, ``key=value`` lines (an empty or missing value is "none")::

    deadline=<epoch s>    the expiry (ttl / expires_at)
    up_since=<epoch s>    when the VM came up: with budget_s, the spend cap ends at up_since + budget_s
    budget_s=<s>          the seconds of uptime max_spend buys at the journalled price
    idle_stop=<s>         power off after this long idle
    grace=<s>             the deadlines are enforced at deadline + grace (default 300)
    interval=<s>          seconds between two checks of the loop (default 60; the timer's period is set at install)

The watchdog writes ``<state dir>/stopped`` (``reason=deadline|max_spend|idle``, ``at=<epoch s>``,
``detail=...``) before it powers off, so the next command can read why, and logs every check to
``/var/log/gpuprov-watchdog.log``.
"""

from __future__ import annotations

import shlex
from typing import List, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.limits import (
    DEFAULT_GRACE_S, MAX_CHECK_INTERVAL_S, Limits, spend_budget_s,
)

STATE_DIR = "/etc/gpuprov"
INSTALLED_AT = "/usr/local/sbin/gpuprov-watchdog"
LOG_FILE = "/var/log/gpuprov-watchdog.log"
UNIT = "gpuprov-watchdog"
DEFAULT_INTERVAL_S = MAX_CHECK_INTERVAL_S
# The heredoc delimiter that carries the script into the boot script; the script never holds it on a line.
_HEREDOC_END = "GPUPROV_WATCHDOG_EOF"

WATCHDOG_SCRIPT = r"""#!/bin/sh
# gpuprov-watchdog: this VM's own dead man's switch (gpuprov.cloud, docs/limits.md).
# Powers the machine off at its deadline plus a grace, or after idle_stop seconds with no SSH
# session, no GPU process and no pod requesting nvidia.com/gpu. It needs no cloud credentials:
# the controller moves the limits by rewriting the limits file over SSH.
#
# usage: gpuprov-watchdog [--once] [--state-dir DIR] [--run-dir DIR] [--log FILE]
#   --once        one check, then exit (what the systemd timer runs; an operator can too)
#   --state-dir   the limits file is read and the stop reason written here (/etc/gpuprov)
#   --run-dir     runtime state, emptied at boot: the idle clock, the loop's pid (/run/gpuprov)
#   --log         the log of every check (/var/log/gpuprov-watchdog.log)
#
# limits (key=value lines in <state dir>/limits; an empty value is "none"):
#   deadline=<epoch s> up_since=<epoch s> budget_s=<s> idle_stop=<s> grace=<s> interval=<s>
set -u
# Where the boot runner's PATH is short; tools found earlier on PATH still come first.
PATH="${PATH:-}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export PATH

state_dir=/etc/gpuprov
run_dir=/run/gpuprov
log=/var/log/gpuprov-watchdog.log
once=false
while [ "$#" -gt 0 ]; do
    case "$1" in
        --once) once=true ;;
        --state-dir) state_dir=${2:?--state-dir needs a folder}; shift ;;
        --run-dir) run_dir=${2:?--run-dir needs a folder}; shift ;;
        --log) log=${2:?--log needs a file}; shift ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "gpuprov-watchdog: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
limits_file=$state_dir/limits
idle_file=$run_dir/idle-since
pid_file=$run_dir/watchdog.pid
now=$(date +%s)

note() {
    # one line per check; past 1 MiB the log keeps its last 1000 lines
    printf '%s now=%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$now" "$*" >>"$log" 2>/dev/null || return 0
    size=$(wc -c <"$log" 2>/dev/null | tr -d ' ')
    if [ "${size:-0}" -gt 1048576 ]; then
        tail -n 1000 "$log" >"$log.tmp" 2>/dev/null && mv -f "$log.tmp" "$log"
    fi
    return 0
}

value() {
    # the last "$1=" line's value when it is a whole number, else empty
    found=$(sed -n "s/^$1=//p" "$limits_file" 2>/dev/null | tail -n 1 | tr -d ' \t\r')
    case "$found" in
        '' | *[!0-9]*) found='' ;;
    esac
    printf '%s' "$found"
}

bounded() {
    # a probe that hangs (a wedged GPU driver) must not stop the checks
    if command -v timeout >/dev/null 2>&1; then
        timeout 30 "$@"
    else
        "$@"
    fi
}

count_ssh() {
    # established TCP connections to local port 22
    if command -v ss >/dev/null 2>&1 && out=$(ss -tn state established '( sport = :22 )' 2>/dev/null); then
        ssh_n=$(printf '%s\n' "$out" | awk 'NR > 1 && NF > 0' | wc -l | tr -d ' ')
        ssh_via=ss
        return 0
    fi
    # no ss: the kernel's tables, state 01 (ESTABLISHED) with local port 0016 (22)
    tables=''
    for table in /proc/net/tcp /proc/net/tcp6; do
        if [ -r "$table" ]; then tables="$tables $table"; fi
    done
    ssh_via=/proc/net/tcp
    if [ -z "$tables" ]; then
        ssh_n=0
        ssh_via=none
        return 0
    fi
    # shellcheck disable=SC2086 # the list of tables is split on purpose
    ssh_n=$(awk 'FNR > 1 && $4 == "01" && $2 ~ /:0016$/' $tables | wc -l | tr -d ' ')
}

count_gpu() {
    # GPU compute processes; "-": no nvidia-smi here, "?": it failed (counted as none)
    gpu_n=-
    command -v nvidia-smi >/dev/null 2>&1 || return 0
    if out=$(bounded nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); then
        gpu_n=$(printf '%s\n' "$out" | grep -c '[0-9]')
    else
        gpu_n='?'
    fi
}

count_pods() {
    # pods not yet finished that request (or limit) nvidia.com/gpu; "-": no k3s, "?": kubectl failed
    pods_n=-
    command -v k3s >/dev/null 2>&1 || return 0
    # per pod: its phase, then each container's GPU request/limit
    template='{range .items[*]}{.status.phase}{" "}{range .spec.containers[*]}'
    template=$template'{.resources.requests.nvidia\.com/gpu}{"/"}{.resources.limits.nvidia\.com/gpu}{" "}'
    template=$template'{end}{"\n"}{end}'
    if out=$(bounded k3s kubectl get pods -A -o "jsonpath=$template" 2>/dev/null); then
        pods_n=$(printf '%s\n' "$out" | awk '($1 == "Pending" || $1 == "Running") && /[1-9]/' | wc -l | tr -d ' ')
    else
        pods_n='?'
    fi
}

in_use() {
    # a count above 0 ("-" and "?" are not counts)
    case "$1" in
        '' | *[!0-9]*) return 1 ;;
    esac
    [ "$1" -gt 0 ]
}

write_stopped() {
    tmp=$state_dir/.stopped.$$
    if printf 'reason=%s\nat=%s\ndetail=%s\n' "$1" "$now" "$2" >"$tmp" 2>/dev/null; then
        mv -f "$tmp" "$state_dir/stopped"
    fi
}

power_off() {
    # $1: why (deadline, max_spend, idle); $2: the detail. The reason is written first: the controller reads it.
    write_stopped "$1" "$2"
    note "stop: $1: $2"
    if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && command -v systemctl >/dev/null 2>&1; then
        if systemctl poweroff; then return 0; fi
        note "systemctl poweroff failed; trying poweroff -f"
    fi
    if command -v poweroff >/dev/null 2>&1; then
        if poweroff -f; then return 0; fi
        note "poweroff -f failed; signalling PID 1"
    fi
    # a container's PID 1 (docker-init, sshd) ends on TERM, and the container with it
    kill -TERM 1
}

check() {
    # one check; returns 1 once it powered the machine off
    now=$(date +%s)
    if [ ! -r "$limits_file" ]; then
        note "kept: no limits file $limits_file"
        return 0
    fi
    deadline=$(value deadline)
    up_since=$(value up_since)
    budget=$(value budget_s)
    idle_stop=$(value idle_stop)
    grace=$(value grace)
    grace=${grace:-300}
    # the earlier of the expiry and the end of the spend budget binds (the expiry on a tie)
    due=$deadline
    cause=deadline
    if [ -n "$up_since" ] && [ -n "$budget" ]; then
        spend_due=$((up_since + budget))
        if [ -z "$due" ] || [ "$spend_due" -lt "$due" ]; then
            due=$spend_due
            cause=max_spend
        fi
    fi
    if [ -n "$due" ] && [ "$now" -gt $((due + grace)) ]; then
        power_off "$cause" "now $now is past $due + grace $grace"
        return 1
    fi
    standing="no deadline"
    if [ -n "$due" ]; then standing="$cause at $due + grace $grace"; fi
    if [ -z "$idle_stop" ]; then
        rm -f "$idle_file"
        note "kept: $standing; no idle_stop"
        return 0
    fi
    count_ssh
    count_gpu
    count_pods
    probe="ssh $ssh_n ($ssh_via), gpu processes $gpu_n, gpu pods $pods_n"
    if in_use "$ssh_n" || in_use "$gpu_n" || in_use "$pods_n"; then
        rm -f "$idle_file"
        note "kept: $standing; busy: $probe"
        return 0
    fi
    since=$(cat "$idle_file" 2>/dev/null)
    case "$since" in
        '' | *[!0-9]*)
            since=$now
            mkdir -p "$run_dir" && printf '%s\n' "$now" >"$idle_file"
            ;;
    esac
    idle_for=$((now - since))
    if [ "$idle_for" -ge "$idle_stop" ]; then
        power_off idle "idle for ${idle_for}s (idle_stop ${idle_stop}s): $probe"
        return 1
    fi
    note "kept: $standing; idle for ${idle_for}s of ${idle_stop}s: $probe"
    return 0
}

if [ "$once" = true ]; then
    check
    exit 0
fi
# the loop: one per machine
mkdir -p "$run_dir"
other=$(cat "$pid_file" 2>/dev/null)
if [ -n "$other" ] && [ "$other" != "$$" ] && kill -0 "$other" 2>/dev/null; then
    echo "gpuprov-watchdog: already running as pid $other" >&2
    exit 0
fi
echo "$$" >"$pid_file"
while check; do
    interval=$(value interval)
    if [ -z "$interval" ] || [ "$interval" -lt 1 ]; then interval=60; fi
    sleep "$interval"
done
"""


def _limits_lines(limits: Limits, price_per_hour: Optional[float], up_since: Optional[str]) -> List[str]:
    """The limits file's deadline/budget/idle lines; ``up_since`` is a shell word (a number or $(date +%s))."""
    budget = spend_budget_s(limits, price_per_hour)
    lines = [
        "deadline=%s" % ("" if limits.expires_at is None else int(limits.expires_at)),
        "budget_s=%s" % ("" if budget is None else budget),
        "idle_stop=%s" % ("" if limits.idle_stop_s is None else int(limits.idle_stop_s)),
    ]
    if up_since is not None:
        lines.append("up_since=%s" % up_since)
    return lines


def watchdog_boot_part(limits: Limits, grace_s: int = DEFAULT_GRACE_S, price_per_hour: Optional[float] = None,
                       interval_s: int = DEFAULT_INTERVAL_S) -> str:
    """The part of a boot script (run as root) that installs the watchdog with ``limits``: the script, the limits
    file (unless one is there already: the controller moved the limits before a re-run of the boot script), and a
    systemd timer every ``interval_s`` where systemd is PID 1, else the loop in the background (setsid, nohup).
    ``up_since`` is the boot script's clock until the controller writes the journalled one. A failed install is
    said on stderr and does not fail the boot script (the k3s install after it still runs)."""
    return "\n".join([
        "# --- gpuprov watchdog: the VM's own dead man's switch (docs/limits.md) ---",
        _install_function(limits, grace_s, price_per_hour, interval_s),
        "if gpuprov_watchdog_install; then",
        '    echo "gpuprov watchdog: installed"',
        "else",
        '    echo "gpuprov watchdog: the install failed; this VM will not stop itself at its deadline" >&2',
        "fi",
        "",
    ])


def _install_function(limits: Limits, grace_s: int, price_per_hour: Optional[float], interval_s: int) -> str:
    """The shell function ``gpuprov_watchdog_install`` (status 0 once installed and started)."""
    if any(line == _HEREDOC_END for line in WATCHDOG_SCRIPT.splitlines()):
        raise RuntimeError("the watchdog script holds its own heredoc delimiter %s on a line" % _HEREDOC_END)
    grace_s, interval_s = int(grace_s), max(1, int(interval_s))
    lines = _limits_lines(limits, price_per_hour, "$(date +%s)") + ["grace=%d" % grace_s, "interval=%d" % interval_s]
    limits_words = " ".join('"%s"' % line for line in lines)
    return "\n".join([
        "gpuprov_watchdog_install() {",
        "    mkdir -p /usr/local/sbin %s || return 1" % STATE_DIR,
        "    cat >%s.new <<'%s' || return 1" % (INSTALLED_AT, _HEREDOC_END),
        WATCHDOG_SCRIPT.rstrip("\n"),
        _HEREDOC_END,
        "    chmod 0755 %s.new && mv -f %s.new %s || return 1" % (INSTALLED_AT, INSTALLED_AT, INSTALLED_AT),
        "    if [ ! -e %s/limits ]; then" % STATE_DIR,
        "        printf '%%s\\n' %s >%s/.limits.new || return 1" % (limits_words, STATE_DIR),
        "        chmod 0644 %s/.limits.new && mv -f %s/.limits.new %s/limits || return 1" % (STATE_DIR, STATE_DIR, STATE_DIR),
        "    fi",
        '    if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ]; then',
        "        cat >/etc/systemd/system/%s.service <<'%s' || return 1" % (UNIT, _HEREDOC_END),
        "[Unit]",
        "Description=gpuprov watchdog: one check of this VM's deadline and idleness",
        "[Service]",
        "Type=oneshot",
        "ExecStart=%s --once" % INSTALLED_AT,
        _HEREDOC_END,
        "        cat >/etc/systemd/system/%s.timer <<'%s' || return 1" % (UNIT, _HEREDOC_END),
        "[Unit]",
        "Description=gpuprov watchdog, every %d s" % interval_s,
        "[Timer]",
        "OnBootSec=%d" % interval_s,
        "OnUnitActiveSec=%d" % interval_s,
        "AccuracySec=1s",
        "[Install]",
        "WantedBy=timers.target",
        _HEREDOC_END,
        "        systemctl daemon-reload && systemctl enable --now %s.timer || return 1" % UNIT,
        "    elif command -v setsid >/dev/null 2>&1; then",
        "        setsid nohup %s >/dev/null 2>&1 </dev/null &" % INSTALLED_AT,
        "    else",
        "        nohup %s >/dev/null 2>&1 </dev/null &" % INSTALLED_AT,
        "    fi",
        "}",
    ])


def deadline_update_command(limits: Limits, price_per_hour: Optional[float] = None, up_since: Optional[float] = None,
                            grace_s: Optional[int] = None, state_dir: str = STATE_DIR,
                            interval_s: Optional[int] = None) -> str:
    """The command the controller runs over SSH when the limits change: rewrites the deadline, spend budget and
    idle lines of ``<state_dir>/limits`` (and ``up_since`` / ``grace`` / ``interval`` when given: the journalled
    up_since replaces the boot script's clock; a systemd timer keeps the period it was installed with), keeps the
    other lines, and renames the new file over the old one, 0644 root, so the watchdog never reads half a file.
    Through ``sudo -n`` when the SSH user is not root."""
    lines = _limits_lines(limits, price_per_hour, None if up_since is None else str(int(up_since)))
    if grace_s is not None:
        lines.append("grace=%d" % int(grace_s))
    if interval_s is not None:
        lines.append("interval=%d" % max(1, int(interval_s)))
    keys = [line.split("=", 1)[0] for line in lines]
    keep = " ".join("-e %s" % shlex.quote("^%s=" % key) for key in keys)
    folder = shlex.quote(state_dir)
    script = "\n".join([
        "set -eu",
        "dir=%s" % folder,
        'mkdir -p "$dir"',
        'new=$(mktemp "$dir/.limits.XXXXXX")',
        "trap 'rm -f \"$new\"' EXIT",
        "{",
        '    if [ -r "$dir/limits" ]; then grep -v %s "$dir/limits" || true; fi' % keep,
        "    printf '%%s\\n' %s" % " ".join(shlex.quote(line) for line in lines),
        '} >"$new"',
        'chmod 0644 "$new"',
        'chown 0:0 "$new"',
        'mv -f "$new" "$dir/limits"',
        "trap - EXIT",
    ])
    return _as_root("update", script)


def _as_root(variable: str, script: str) -> str:
    """``script`` run by sh as root: directly when the SSH user is root, else through ``sudo -n``."""
    return '%s=%s; if [ "$(id -u)" = 0 ]; then sh -c "$%s"; else sudo -n sh -c "$%s"; fi' % (
        variable, shlex.quote(script), variable, variable)


def install_over_ssh_command(limits: Limits, price_per_hour: Optional[float], up_since: Optional[float]) -> str:
    """What the controller runs over SSH once a VM's limits are journalled or moved: installs the watchdog where
    no boot script did (a cloud without one, a VM that was up before it had limits; over an installed one it
    rewrites the same script and leaves the running timer or loop as it is), then writes the journalled limits
    as ``deadline_update_command`` does. Exits non-zero, saying why on stderr, when the install fails."""
    grace_s, interval_s = limits.grace, limits.check_interval_s
    update = deadline_update_command(limits, price_per_hour=price_per_hour, up_since=up_since, grace_s=grace_s,
                                     interval_s=interval_s)
    script = "\n".join([
        _install_function(limits, grace_s, price_per_hour, interval_s),
        "gpuprov_watchdog_install || { echo 'gpuprov watchdog: the install failed' >&2; exit 3; }",
        "",
    ])
    return "%s && %s" % (_as_root("install", script), update)
