"""A scripted, in-memory cloud for the launch and teardown machine tests.

``ScriptedProvider`` implements the provider contract (plan / prepare / create /
observe / delete / cleanup) over instances held in memory per location:

* offers are configured per test (several regions, types, zones; one fake per cloud
  name, so two fakes can be registered under two cloud names);
* ``prepare`` makes one side resource per (VM, location) (a "security group") and
  ``cleanup`` removes it; cleanup refuses (Transient, like a real DependencyViolation)
  while an instance of the VM still exists there, so the teardown order is checked;
* ``create`` makes an instance tagged with the VM name; it reports Pending for
  ``boot_observes`` listings, then Running with an SSH endpoint (or what a boot
  profile says: Failed, stuck in Pending...);
* ``delete`` marks an instance Terminating; it is gone after ``gone_after`` more
  listings (never, with ``gone_after=None``);
* every primitive first consults a script of outcomes (``fail``/``script``), counts
  its calls and logs its arguments, so tests can assert exactly what was called.

The module also holds the other test doubles the machine tests inject: a fake clock
whose ``wait`` advances time instead of sleeping, and a scripted SSH check.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, Capabilities, ErrorKind, InstanceSpec, Location, Observed, Offer, Provider,
    ProviderError, ResourceRequest, SshEndpoint, Status,
)

PRIMITIVES = ("plan", "prepare", "create", "observe", "delete", "cleanup")
# The credential checks the core runs before planning (Provider.check_credentials, verify_credentials):
# scriptable like a primitive, counted apart (``checks``) so that ``calls`` stays the primitives' count.
CHECKS = ("check_credentials", "verify_credentials")


def offer(cloud: str, region: str, instance_type: str = "gpu.1x", zone: Optional[str] = None,
          **extra: Any) -> Offer:
    """An available H100 offer (override any Offer field through ``extra``)."""
    fields = dict(gpu="H100", gpu_count=1, price_per_hour=2.5)
    fields.update(extra)
    return Offer(cloud=cloud, region=region, instance_type=instance_type, zone=zone, **fields)


def at(region: Optional[str] = None, zone: Optional[str] = None, instance_type: Optional[str] = None,
       offer_id: Optional[str] = None) -> Callable[[Any], bool]:
    """A ``where`` predicate over an Offer or a Location (or anything with those fields)."""
    def match(subject: Any) -> bool:
        if region is not None and getattr(subject, "region", None) != region:
            return False
        if zone is not None and getattr(subject, "zone", None) != zone:
            return False
        if instance_type is not None and getattr(subject, "instance_type", None) != instance_type:
            return False
        if offer_id is not None and getattr(subject, "offer_id", None) != offer_id:
            return False
        return True
    return match


@dataclasses.dataclass
class Rule:
    """One scripted outcome: ``action`` is a ProviderError (raised) or a callable whose
    return value replaces the primitive's effect. ``times=None`` means forever."""

    op: str
    action: Any
    times: Optional[int] = 1
    where: Optional[Callable[[Any], bool]] = None
    after: bool = False     # raise after the effect happened (a lost response)
    fired: int = 0

    def matches(self, op: str, subject: Any) -> bool:
        if self.op != op or self.times == 0:
            return False
        return self.where is None or bool(self.where(subject))


@dataclasses.dataclass
class BootProfile:
    """How instances created from matching offers boot."""

    pending: Optional[int]          # listings in Pending first; None = Pending forever
    then: str = Status.RUNNING      # status reported afterwards
    reason: Optional[str] = None
    endpoint: bool = True           # Running with an SSH endpoint (False: never gets one)
    times: Optional[int] = None
    where: Optional[Callable[[Any], bool]] = None


@dataclasses.dataclass
class FakeInstance:
    instance_id: str
    vm_name: str
    location: Location
    offer_id: Optional[str]
    tags: Dict[str, str]
    profile: BootProfile
    host: str
    listed: int = 0                 # listings in the current phase
    deleting: bool = False
    fixed_status: Optional[str] = None
    fixed_reason: Optional[str] = None

    def status(self, gone_after: Optional[int]) -> Tuple[Optional[str], Optional[str], bool]:
        """(status, reason, usable endpoint) for the next listing; None status = gone."""
        if self.deleting:
            if gone_after is not None and self.listed >= gone_after:
                return None, None, False
            return Status.TERMINATING, None, False
        if self.fixed_status is not None:
            return self.fixed_status, self.fixed_reason, self.fixed_status == Status.RUNNING
        pending = self.profile.pending
        if pending is None or self.listed < pending:
            return Status.PENDING, None, False
        return self.profile.then, self.profile.reason, self.profile.endpoint


class ScriptedProvider(Provider):
    """In-memory fake cloud ``cloud`` driven by a per-test script (see the module doc)."""

    def __init__(self, cloud: str = "fake", offers: Optional[List[Offer]] = None,
                 boot_observes: int = 1, gone_after: Optional[int] = 1,
                 poll_interval_s: float = 5.0, boot_timeout_s: float = 120.0,
                 plan_error: Optional[ProviderError] = None, readiness_poll_first_s: Optional[float] = None):
        super().__init__({})
        self.name = cloud
        self.cloud = cloud
        self.offers: List[Offer] = list(offers or [])
        self.boot_observes = boot_observes
        self.gone_after = gone_after
        self._caps = Capabilities(poll_interval_s=poll_interval_s, boot_timeout_s=boot_timeout_s,
                                  readiness_poll_first_s=readiness_poll_first_s)
        self.rules: List[Rule] = []
        self.profiles: List[BootProfile] = []
        self.calls: collections.Counter = collections.Counter()
        self.checks: collections.Counter = collections.Counter()
        self.log: List[Tuple] = []
        self.instances: Dict[str, FakeInstance] = {}   # live (not yet gone), by id
        self.gone: List[str] = []                       # ids that went away, in order
        self.created: List[str] = []                    # ids made by create, in order
        self.side: Dict[Tuple[str, str], str] = {}      # (vm name, location) -> security group id
        self.side_removed: List[str] = []
        self._serial = 0
        if plan_error is not None:
            self.fail("plan", plan_error, times=None)

    # -- the script --------------------------------------------------------------------
    def fail(self, op: str, error: ProviderError, times: Optional[int] = 1,
             where: Optional[Callable[[Any], bool]] = None, after: bool = False) -> Rule:
        """Make the next ``times`` calls of ``op`` (whose subject matches ``where``) raise
        ``error``; with ``after=True`` the effect happens first (a lost response)."""
        assert op in PRIMITIVES + CHECKS, op
        rule = Rule(op, error, times, where, after)
        self.rules.append(rule)
        return rule

    def script(self, op: str, action: Callable[..., Any], times: Optional[int] = 1,
               where: Optional[Callable[[Any], bool]] = None) -> Rule:
        """Replace the effect of the next ``times`` matching calls of ``op`` by
        ``action(*args)``; its return value is the primitive's result."""
        assert op in PRIMITIVES + CHECKS, op
        rule = Rule(op, action, times, where)
        self.rules.append(rule)
        return rule

    def boot(self, pending: Optional[int] = 1, then: str = Status.RUNNING, reason: Optional[str] = None,
             endpoint: bool = True, times: Optional[int] = None,
             where: Optional[Callable[[Any], bool]] = None) -> BootProfile:
        """How the next ``times`` instances created from offers matching ``where`` boot."""
        profile = BootProfile(pending, then, reason, endpoint, times, where)
        self.profiles.append(profile)
        return profile

    def clear(self) -> None:
        """Disarm every scripted outcome and boot profile (the cloud recovered)."""
        self.rules.clear()
        self.profiles.clear()

    def _consult(self, op: str, subject: Any):
        for rule in self.rules:
            if rule.matches(op, subject):
                if rule.times is not None:
                    rule.times -= 1
                rule.fired += 1
                return rule
        return None

    def _call(self, op: str, subject: Any, effect: Callable[[], Any], *args: Any) -> Any:
        self.calls[op] += 1
        rule = self._consult(op, subject)
        if rule is None:
            return effect()
        if isinstance(rule.action, BaseException):
            if rule.after:
                effect()
            raise rule.action
        return rule.action(*args)

    # -- levers and views for tests ----------------------------------------------------
    def spawn(self, vm_name: str, location: Location, status: str = Status.RUNNING,
              tags: Optional[Dict[str, str]] = None) -> str:
        """An instance made behind the core's back (a lost create, another run)."""
        inst = self._new_instance(vm_name, location, None, BootProfile(pending=0), tags)
        if status != Status.RUNNING:
            inst.fixed_status = status
        return inst.instance_id

    def set_status(self, instance_id: str, status: str, reason: Optional[str] = None) -> None:
        inst = self.instances[instance_id]
        inst.fixed_status, inst.fixed_reason = status, reason

    def vanish(self, instance_id: str) -> None:
        """The instance goes away out of band (preempted, deleted in the console)."""
        del self.instances[instance_id]
        self.gone.append(instance_id)

    def live(self, vm_name: Optional[str] = None, location: Optional[Location] = None) -> List[FakeInstance]:
        return [i for i in self.instances.values()
                if (vm_name is None or i.vm_name == vm_name) and (location is None or i.location == location)]

    def side_resources(self, vm_name: Optional[str] = None) -> Dict[Tuple[str, str], str]:
        return {k: v for k, v in self.side.items() if vm_name is None or k[0] == vm_name}

    def leaks(self, vm_name: Optional[str] = None, keep: Optional[str] = None) -> Dict[str, Any]:
        """What is left for ``vm_name`` besides instance ``keep`` and its location's side resource."""
        keep_loc = str(self.instances[keep].location) if keep in self.instances else None
        return {
            "instances": sorted(i.instance_id for i in self.live(vm_name) if i.instance_id != keep),
            "side": sorted(v for (name, loc), v in self.side_resources(vm_name).items() if loc != keep_loc),
        }

    def by_host(self, host: str) -> Optional[FakeInstance]:
        return next((i for i in self.instances.values() if i.host == host), None)

    def ops(self, op: str) -> List[Tuple]:
        """Logged arguments of every call of ``op``, in order."""
        return [entry[1:] for entry in self.log if entry[0] == op]

    # -- the contract ------------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        return self._caps

    def _check(self, op: str) -> None:
        self.checks[op] += 1
        rule = self._consult(op, None)
        if rule is not None:
            if isinstance(rule.action, BaseException):
                raise rule.action
            rule.action()

    def check_credentials(self) -> None:
        self._check("check_credentials")

    def verify_credentials(self) -> None:
        self._check("verify_credentials")

    def plan(self, request: ResourceRequest) -> List[Offer]:
        self.log.append(("plan", request.vm_name))
        return self._call("plan", request, lambda: [Offer.from_dict(o.to_dict()) for o in self.offers], request)

    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        self.log.append(("prepare", offer.offer_id))
        self._check_offer(offer)

        def effect():
            key = (spec.vm_name, str(offer.location))
            if key not in self.side:
                self._serial += 1
                self.side[key] = "sg-%s-%04d" % (self.cloud, self._serial)
            return {"security_group": self.side[key], "offer": offer.offer_id}
        return self._call("prepare", offer, effect, offer, spec)

    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        self.log.append(("create", offer.offer_id))
        self._check_offer(offer)

        def effect():
            key = (spec.vm_name, str(offer.location))
            if self.side.get(key) != prepared.get("security_group"):
                # A real cloud rejects a launch into a security group that does not exist.
                raise ProviderError(ErrorKind.INVALID_REQUEST, "security group %s does not exist"
                                    % prepared.get("security_group"))
            inst = self._new_instance(spec.vm_name, offer.location, offer.offer_id, self._profile_for(offer),
                                      self.identity_tags(spec.vm_name))
            self.created.append(inst.instance_id)
            return inst.instance_id
        return self._call("create", offer, effect, offer, prepared, spec)

    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        self.log.append(("observe", str(location)))
        self._check_location(location)

        def effect():
            found = []
            for inst in list(self.instances.values()):
                if inst.location != location or inst.tags.get(VM_NAME_TAG) != vm_name:
                    continue
                status, reason, usable = inst.status(self.gone_after)
                inst.listed += 1
                if status is None:
                    self.vanish(inst.instance_id)
                    continue
                endpoint = SshEndpoint(inst.host, 22, "ubuntu") if usable else None
                found.append(Observed(inst.instance_id, status, reason, endpoint, location,
                                      journal_id=inst.tags.get(JOURNAL_ID_TAG)))
            return found
        return self._call("observe", location, effect, location, vm_name)

    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        self.log.append(("delete", str(location), tuple(instance_ids)))
        self._check_location(location)

        def effect():
            for iid in instance_ids:
                inst = self.instances.get(iid)
                if inst is None or inst.location != location:
                    continue  # unknown or already deleted: success
                if not inst.deleting:
                    inst.deleting, inst.listed = True, 0
                    if self.gone_after == 0:
                        self.vanish(iid)
        return self._call("delete", location, effect, location, vm_name, instance_ids)

    def cleanup(self, location: Location, vm_name: str) -> None:
        self.log.append(("cleanup", str(location)))
        self._check_location(location)

        def effect():
            # Only this journal's instances use this journal's security group.
            if [i for i in self.live(vm_name, location) if i.tags.get(JOURNAL_ID_TAG) in (None, self.journal_id)]:
                raise ProviderError(ErrorKind.TRANSIENT, "security group of %s at %s is still in use"
                                    % (vm_name, location))
            sg = self.side.pop((vm_name, str(location)), None)
            if sg:
                self.side_removed.append(sg)
        return self._call("cleanup", location, effect, location, vm_name)

    # -- internals ---------------------------------------------------------------------
    def _check_offer(self, offer: Offer) -> None:
        assert offer.cloud == self.cloud, "offer %s routed to the %s fake" % (offer.offer_id, self.cloud)

    def _check_location(self, location: Location) -> None:
        assert location.cloud == self.cloud, "location %s routed to the %s fake" % (location, self.cloud)

    def _profile_for(self, offer: Offer) -> BootProfile:
        for profile in self.profiles:
            if profile.times != 0 and (profile.where is None or profile.where(offer)):
                if profile.times is not None:
                    profile.times -= 1
                return profile
        return BootProfile(pending=self.boot_observes)

    def _new_instance(self, vm_name: str, location: Location, offer_id: Optional[str],
                      profile: BootProfile, tags: Optional[Dict[str, str]]) -> FakeInstance:
        self._serial += 1
        iid = "%s-i-%04d" % (self.cloud, self._serial)
        inst = FakeInstance(iid, vm_name, location, offer_id,
                            dict(tags) if tags is not None else {VM_NAME_TAG: vm_name},
                            profile, "%s.%s.test" % (iid, self.cloud))
        self.instances[iid] = inst
        return inst


class NoOffersCloud(ScriptedProvider):
    """Built the way the registry builds adapters: a cloud with no capacity anywhere,
    so a retry_until_up search never ends by itself."""

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        super().__init__("nooffers", [])
        self.journal_id = journal_id


class FakeClock:
    """Monotonic time that only moves when a test (or a wait) moves it."""

    def __init__(self, start: float = 1000.0):
        self.now = start
        self.waits: List[float] = []
        self.on_wait: Optional[Callable[[float], None]] = None
        self.max_waits = 20000

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def wait(self, seconds: float) -> bool:
        """Executor.run's wait_poll: advance instead of sleeping; False = not cancelled."""
        self.waits.append(seconds)
        assert len(self.waits) <= self.max_waits, "the machine kept waiting: %d waits" % len(self.waits)
        if self.on_wait is not None:
            self.on_wait(seconds)
        self.advance(max(0.0, seconds))
        return False


class FakeSsh:
    """The ssh_check callable: returns a fingerprint per host, or raises what the test
    scripted for that host (an exception instance, or a callable returning one/None)."""

    def __init__(self):
        self.calls: List[Tuple[str, int, Optional[str], str]] = []
        self.failures: Dict[str, Any] = {}
        self.default: Any = None

    def fail(self, host: str, error: Any) -> None:
        self.failures[host] = error

    def __call__(self, endpoint: SshEndpoint, alias: str) -> str:
        self.calls.append((endpoint.host, endpoint.port, endpoint.user, alias))
        error = self.failures.get(endpoint.host, self.default)
        if callable(error) and not isinstance(error, BaseException):
            error = error(endpoint)
        if error is not None:
            raise error
        return "SHA256:fp-%s" % endpoint.host


class World:
    """One VM name, its fakes, a tmp journal and a fake clock: runs the REAL executor
    with the real launch / teardown machines, as the vm action does, minus SSH files."""

    def __init__(self, tmp_path, providers: List[ScriptedProvider], clouds: Optional[List[str]] = None,
                 vm_name: str = "vm1", **settings: Any):
        # Imported here so that the provider fake alone needs only the contract.
        from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal import Journal
        from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmContext, VmSettings

        self.clock = FakeClock()
        self.journal = Journal(str(tmp_path / "journal.sqlite"), clock=self.clock)
        for provider in providers:
            provider.journal_id = self.journal.journal_id
        self.ssh = FakeSsh()
        self.providers = {p.cloud: p for p in providers}
        defaults = dict(ssh_timeout=20.0, teardown_timeout=60.0, step_attempts=5, teardown_attempts=3,
                        exhausted_wait=30.0)
        defaults.update(settings)
        self.settings = VmSettings(
            vm_name=vm_name, clouds=list(clouds or self.providers),
            request=ResourceRequest(vm_name=vm_name, gpu="H100"),
            spec=InstanceSpec(vm_name=vm_name, ssh_public_key="ssh-ed25519 AAAAC3Nza test@ctl", ssh_user="ubuntu"),
            **defaults)
        self.ctx = VmContext(self.settings, files=None, ssh_check=self.ssh, providers=dict(self.providers),
                             journal_id=self.journal.journal_id)
        self.name = vm_name

    def executor(self, machine, before_commit=None, cancel=None):
        import random
        from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.executor import CancelToken, Executor
        from ansible_collections.gpuprov.cloud.tests.fakes.commit_hook import with_commit_hook
        return Executor(with_commit_hook(self.journal, before_commit), machine, clock=self.clock,
                        cancel=cancel or CancelToken(self.clock), rng=random.Random(7), heartbeat=False)

    def launch(self, before_commit=None, cancel=None):
        from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch
        ex = self.executor(launch.LaunchMachine(self.ctx), before_commit, cancel)
        return ex.run(self.name, launch.initial, wait_poll=self.clock.wait)

    def down(self, targets: Optional[List[Dict[str, Any]]] = None, before_commit=None, cancel=None):
        """Run the teardown machine as ``down`` does (targets from the journalled state),
        or on explicit ``targets`` (teardown.target dicts)."""
        from ansible_collections.gpuprov.cloud.plugins.module_utils.vm import launch, teardown
        ex = self.executor(teardown.TeardownMachine(self.ctx), before_commit, cancel)

        def initial(prev, kind):
            found = targets if targets is not None else launch.owned_targets(prev, kind)
            return teardown.initial(self.name, found, "down requested")
        return ex.run(self.name, initial, wait_poll=self.clock.wait)

    def row(self):
        return self.journal.load(self.name)

    def events(self) -> List[Dict[str, Any]]:
        return self.journal.events(self.name)

    def transitions(self, since_begin: bool = False) -> List[Tuple[str, str]]:
        """(from kind, to kind) of every committed transition (labels cut to their kind)."""
        events = self.events()
        if since_begin:
            starts = [i for i, e in enumerate(events) if e["event"] == "begin"]
            events = events[starts[-1]:] if starts else events
        return [(kind_of(e["from"]), kind_of(e["to"])) for e in events if e["event"] == "transition"]

    def path(self, since_begin: bool = False) -> List[str]:
        """The labels (cut to their kind) the key went through, starting state included."""
        events = self.events()
        if since_begin:
            starts = [i for i, e in enumerate(events) if e["event"] == "begin"]
            events = events[starts[-1]:] if starts else events
        out = []
        for e in events:
            if e["event"] in ("begin", "transition"):
                out.append(kind_of(e["to"]))
        return out

    def leaks(self, keep: Optional[str] = None) -> Dict[str, Dict[str, Any]]:
        return {cloud: p.leaks(self.name, keep) for cloud, p in self.providers.items()}

    def assert_clean(self, keep: Optional[str] = None) -> None:
        """Nothing of the VM is left anywhere, besides instance ``keep`` (and its location's
        side resource)."""
        left = {c: leak for c, leak in self.leaks(keep).items() if leak["instances"] or leak["side"]}
        assert not left, "resources left behind: %r" % left


def kind_of(label: Optional[str]) -> str:
    """'Preparing (offer 1 of 2: ...)' -> 'Preparing'; 'Compensating/Requesting' stays."""
    return (label or "").split(" ")[0]
