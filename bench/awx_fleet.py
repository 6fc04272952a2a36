"""Benchmark: a fleet of 16 VMs launched by 4 concurrent AWX-style jobs on one PostgreSQL journal.

Each "job" is ``ansible_runner.run_async`` (the library AWX runs jobs with) of the provision
playbook, with a private data directory and HOME of its own, GPUPROV_JOURNAL set to one
PostgreSQL DSN (a throw-away server, tests/pg_server.py, fsync on) and an inventory of 4 VMs
on the local cloud (real sshd). Printed, never asserted: the wall time of the 4 jobs together
against one job launching one VM, the VMs Ready in the journal, the sshd processes running;
then one down job per runner removes them.

Run: make dev && .venv/bin/python bench/awx_fleet.py
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
COLLECTIONS = REPO / "build" / "collections"
sys.path.insert(0, str(COLLECTIONS))

import ansible_runner  # noqa: E402

from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import projection  # noqa: E402
from ansible_collections.gpuprov.cloud.tests import pg_server  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.integration.conftest import kill_sshds, live_sshd_folders  # noqa: E402

BIN = pathlib.Path(sys.executable).parent
RUNNERS, PER_RUNNER = 4, 4


def job(base: pathlib.Path, label: str, playbook: str, vms, journal: str, key: pathlib.Path, shared: pathlib.Path):
    folder = base / label
    (folder / "inventory").mkdir(parents=True)
    hosts = "".join("        %s: {}\n" % vm for vm in vms)
    (folder / "inventory" / "hosts").write_text("all:\n  children:\n    gpuprov_vms:\n      hosts:\n" + hosts)
    env = {"HOME": str(folder), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS), "ANSIBLE_FORCE_COLOR": "0",
           "ANSIBLE_SSH_CONTROL_PATH_DIR": str(folder / "cp"), "PATH": "%s:%s" % (BIN, os.environ["PATH"]),
           "GPUPROV_JOURNAL": journal, "GPUPROV_SSH_KEY_FILE": str(key), "PGPASSWORD": pg_server.PASSWORD}
    extravars = {"gpuprov_clouds": ["local"], "gpuprov_k8s": False,
                 "gpuprov_cloud_options": {"local": {"root": str(shared / "local")}},
                 "ansible_python_interpreter": sys.executable}
    thread, runner = ansible_runner.run_async(
        private_data_dir=str(folder), project_dir=str(REPO), playbook=str(REPO / "playbooks" / playbook),
        extravars=extravars, envvars=env, quiet=True, forks=PER_RUNNER)
    return thread, runner


def run_jobs(base, label, playbook, groups, journal, key, shared) -> float:
    started = time.monotonic()
    running = [job(base, "%s-%d" % (label, i), playbook, vms, journal, key, shared) for i, vms in enumerate(groups)]
    for thread, _runner in running:
        thread.join()
    failed = [r.status for _t, r in running if r.status != "successful"]
    if failed:
        raise SystemExit("%s: jobs ended %s (see %s)" % (label, failed, base))
    return time.monotonic() - started


def ready(journal: str):
    opened = projection.open_journal(journal, password=pg_server.PASSWORD)
    try:
        return sorted(row["name"] for row in projection.vms(opened) if row.get("status") == "running")
    finally:
        opened.close()


def main() -> None:
    why = pg_server.unavailable()
    if why:
        raise SystemExit("no PostgreSQL here: %s" % why)
    server = pg_server.PgServer(fsync=True)
    base = pathlib.Path(tempfile.mkdtemp(prefix="gpuprov-awx-fleet-"))
    shared = base / "shared"
    shared.mkdir()
    key = shared / "machine_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    try:
        one = server.new_database()
        single = run_jobs(base, "one", "provision.yml", [["solo1"]], one, key, shared)
        run_jobs(base, "one-down", "down.yml", [["solo1"]], one, key, shared)

        fleet_db = server.new_database()
        groups = [["f%d-%d" % (r, v) for v in range(PER_RUNNER)] for r in range(RUNNERS)]
        fleet = run_jobs(base, "fleet", "provision.yml", groups, fleet_db, key, shared)
        up, live = ready(fleet_db), live_sshd_folders(shared)
        down = run_jobs(base, "fleet-down", "down.yml", groups, fleet_db, key, shared)
        print("one job, one VM:            %6.1f s" % single)
        print("%d jobs x %d VMs, together:  %6.1f s  (%.2fx one VM; %.2f s per VM)"
              % (RUNNERS, PER_RUNNER, fleet, fleet / single, fleet / (RUNNERS * PER_RUNNER)))
        print("Ready in the journal: %d; sshd running: %d; down (4 jobs): %.1f s; left after down: %d"
              % (len(up), len(live), down, len(live_sshd_folders(shared))))
    finally:
        kill_sshds(shared)
        server.destroy()


if __name__ == "__main__":
    main()
