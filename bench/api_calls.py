"""Benchmark: how many API calls a launch makes, per primitive, and what a fleet of 50 adds (issue 28, item 1).

Counted at the fake servers, measured in one run, printed, never asserted.

(a) One launch, Planning to Ready, per cloud: the REAL executor and launch machine (vm/launch.py) on a SQLite
    journal with a fake clock (waits advance it, nothing sleeps) drive the REAL adapter of each cloud against its
    fake, wired as the conformance suite wires it (tests/conformance/harnesses/<cloud>.py): moto's EC2 server for
    aws (tests/fakes/moto_ec2.py), the vendor API fakes of lambda, runpod, primeintellect, massedcompute,
    hyperstack, verda and digitalocean (tests/fakes/marketplace.py), the Compute REST fake for gcp and the gRPC fake
    for nebius. docker and local are left out: they are not HTTP APIs with rate limits. The SSH login is a stand-in
    (tests/fakes/scripted_provider.FakeSsh): it makes no API call. Each created instance boots on the fake's own
    pacing (the marketplace fakes: after two reads of it); a fake that needs a push (gcp) is pushed at the
    second wait of the machine, so every launch sees at most two polls of a booting instance: its polls are
    the fewest a launch makes (the fleet rows boot for 20 s instead).

    Attribution: the bench wraps every public method of the adapter instance (plan, prepare, create, observe,
    delete, cleanup, capabilities, offer_places, ...) so that a module-level stack says which one is running, and
    replaces the fake's call log (a list) by a list that stamps each logged request with the outermost running
    method and the time. The launch is one thread, so a request the fake logs while ``create`` runs is create's.
    ``observe`` is split in two: the check before the create (no instance of the name yet) and the polls after
    it. A request logged while no wrapped method runs is ``(outside)``. The wrapping lives here, never in plugins/.

(b) A fleet of 50 VMs: one ``ansible-playbook gpuprov.cloud.provision`` (an inventory of 50 hosts in group
    gpuprov_vms, --forks 50, k8s=false), then ``gpuprov.cloud.down`` with the same inventory, on moto, on the
    Hyperstack fake and on the DigitalOcean fake, each server in this process. First the same playbook with a
    one-host inventory: one launch's calls through the same path and the same boot (the vm action makes calls the
    in-process launch of (a) does not, and the boot differs, see below). Printed: total calls, calls per VM, calls
    per VM over one VM's (the issue's goal: at most 0.5x once VMs share work), the most calls in any 1 s and any
    60 s window (sliding), beside the cloud's documented limit:

      aws           non-mutating actions: a token bucket of 100 requests refilled at 20/s per account and Region;
                    mutating actions (RunInstances, CreateSecurityGroup, ...) have buckets of their own, and
                    RunInstances / TerminateInstances a resource bucket on top.
                    https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html
                    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/throttling.html)
      hyperstack    500 requests per minute per source IP, every endpoint together; past it every request of the
                    IP is answered 429 for the rest of the minute.
                    https://docs.hyperstack.cloud/docs/api-reference/rate-limits
      digitalocean  5,000 requests per hour and 250 per minute per token (the ratelimit-limit header's text in
                    DigitalOcean's OpenAPI spec, shared/headers.yml; the API introduction's "Rate Limit" section).
                    https://docs.digitalocean.com/reference/api/intro/
                    (https://docs.digitalocean.com/reference/api/api-reference/#section/Introduction/Rate-Limit)

    The fleet's VMs log in over real SSH: on moto every instance gets one loopback public IP where a root sshd of
    the bench listens on port 22 (bench/aws_peer.py, bench/aws_rerun.start_sshd; MaxStartups raised so 50 logins
    at once are not dropped), on the marketplace fakes each instance gets its own sshd (the fakes' SshdPool). The
    fakes' quotas (Hyperstack 20 VMs, DigitalOcean 25 droplets) are raised to fit the fleet. Boots: moto's
    instances run at once; the marketplace fakes' VMs boot FLEET_BOOT_S (20 s) after their first read
    (MarketplaceFake.boot_after_s), by time rather than by reads, because a listing reads every VM it lists: paced
    by reads, a fleet's VMs would boot after fewer polls each than one VM alone. The polls follow the shipped
    schedule (machine/executor.poll_delay: 1 s at first, 4% of the time spent booting later, at most the cloud's
    poll_interval_s, 10 s): a boot of minutes costs more polls than these 20 s. aws's GetParameter is SSM's (the
    AMI lookup), metered by SSM, not by EC2's buckets. Each fleet row runs once whatever the rounds: a 50-VM play
    takes about a minute here and its count does not depend on the machine's speed.

    Attribution in (a) uses the wrapped adapter; in (b) the adapters run in Ansible's worker processes, so the
    fleet rows count the fake's requests by name (route or EC2 action) and time only.

``rounds`` repeats (a) (the counts are deterministic; repeated rounds print the spread, expected 0).

Run: make dev && .venv/bin/python bench/api_calls.py [rounds] [fleet size] [fleet clouds, comma-separated]
"""

from __future__ import annotations

import collections
import getpass
import importlib.util
import inspect
import json
import logging
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Tuple

REPO = pathlib.Path(__file__).resolve().parents[1]
COLLECTIONS = REPO / "build" / "collections"
HARNESSES = COLLECTIONS / "ansible_collections" / "gpuprov" / "cloud" / "tests" / "conformance" / "harnesses"
sys.path.insert(0, str(COLLECTIONS))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

# pylint: disable=wrong-import-position
from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import Provider  # noqa: E402
from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmContext, VmSettings  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes import moto_ec2 as aws_fake  # noqa: E402
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import FakeClock, FakeSsh  # noqa: E402
import aws_peer  # noqa: E402
import aws_rerun  # noqa: E402

BIN = pathlib.Path(sys.executable).parent
CLOUDS = ("aws", "lambda", "runpod", "primeintellect", "massedcompute", "hyperstack", "verda", "digitalocean", "gcp",
          "nebius")
FLEET_CLOUDS = ("aws", "hyperstack", "digitalocean")
# The fleet rows' marketplace VMs boot this long after their first read (MarketplaceFake.boot_after_s): by time, not
# by reads, so that one VM's polls and each fleet VM's polls follow the same boot.
FLEET_BOOT_S = 20.0
LIMITS = {
    "aws": ("non-mutating: 100 burst, +20/s (per account and Region); mutating: their own buckets",
            "https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html"),
    "hyperstack": ("500/min per source IP", "https://docs.hyperstack.cloud/docs/api-reference/rate-limits"),
    "digitalocean": ("250/min and 5,000/h per token", "https://docs.digitalocean.com/reference/api/intro/"),
}
# The 1 s and 60 s ceilings each limit allows (None: that window has no documented ceiling of its own).
# aws meters each API (action) in its own bucket: its row compares the busiest action instead.
CEILINGS = {"aws": (None, None), "hyperstack": (None, 500), "digitalocean": (None, 250)}


# -- attribution: which adapter method runs while the fake logs a request ------------------------------------------

class Active:
    """The stack of wrapped adapter methods now running (one launch, one thread: a plain module-level stack)."""

    stack: List[str] = []
    created = False

    @classmethod
    def label(cls) -> str:
        if not cls.stack:
            return "(outside)"
        name = cls.stack[0]
        if name == "observe":
            return "observe (polls)" if cls.created else "observe (before create)"
        return name


class StampedLog(list):
    """A fake's call log that also keeps, per entry, the time it was logged and the adapter method running then."""

    def __init__(self, entries=()):
        super().__init__(entries)
        self.stamps: List[Tuple[float, str]] = [(0.0, "(before)")] * len(self)
        self._lock = threading.Lock()

    def append(self, entry) -> None:   # the fakes append under their own lock; this one guards the pair
        with self._lock:
            super().append(entry)
            self.stamps.append((time.monotonic(), Active.label()))

    def since(self, start: int) -> List[Tuple[Any, float, str]]:
        """(entry, time, adapter method) of each entry from index ``start`` on."""
        with self._lock:
            return [(self[index],) + self.stamps[index] for index in range(start, len(self))]


def primitive_names() -> List[str]:
    """The public methods of the adapter contract (providers/base.Provider)."""
    return sorted(name for name, member in inspect.getmembers(Provider, inspect.isfunction) if not name.startswith("_"))


def wrap_adapter(provider: Provider, on_create: Callable[[Any, str], None]) -> None:
    """Wrap each contract method of ``provider`` (on the instance) so that Active knows which one runs."""
    for name in primitive_names():
        method = getattr(provider, name, None)
        if not callable(method):
            continue

        def wrapper(*args, __name=name, __method=method, **kwargs):
            Active.stack.append(__name)
            try:
                result = __method(*args, **kwargs)
            finally:
                Active.stack.pop()
            if __name == "create" and not Active.stack:
                Active.created = True
                on_create(args[0], result)
            return result
        setattr(provider, name, wrapper)


def stamp_log(fake: Any) -> Tuple[StampedLog, Callable[[Any], str]]:
    """Replace the fake's call log by a StampedLog; return it and how to name one entry (route, action or method)."""
    if isinstance(fake, aws_fake.MotoEc2):
        holder, attribute, lock = fake.middleware, "log", fake.middleware.lock
    else:
        holder, attribute, lock = fake, "calls", getattr(fake, "lock", None) or threading.Lock()
    with lock:
        log = StampedLog(getattr(holder, attribute))
        setattr(holder, attribute, log)
    return log, name_of


def name_of(entry: Any) -> str:
    """The request a log entry records: moto's action, the gcp fake's key, the other fakes' route or method key."""
    if isinstance(entry, dict):
        return entry.get("action") or entry.get("key") or "?"
    return entry[0] or "(no route)"


# -- (a) one launch in process --------------------------------------------------------------------------------------

class TmpFactory:
    """What make_harness asks of pytest's tmp_path_factory: mktemp(name) -> a fresh folder."""

    def __init__(self, root: pathlib.Path):
        self.root = root

    def mktemp(self, name: str) -> pathlib.Path:
        return pathlib.Path(tempfile.mkdtemp(prefix=name + "-", dir=str(self.root)))


def load_harness(cloud: str, factory: TmpFactory):
    spec = importlib.util.spec_from_file_location("bench_harness_" + cloud, str(HARNESSES / (cloud + ".py")))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_harness(factory)


def one_launch(cloud: str, tmp: pathlib.Path) -> Tuple[Dict[str, collections.Counter], int]:
    """{primitive: Counter(request name)} of one launch of ``cloud`` to Ready, and its fake-clock waits."""
    import _pytest.outcomes   # make_harness skips (pytest.skip) when a fake cannot run here

    from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import CancelToken, Executor
    from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch

    try:
        harness = load_harness(cloud, TmpFactory(tmp))
    except _pytest.outcomes.Skipped as exc:
        raise RuntimeError("its harness skips: %s" % exc) from None
    fake = harness.fake
    log, name_of = stamp_log(fake)
    start = len(log)
    account = getattr(harness, "account", None)
    clock = FakeClock()
    journal = Journal(str(tmp / ("%s.sqlite" % cloud)), clock=clock)
    provider = harness.provider
    provider.journal_id = journal.journal_id
    made: List[Tuple[Any, str]] = []
    wrap_adapter(provider, lambda offer, instance_id: made.append((offer.location, instance_id)))
    Active.stack, Active.created = [], False
    vm_name = harness.request.vm_name
    settings = VmSettings(vm_name=vm_name, clouds=[cloud], request=harness.request, spec=harness.spec,
                          ssh_timeout=60.0, teardown_timeout=120.0, step_attempts=5, teardown_attempts=3,
                          exhausted_wait=30.0)
    ctx = VmContext(settings, files=None, ssh_check=FakeSsh(), providers={cloud: provider},
                    journal_id=journal.journal_id)
    waits = []

    def on_wait(_seconds):   # a fake that needs a push boots at the second wait
        waits.append(_seconds)
        if len(waits) >= 2:
            for location, instance_id in made:
                harness.settle(location, instance_id)
    clock.on_wait = on_wait
    try:
        executor = Executor(journal, launch.LaunchMachine(ctx), clock=clock, cancel=CancelToken(clock),
                            rng=random.Random(7), heartbeat=False)
        out = executor.run(vm_name, launch.initial, wait_poll=clock.wait)
        if out.state["kind"] != "Ready":
            raise RuntimeError("the launch ended %s: %s" % (out.state["kind"], out.state.get("reason")))
        split: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for entry, _when, label in log.since(start):
            if account is None or entry.get("account") == account:
                split[label][name_of(entry)] += 1
        return split, len(waits)
    finally:
        Active.stack, Active.created = [], False
        journal.close()
        try:
            for location, instance_id in made:
                provider.delete(location, vm_name, [instance_id])
        except Exception:   # pylint: disable=broad-except
            pass
        harness.close()


ORDER = ("plan", "prepare", "observe (before create)", "create", "observe (polls)")


def report_launches(results: Dict[str, Tuple[Dict[str, collections.Counter], int]], spread: Dict[str, int],
                    rounds: int) -> None:
    print("(a) API calls of ONE launch, Planning to Ready, counted at the fake server, by the adapter method running "
          "(%d round%s; the in-process launch machine, fake clock, SSH stand-in):" % (rounds, "" if rounds == 1 else "s"))
    for cloud, (split, waits) in results.items():
        total = sum(sum(c.values()) for c in split.values())
        labels = [label for label in ORDER if label in split] + sorted(set(split) - set(ORDER))
        print("  %-14s %3d calls  (%s)  %d waits%s" % (
            cloud, total, ", ".join("%s %d" % (label, sum(split[label].values())) for label in labels), waits,
            "" if not spread.get(cloud) else "  [rounds differ by %d]" % spread[cloud]))
        for label in labels:
            print("      %-24s %s" % (label, ", ".join("%s x%d" % kv for kv in sorted(split[label].items()))))


# -- (b) a fleet through ansible-playbook -----------------------------------------------------------------------------

def windows(stamps: List[float]) -> Tuple[int, int]:
    """The most requests in any 1 s and any 60 s window (sliding, from each request's time)."""
    best = {1.0: 0, 60.0: 0}
    for width in best:
        low = 0
        for high, when in enumerate(stamps):
            while when - stamps[low] >= width:
                low += 1
            best[width] = max(best[width], high - low + 1)
    return best[1.0], best[60.0]


class FleetCloud:
    """One cloud's fake for the fleet rows: its extra vars, env and call log (the server lives in this process)."""

    def __init__(self, cloud: str, tmp: pathlib.Path, home: pathlib.Path, size: int):
        self.cloud, self.env, self.sshd, self.account = cloud, {}, None, None
        user = getpass.getuser()
        if cloud == "aws":
            self.fake = aws_fake.shared_server()
            creds = self.fake.new_account()
            self.account = creds["aws_access_key_id"]
            if "MaxStartups" not in aws_peer.SSHD_CONFIG:   # sshd's default drops logins past 10 unauthenticated
                aws_peer.SSHD_CONFIG += "MaxStartups %d\n" % (4 * size)
            self.sshd, why = aws_rerun.start_sshd(tmp / "sshd", home / "id_ed25519")
            if self.sshd is None:
                raise RuntimeError(why)
            options = dict(creds, endpoint_url=self.fake.endpoint_url, regions=["us-east-1"],
                           allowed_cidrs=["198.51.100.7/32"], ami_name_filter=aws_rerun.DLAMI_FILTER,
                           controller_ip_url="", ssh_user="root")
            self.extra = {"clouds": ["aws"], "gpu": "T4", "regions": ["us-east-1"]}
            self.env = dict(aws_fake.FAKE_ENV)
        elif cloud == "hyperstack":
            from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import HyperstackApiFake
            self.fake = HyperstackApiFake(str(tmp / "hyperstack"), token="bench-" + "hyperstack", quota=size + 10)
            options = {"api_url": self.fake.api_url, "ssh_user": user, "ssh_port": self.fake.ssh_port,
                       "allowed_cidrs": ["127.0.0.0/8"]}
            self.extra = {"clouds": ["hyperstack"], "gpu": "A100-80GB"}
            self.env = {"HYPERSTACK_API_KEY": self.fake.token}
        elif cloud == "digitalocean":
            from ansible_collections.gpuprov.cloud.tests.fakes.digitalocean_api import DigitalOceanApiFake
            self.fake = DigitalOceanApiFake(str(tmp / "digitalocean"), token="bench-" + "digitalocean",
                                            droplet_limit=size + 10)
            options = {"api_url": self.fake.api_url, "ssh_user": user, "ssh_port": self.fake.ssh_port,
                       "allowed_cidrs": ["127.0.0.0/8"]}
            self.extra = {"clouds": ["digitalocean"], "gpu": "RTX4000ADA"}
            self.env = {"DIGITALOCEAN_TOKEN": self.fake.token}
        else:
            raise ValueError(cloud)
        if cloud != "aws":   # moto's instances run at once
            self.fake.boot_after_s = FLEET_BOOT_S
        self.extra.update(k8s=False, gpuprov_cloud_options={cloud: options})
        self.log, self.name_of = stamp_log(self.fake)

    def mark(self) -> int:
        return len(self.log)

    def since(self, mark: int) -> List[Tuple[float, str]]:
        """(time, request name) of this cloud's requests logged since ``mark``."""
        return [(when, self.name_of(entry)) for entry, when, _label in self.log.since(mark)
                if self.account is None or entry.get("account") == self.account]

    def live(self) -> int:
        if self.cloud == "aws":
            ec2 = self.fake.client("ec2", "us-east-1", {"aws_access_key_id": self.account,
                                                        "aws_secret_access_key": aws_fake.FAKE_SECRET})
            return sum(1 for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]
                       if i["State"]["Name"] not in ("terminated", "shutting-down"))
        return len(self.fake.live()) if hasattr(self.fake, "live") else len(self.fake.resources())

    def close(self) -> None:
        if self.sshd is not None:
            self.sshd.stop()
        if self.cloud != "aws":
            self.fake.stop()


def playbook(home: pathlib.Path, env: Dict[str, str], name: str, inventory: pathlib.Path, forks: int,
             extra: Dict[str, Any]) -> Tuple[float, str]:
    """(wall seconds, output) of ``ansible-playbook gpuprov.cloud.<name>``; RuntimeError with the output if it fails."""
    started = time.perf_counter()
    done = subprocess.run([str(BIN / "ansible-playbook"), "gpuprov.cloud.%s" % name, "-i", str(inventory),
                           "--forks", str(forks), "-e", json.dumps(extra)], env=env, cwd=str(home),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError("%s failed (rc %d):\n%s" % (name, done.returncode, done.stdout[-4000:]))
    return took, done.stdout


def inventory(home: pathlib.Path, prefix: str, size: int) -> pathlib.Path:
    path = home / ("%s.yml" % prefix)
    path.write_text("gpuprov_vms:\n  hosts:\n%s" % "".join("    %s-%02d:\n" % (prefix, n) for n in range(size)))
    return path


def fleet_row(cloud: str, size: int, tmp: pathlib.Path) -> Dict[str, Any]:
    """Provision one VM, then ``size`` VMs, through the provision playbook (each torn down after), counting calls."""
    home = tmp / ("home-" + cloud)
    home.mkdir()
    made = FleetCloud(cloud, tmp, home, size)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AWS_PROFILE", "AWS_SESSION_TOKEN",
                                                            "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2")}
    env.update(made.env, GPUPROV_HOME=str(home), ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS))
    row: Dict[str, Any] = {"cloud": cloud, "size": size}
    try:
        for key, count in (("one", 1), ("fleet", size)):
            hosts = inventory(home, "%s%d" % (cloud[:2], count), count)
            mark = made.mark()
            try:
                row[key + "_wall"], out = playbook(home, env, "provision", hosts, count, made.extra)
                row[key] = made.since(mark)
                row[key + "_up"] = out.count(" is up on %s/" % cloud)   # the closing message, one line a VM
            finally:   # never leave the fleet running
                mark = made.mark()
                row[key + "_down_wall"], _out = playbook(home, env, "down", hosts, count, made.extra)
                row[key + "_down"] = made.since(mark)
        row["left"] = made.live()
        if made.sshd is not None:   # moto's VMs: the bench's sshd saw each login
            row["logins"] = (made.sshd.folder / "sshd.log").read_text().count("Accepted publickey")
    finally:
        made.close()
    return row


def report_fleet(row: Dict[str, Any]) -> None:
    cloud, size = row["cloud"], row["size"]
    one, fleet = row["one"], row["fleet"]
    per_vm = len(fleet) / float(size)
    stamps = sorted(when for when, _name in fleet)
    peak1, peak60 = windows(stamps)
    limit, url = LIMITS[cloud]
    ceil1, ceil60 = CEILINGS[cloud]
    print("  %s: one VM %d calls (%.1f s); %d VMs (%d said up) %d calls (%.1f s), %.1f per VM = %.2fx one VM's "
          "(goal <= 0.5x)" % (cloud, len(one), row["one_wall"], size, row["fleet_up"], len(fleet), row["fleet_wall"],
                              per_vm, per_vm / max(1, len(one))))
    print("      peak calls in any 1 s: %d%s; in any 60 s: %d%s;  documented limit: %s  %s" % (
        peak1, "" if ceil1 is None else " (limit %d)" % ceil1, peak60, "" if ceil60 is None else " (limit %d)" % ceil60,
        limit, url))
    if cloud == "aws":
        by_action: Dict[str, List[float]] = collections.defaultdict(list)
        for when, name in sorted(fleet):
            by_action[name].append(when)
        peaks = sorted(((windows(times)[0], name) for name, times in by_action.items()), reverse=True)
        reads = [(peak, name) for peak, name in peaks if name.startswith(("Describe", "Get"))]
        writes = [(peak, name) for peak, name in peaks if not name.startswith(("Describe", "Get"))]
        print("      per action, peak in any 1 s: non-mutating %s (each action's bucket: 100 burst, +20/s);"
              " mutating %s (buckets of their own)" % (
                  ", ".join("%s %d" % (name, peak) for peak, name in reads[:3]),
                  ", ".join("%s %d" % (name, peak) for peak, name in writes[:3])))
        print("      SSH logins the bench's sshd accepted (one VM, then the fleet): %d" % row.get("logins", 0))
    if cloud == "digitalocean":
        print("      per hour: the fleet's provision and down together %d calls (limit 5,000/h)" % (
            len(fleet) + len(row["fleet_down"])))
    top = collections.Counter(name for _when, name in fleet).most_common(6)
    print("      the fleet's calls by request: %s" % ", ".join("%s x%d" % kv for kv in top))
    print("      teardown (gpuprov.cloud.down): one VM %d calls, %d VMs %d calls (%.1f s); left running after: %d" % (
        len(row["one_down"]), size, len(row["fleet_down"]), row["fleet_down_wall"], row["left"]))


def processes_under(folder: pathlib.Path, wait_s: float = 15.0) -> int:
    """How many processes still name ``folder`` on their command line (sshds of the fakes' VMs, the bench's root
    sshd), after waiting up to ``wait_s`` for those on their way out."""
    marker, deadline = str(folder).encode(), time.monotonic() + wait_s
    while True:
        found = 0
        for entry in os.listdir("/proc"):
            try:
                with open("/proc/%s/cmdline" % entry, "rb") as handle:
                    found += marker in handle.read()
            except OSError:   # not a process, or gone meanwhile
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    fleet_clouds = [c for c in (sys.argv[3] if len(sys.argv) > 3 else ",".join(FLEET_CLOUDS)).split(",") if c]
    logging.getLogger("werkzeug").setLevel(logging.ERROR)   # the gcp fake's access log
    for key, value in aws_fake.FAKE_ENV.items():   # the in-process adapters' SDK: fake credentials, no ~/.aws
        os.environ[key] = value
    results: Dict[str, Tuple[Dict[str, collections.Counter], int]] = {}
    spread: Dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        for cloud in CLOUDS:
            totals = []
            for index in range(rounds):
                folder = tmp / ("%s-%d" % (cloud, index))
                folder.mkdir()
                try:
                    results[cloud] = one_launch(cloud, folder)
                except Exception as exc:   # pylint: disable=broad-except
                    print("  %s skipped: %s" % (cloud, str(exc).splitlines()[0] if str(exc) else repr(exc)))
                    break
                totals.append(sum(sum(c.values()) for c in results[cloud][0].values()))
            if totals:
                spread[cloud] = max(totals) - min(totals)
        report_launches(results, spread, rounds)
        if not fleet_clouds:
            return
        print("(b) a fleet of %d through ansible-playbook gpuprov.cloud.provision (one run, --forks %d, k8s=false), "
              "then gpuprov.cloud.down; one VM through the same playbook first; each row runs once whatever the rounds:"
              % (size, size))
        for cloud in fleet_clouds:
            if cloud == "aws" and (os.geteuid() != 0 or not (shutil.which("sshd") or os.path.exists("/usr/sbin/sshd"))):
                print("  aws skipped: a root sshd on port 22 is needed behind moto's instance address")
                continue
            try:
                row = fleet_row(cloud, size, tmp)
            except RuntimeError as exc:
                print("  %s fleet failed: %s" % (cloud, exc))
                continue
            report_fleet(row)
        print("  processes left running under the bench's folder after the fleets: %d" % processes_under(tmp))


if __name__ == "__main__":
    main()
