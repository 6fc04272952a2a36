"""The soak's world: three controllers and the clouds they share.

  * c1 and c2: two controllers (two HOMEs and state dirs, as two AWX jobs) on one PostgreSQL journal (a
    throw-away server, tests/pg_server.py; a shared SQLite file where PostgreSQL cannot run here), one SSH
    key between them (as an AWX Machine credential gives it): the journal labelled "shared";
  * c3: a controller on its own SQLite journal (the default, in its state dir), its own key: "own".

All three use one local cloud (cloud_options.local.root: one folder of instance records, the local
cloud's "cloud side") and, where a Docker engine answers and the base image exists, the one engine. So
the same VM name on two journals meets "made by another controller", a sweep of one journal sees the
other's instances as foreign, and a down on one journal must never touch the other's VM.

The world also observes: what is on the clouds (the providers' own list_owned, as the sweep lists it),
what the journals say (rows and events), whether a VM answers SSH; it plants orphans through the
provider's Python API, and it removes everything it made when closed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.tests.soak.oracle import Instance, JournalFacts, RowFacts, Snapshot

REPO = pathlib.Path(__file__).resolve().parents[2]
COLLECTIONS = REPO / "build" / "collections"
BIN = pathlib.Path(sys.executable).parent
SHARED, OWN = "shared", "own"


def sshd_available() -> bool:
    return bool(shutil.which("sshd")) or os.path.exists("/usr/sbin/sshd")


def docker_unavailable() -> Optional[str]:
    """Why the docker cloud is left out (None: the engine answers and the base image is there)."""
    from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de
    client, why = de.engine()
    if client is None:
        return why
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options.docker import (
        DEFAULT_BASE_IMAGE,
    )
    try:
        client.images.get(DEFAULT_BASE_IMAGE)
    except Exception:  # ImageNotFound, or the engine went away
        return "the base image %s is not built (make images)" % DEFAULT_BASE_IMAGE
    finally:
        client.close()
    return None


class Controller:
    """One controller: a HOME and state dir of its own, the environment its ansible-playbook runs get."""

    def __init__(self, name: str, journal: str, home: pathlib.Path, env: Dict[str, str]):
        self.name = name
        self.journal = journal
        self.home = home
        home.mkdir(mode=0o700, parents=True)
        # OpenSSH's control sockets must fit a Unix socket path (108 bytes): a short folder of their own.
        self.control_dir = tempfile.mkdtemp(prefix="gpsk-")
        self.env = dict(os.environ, HOME=str(home), GPUPROV_HOME=str(home / "state"),
                        ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1",
                        ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_LOCAL_TEMP=str(home / "ansible-tmp"),
                        ANSIBLE_SSH_CONTROL_PATH_DIR=self.control_dir, ANSIBLE_RETRY_FILES_ENABLED="0",
                        PATH="%s:%s" % (BIN, os.environ.get("PATH", "")))
        for name_ in ("GPUPROV_JOURNAL", "GPUPROV_SSH_KEY_FILE", "PGPASSWORD", "ANSIBLE_CALLBACKS_ENABLED",
                      "ANSIBLE_CALLBACK_PLUGINS", "ANSIBLE_STDOUT_CALLBACK"):
            self.env.pop(name_, None)
        self.env.update(env)

    @property
    def state(self) -> pathlib.Path:
        return self.home / "state"


class World:
    def __init__(self, work: pathlib.Path, names: Dict[str, str], instance_names: Dict[str, str],
                 log=print, postgres: bool = True):
        """``names``: VM name -> its cloud; ``instance_names``: gpuprov.cloud.instance name -> its cloud."""
        self.work = work
        self.names = dict(names)
        self.instance_names = dict(instance_names)
        self.log = log
        self.notes: List[str] = []
        self.root = work / "cloud" / "local"
        self.root.mkdir(parents=True, mode=0o700)
        self.cloud_options = {"local": {"root": str(self.root)}}
        self.clouds = sorted(set(self.names.values()) | set(self.instance_names.values()))
        self.pg = None
        self.password = None
        shared = work / "shared"
        shared.mkdir(mode=0o700)
        self.shared_key = shared / "ssh_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.shared_key)], check=True)
        env = {"GPUPROV_SSH_KEY_FILE": str(self.shared_key)}
        if postgres:
            from ansible_collections.gpuprov.cloud.tests import pg_server
            why = pg_server.unavailable()
            if why is None:
                self.pg = pg_server.PgServer()
                self.password = pg_server.PASSWORD
                self.shared_location = self.pg.new_database()
                env.update(GPUPROV_JOURNAL=self.shared_location, PGPASSWORD=self.password)
            else:
                self.notes.append("PostgreSQL cannot run here (%s): c1 and c2 share an SQLite journal" % why)
        if self.pg is None:
            self.shared_location = str(shared / "journal.sqlite")
            env["GPUPROV_JOURNAL"] = self.shared_location
        self.controllers = {
            "c1": Controller("c1", SHARED, work / "c1-home", env),
            "c2": Controller("c2", SHARED, work / "c2-home", env),
            "c3": Controller("c3", OWN, work / "c3-home", {}),
        }
        self.own_location = str(self.controllers["c3"].state / "journal.sqlite")
        for label in (SHARED, OWN):   # both journals exist from the start, as a first run would make them
            self.open_journal(label, create=True).close()
        self.playbooks = work / "playbooks"
        self.playbooks.mkdir()
        (self.playbooks / "instance.yml").write_text(INSTANCE_PLAYBOOK)

    # -- journals ------------------------------------------------------------------------------------
    def journal_location(self, label: str) -> str:
        return self.shared_location if label == SHARED else self.own_location

    def open_journal(self, label: str, create: bool = False):
        """The journal, or None while it does not exist yet (an SQLite file no run has made)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journals import open_journal
        location = self.journal_location(label)
        if not create and not location.startswith("postgres") and not os.path.exists(location):
            return None
        return open_journal(location, password=self.password)

    def _facts(self, label: str) -> Optional[JournalFacts]:
        journal = self.open_journal(label)
        if journal is None:
            return None
        try:
            facts = JournalFacts(label, journal.journal_id)
            ours = set(self.names) | set(self.instance_names)
            for key in journal.keys():
                name = key.split(":")[-1]
                if name not in ours:
                    continue
                row = journal.load(key)
                if row is None:
                    continue
                state = row.state or {}
                vm = state.get("vm") or {}
                facts.rows[key] = RowFacts(key, row.kind, str(state.get("kind")), row.label, row.terminal,
                                           vm.get("instance_id") or state.get("instance_id"))
                facts.events[key] = [dict(e, at=float(e["at"])) for e in journal.events(key)]
            return facts
        finally:
            journal.close()

    # -- the clouds ----------------------------------------------------------------------------------
    def _provider(self, cloud: str, journal_id: Optional[str] = None):
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
        return registry.get_provider(cloud, self.cloud_options.get(cloud, {}), journal_id=journal_id)

    def instances(self) -> List[Instance]:
        """Every instance of the soak's names on its clouds, any journal, any status."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ResourceKind
        ours = set(self.names) | set(self.instance_names)
        found = []
        for cloud in self.clouds:
            provider = self._provider(cloud)
            for location in provider.sweep_locations():
                for owned in provider.list_owned(location):
                    if owned.kind == ResourceKind.INSTANCE and owned.vm_name in ours:
                        found.append(Instance(cloud, owned.resource_id, owned.vm_name, owned.journal_id,
                                              owned.status))
        return sorted(found, key=lambda i: (i.vm_name, i.cloud, i.id))

    def snapshot(self, round_: int, phase: str = "soak") -> Snapshot:
        """What the journals say, then what the clouds hold (a listing that fails is tried again: the engine
        or the database busy for a moment is not what the soak is about)."""
        at = time.time()
        for attempt in range(4):
            try:
                journals = {}
                for label in (SHARED, OWN):
                    facts = self._facts(label)
                    if facts is not None:
                        journals[label] = facts
                return Snapshot(at=at, round=round_, phase=phase, instances=self.instances(), journals=journals)
            except Exception as exc:  # a listing or a journal read that failed: again, then give up loudly
                if attempt == 3:
                    raise RuntimeError("the soak could not observe the world: %r" % (exc,)) from exc
                time.sleep(2.0)
        raise AssertionError("unreachable")

    def ssh(self, controller: str, name: str) -> Tuple[bool, str]:
        """``ssh -F <state>/ssh_config NAME true`` as that controller (two tries, a second apart)."""
        c = self.controllers[controller]
        detail = ""
        for attempt in range(2):
            if attempt:
                time.sleep(1.0)
            try:
                proc = subprocess.run(["ssh", "-F", str(c.state / "ssh_config"), "-o", "BatchMode=yes",
                                       "-o", "ConnectTimeout=10", name, "true"], env=c.env, capture_output=True,
                                      text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                detail = "ssh timed out after 60 s"
                continue
            if proc.returncode == 0:
                return True, ""
            detail = "rc %d: %s" % (proc.returncode, proc.stderr.strip()[-300:])
        return False, detail

    def plant(self, journal_label: str, name: str, cloud: str) -> Tuple[Optional[str], str]:
        """An orphan of ``name`` for the journal: an instance carrying its identity that no row has, made
        through the provider (as a create whose journal row was lost leaves one). Only where nothing of the
        name is on that journal (no instance, no row that is not a teardown Done): (instance id, "") or
        (None, why not)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
            InstanceSpec, ProviderError, ResourceRequest,
        )
        from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.ssh import ensure_controller_key
        facts = self._facts(journal_label)
        if facts is None:
            return None, "no journal yet"
        keys = [name] + [k for k in facts.rows if k.startswith("instance:") and k.endswith(":" + name)]
        for key in keys:
            row = facts.rows.get(key)
            if row is not None and not (row.kind in ("teardown", "instance-teardown") and row.state_kind == "Done"):
                return None, "row %s says %s" % (key, row.label)
        if any(i.vm_name == name for i in self.instances()):
            return None, "an instance of the name exists"
        if journal_label == SHARED:
            public = pathlib.Path(str(self.shared_key) + ".pub").read_text()
        else:
            public = ensure_controller_key(str(self.controllers["c3"].state / "id_ed25519"))
        provider = self._provider(cloud, facts.journal_id)
        spec = InstanceSpec(vm_name=name, ssh_public_key=public)
        try:
            offer = provider.plan(ResourceRequest(name))[0]
            return provider.create(offer, provider.prepare(offer, spec), spec), ""
        except ProviderError as exc:
            return None, "create failed: %s" % exc

    # -- the end -------------------------------------------------------------------------------------
    def close(self) -> List[str]:
        """Remove everything the soak made: sshd processes under the shared local root, the names'
        containers, the PostgreSQL server. Returns what had to be removed by force (after the settle,
        nothing should be left)."""
        forced = []
        from ansible_collections.gpuprov.cloud.tests.crashpoints import harness
        for _attempt in range(3):
            pids = harness.sshd_pids(self.root)
            if not pids:
                break
            for pid in pids:
                forced.append("sshd %d" % pid)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        if "docker" in self.clouds:
            from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de
            client, _why = de.engine()
            if client is not None:
                ours = set(self.names) | set(self.instance_names)
                for container in client.containers.list(all=True, filters={"label": "gpuprov-vm-name"},
                                                        ignore_removed=True):
                    if container.labels.get("gpuprov-vm-name") in ours:
                        forced.append("container %s" % container.name)
                        with contextlib.suppress(Exception):
                            container.remove(force=True, v=True)
                client.close()
        if self.pg is not None:
            self.pg.destroy()
            self.pg = None
        for c in self.controllers.values():
            shutil.rmtree(c.control_dir, ignore_errors=True)
        return sorted(set(forced))


INSTANCE_PLAYBOOK = """---
# The soak's gpuprov.cloud.instance run: -e vm=NAME -e state=present|absent -e cloud=local
- name: One gpuprov.cloud.instance task
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Instance
      gpuprov.cloud.instance:
        name: "{{ vm }}"
        state: "{{ state }}"
        cloud: "{{ cloud }}"
        cloud_options: "{{ gpuprov_cloud_options | default({}) }}"
        wait_timeout: 120
"""


def options_arg(world: World) -> List[str]:
    return ["-e", json.dumps({"gpuprov_cloud_options": world.cloud_options})]
