# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The provider contract: what every cloud adapter implements and returns.

Adapters are short files of primitives (plan / prepare / create / observe /
delete / cleanup) that classify every failure as a ProviderError. They do no
waiting of their own: the launch and teardown machines do all polling, retrying,
blocking and compensation. ``Provider``'s docstring lists, with their bounds, the
few things one call may still hold: an SDK's retries of a read, one listing's
pagination, one server-side operation wait, a fixed list of zones tried once each.

Everything here is plain data that round-trips through JSON, because offers,
locations and prepared state travel inside journalled machine states.
"""

from __future__ import annotations

import abc
import dataclasses
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

# The contract's parts kept in modules of their own, re-exported: adapters import all of it from here.
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.capabilities import (
    ApiLimit, Capabilities, K3sAccess, PowerOffBilling,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.provider_errors import (
    DEFAULT_BLOCK_SCOPE, BlockScope, ErrorKind, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.records import Record as _Record

# Everything adapters and the core take from the contract, re-exported parts included.
__all__ = (
    "ApiLimit",
    "ANY_REGION",
    "BlockScope",
    "BootScript",
    "Capabilities",
    "DEFAULT_BLOCK_SCOPE",
    "ErrorKind",
    "GPUPROV_TAG_PREFIX",
    "InstanceSpec",
    "JOURNAL_ID_TAG",
    "K3sAccess",
    "Location",
    "Observed",
    "Offer",
    "Owned",
    "PowerOffBilling",
    "Provider",
    "ProviderError",
    "ResourceKind",
    "ResourceRequest",
    "SDK_READ_ATTEMPTS",
    "SDK_READ_RETRY_S",
    "SshEndpoint",
    "Status",
    "VM_NAME_TAG",
    "tag_changes",
    "validate_vm_name",
)

# The tag/label every resource of a VM carries; observe, crash adoption and the
# orphan sweep find resources by it.
VM_NAME_TAG = "gpuprov-vm-name"
# The tag/label naming the journal that made a resource (its ``journal_id``). Adoption,
# teardown and cleanup take only resources carrying their own journal's id (or none:
# resources made before journal ids existed stay adoptable by name).
JOURNAL_ID_TAG = "gpuprov-journal-id"
# Every tag/label name gpuprov writes starts so (the identity and what adapters add); user tags may not.
GPUPROV_TAG_PREFIX = "gpuprov-"

# The most an SDK's own retries of one read may hold a primitive call (Provider, "No waiting"):
# small beside the core's own budget for a Transient state (five attempts, eight in a teardown,
# with 1 s to 30 s of backoff between them), which alone decides when to give up.
SDK_READ_ATTEMPTS = 3
SDK_READ_RETRY_S = 30

# DNS label: lowercase letters, digits and '-', 1..63, not starting/ending with '-'.
_VM_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def validate_vm_name(name: Any) -> str:
    """Return ``name`` if it is a DNS label, else raise InvalidRequest naming the field."""
    if not isinstance(name, str) or not _VM_NAME_RE.match(name):
        raise ProviderError(
            ErrorKind.INVALID_REQUEST,
            "name: expected a DNS label (1-63 characters of a-z, 0-9 and '-', "
            "starting and ending with a letter or digit), got %r" % (name,),
        )
    return name


class Status:
    """Normalised instance status."""

    PENDING = "Pending"
    RUNNING = "Running"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    TERMINATING = "Terminating"
    FAILED = "Failed"

    ALL = (PENDING, RUNNING, STOPPING, STOPPED, TERMINATING, FAILED)


@dataclasses.dataclass(frozen=True)
class Location(_Record):
    cloud: str
    region: str
    zone: Optional[str] = None

    def __str__(self) -> str:
        return "/".join(p for p in (self.cloud, self.region, self.zone) if p)


@dataclasses.dataclass(frozen=True)
class SshEndpoint(_Record):
    host: str
    port: int = 22
    user: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Observed(_Record):
    instance_id: str
    status: str
    reason: Optional[str] = None      # set with Status.FAILED (and useful otherwise)
    endpoint: Optional[SshEndpoint] = None
    location: Optional[Location] = None
    # The JOURNAL_ID_TAG the instance carries; None for an instance made before journal ids.
    journal_id: Optional[str] = None
    # Why a FAILED or STOPPED instance is so, classified (ErrorKind, BlockScope), where the cloud says:
    # a create it accepted and then refused (no hosts, a quota). The core blocks offers by them; unset, a
    # failed boot blocks only its offer.
    error_kind: Optional[str] = None
    error_block: Optional[str] = None

    @property
    def usable(self) -> bool:
        """Booted from the core's point of view: Running with an SSH endpoint."""
        return self.status == Status.RUNNING and self.endpoint is not None

    @property
    def leaving(self) -> bool:
        """On its way out: a delete needs no repeating."""
        return self.status in (Status.TERMINATING, Status.STOPPING)

    @property
    def live(self) -> bool:
        """Booting or running: worth adopting (neither leaving, stopped nor failed)."""
        return self.status in (Status.PENDING, Status.RUNNING)

    def owned_by(self, journal_id: Optional[str]) -> bool:
        """True when this journal may adopt or delete it: its own id, or no id (legacy)."""
        return self.journal_id is None or self.journal_id == journal_id

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Observed":
        # Every field by name (a field added later comes back too); the nested records as records.
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        endpoint, location = data.get("endpoint"), data.get("location")
        values["endpoint"] = SshEndpoint.from_dict(endpoint) if endpoint else None
        values["location"] = Location.from_dict(location) if location else None
        return cls(**values)


class ResourceKind:
    """What an ``Owned`` resource is. Instances bill by the hour; the rest are the side
    resources ``prepare`` makes (and ``cleanup`` removes)."""

    INSTANCE = "instance"
    SECURITY_GROUP = "security_group"   # AWS security groups
    FIREWALL = "firewall"               # GCP firewall rules, DO/Lambda firewalls, Hyperstack rules
    SSH_KEY = "ssh_key"                 # registered key pairs / SSH keys
    ENVIRONMENT = "environment"         # Hyperstack environments
    OTHER = "other"

    ALL = (INSTANCE, SECURITY_GROUP, FIREWALL, SSH_KEY, ENVIRONMENT, OTHER)


# The region of a location meaning "every region": the location ``list_owned`` is asked
# about on clouds whose listing is global (one call lists every region's resources).
ANY_REGION = "*"


@dataclasses.dataclass(frozen=True)
class Owned(_Record):
    """One resource carrying gpuprov's identity, as ``Provider.list_owned`` finds it.

    ``vm_name`` and ``journal_id`` are what its tags/labels/name say (None when absent:
    ``journal_id`` None is a resource made before journal ids, "legacy"). ``location`` is
    where it really is (never ``ANY_REGION``). ``status`` is an instance's normalised
    ``Status`` (None for side resources); ``price_per_hour`` is the vendor's hourly price in
    USD where the listing says it, else None (never guessed)."""

    kind: str
    resource_id: str
    location: Location
    vm_name: Optional[str] = None
    journal_id: Optional[str] = None
    status: Optional[str] = None
    price_per_hour: Optional[float] = None
    name: Optional[str] = None        # the vendor-side display name, when it has one

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Owned":
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["location"] = Location.from_dict(data["location"])
        return cls(**values)


@dataclasses.dataclass
class Offer(_Record):
    """One way to satisfy a request; ``detail`` is adapter-private and persisted."""

    cloud: str
    region: str
    instance_type: str
    zone: Optional[str] = None
    gpu: Optional[str] = None
    gpu_count: int = 0
    price_per_hour: Optional[float] = None
    spot: bool = False
    available: bool = True
    unavailable_reason: Optional[str] = None
    detail: Dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def location(self) -> Location:
        return Location(self.cloud, self.region, self.zone)

    @property
    def offer_id(self) -> str:
        zone = (":" + self.zone) if self.zone else ""
        return "%s:%s:%s%s" % (self.cloud, self.region, self.instance_type, zone)


@dataclasses.dataclass
class ResourceRequest(_Record):
    vm_name: str
    gpu: Optional[str] = None     # canonical GPU name, None = no GPU needed
    gpu_count: int = 1
    regions: List[str] = dataclasses.field(default_factory=list)  # empty = adapter default
    spot: bool = False


@dataclasses.dataclass
class BootScript(_Record):
    """A shell script plus environment, rendered natively by each adapter."""

    script: str
    env: Dict[str, str] = dataclasses.field(default_factory=dict)

    def to_shell(self) -> str:
        """The script with its environment exported first (for startup-script clouds)."""
        lines = [self.script.split("\n", 1)[0]] if self.script.startswith("#!") else ["#!/bin/sh"]
        body = self.script.split("\n", 1)[1] if self.script.startswith("#!") else self.script
        for key in sorted(self.env):
            lines.append("export %s=%s" % (key, _shell_quote(self.env[key])))
        lines.append(body)
        return "\n".join(lines)


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def tag_changes(current: Dict[str, str], tags: Dict[str, str], purge: bool,
                keep: Callable[[str], bool]) -> Dict[str, Any]:
    """What ``retag`` changes: the ``tags`` whose value differs from ``current``, and with ``purge``
    the names of ``current`` not in ``tags`` for which ``keep`` (gpuprov's and the cloud's own) is false."""
    removed = sorted(k for k in current if purge and k not in tags and not keep(k))
    return {"set": {k: v for k, v in tags.items() if current.get(k) != v}, "removed": removed}


@dataclasses.dataclass
class InstanceSpec(_Record):
    vm_name: str
    ssh_public_key: str
    ssh_user: Optional[str] = None          # None = the image's default user
    boot_script: Optional[BootScript] = None
    open_ports: List[int] = dataclasses.field(default_factory=lambda: [22])
    allowed_cidrs: List[str] = dataclasses.field(default_factory=list)  # empty = controller address
    spot: bool = False
    # The user's tags/labels (the ``tags`` option): on every resource, under the identity tags (Provider.resource_tags).
    tags: Dict[str, str] = dataclasses.field(default_factory=dict)
    # The VM's watchdog powers it off at its deadline (issue 27): where the create request can say so
    # (Capabilities.poweroff_setting), a guest power-off then ends more billing: AWS terminates the instance
    # (InstanceInitiatedShutdownBehavior=terminate) instead of leaving it stopped and billing disks, Nebius stops it
    # (recovery_policy=FAIL) instead of rebooting it and billing on.
    terminate_on_guest_shutdown: bool = False

    @property
    def labels(self) -> Dict[str, str]:
        return {VM_NAME_TAG: self.vm_name}

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "InstanceSpec":
        data = dict(data)
        if data.get("boot_script"):
            data["boot_script"] = BootScript.from_dict(data["boot_script"])
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


class Provider(abc.ABC):
    """The contract every cloud adapter implements: six primitives and its capabilities.

    An adapter is a small package of primitives (SkyPilot's ``sky/provision/<cloud>/`` is
    the shape; dstack's ``Compute`` the model for this contract). The core (the launch and
    teardown machines, ``vm/``) owns every wait, retry, failover and compensation; an
    adapter does none of them beyond the little one call may hold, listed below. For every
    primitive:

    * **No waiting, no retrying.** A primitive sends each request once and returns or
      raises: it never sleeps, polls, or sends a request again hoping for another answer.
      One call may hold these, and nothing more:

      - *An SDK's own retries of an idempotent read* (a get, a list, a describe), bounded by
        a count of attempts (at most ``SDK_READ_ATTEMPTS``) or a total time of retrying (at
        most ``SDK_READ_RETRY_S`` seconds): AWS, botocore's standard mode with 3 attempts;
        GCP, google-api-core on 503/504 for ``read_retry_s`` (default 20 s, at most 30 s).
        Then the error, classified, goes to the core. A request that can change anything
        is never retried by the SDK: AWS sends it through its fail-fast client (one
        attempt), GCP with ``retry=None``, Nebius with ``retries=1``; rest.py retries nothing.
      - *One listing's pagination*, followed to its end (paging.py ends it at a page or
        token seen before, and at its page cap).
      - *One server-side wait* for the Operation of a mutation whose refusal the API
        reports only on that Operation (GCP: ``zoneOperations.wait`` after
        ``instances.insert``, ``globalOperations.wait`` after a firewall insert or patch): one
        request, which the server answers when the operation is done or at its own deadline
        (about two minutes; ``operation_timeout_s`` on the client), at most one per primitive
        call and never repeated; an operation still running after it is Transient. Without it
        a zone's stock-out or a quota would show only as an instance that is never listed,
        given up as vanished a minute later and blocked at the wrong scope.
      - *One request per resource*: delete one per instance id it was given, cleanup one per
        side resource it finds. (The local cloud's delete looks for its processes twice, without
        waiting between: a shell signalled in the first look may just have forked sshd.)
      - *A fixed list of alternatives, each tried once, going on only past a refusal that
        made nothing*: AWS ``create`` sends one RunInstances per subnet ``prepare`` listed (the
        default subnet of each zone offering the type, in zone order) and moves to the next
        only past a zone-capacity refusal; any other outcome ends the call. Why that never
        makes two instances is in the AWS adapter's ``create``.
      - *A request refused before the vendor acted on it, once more after refreshing the
        credential*: rest.py after a 401 with a token that can be renewed; the Nebius SDK after
        UNAUTHENTICATED, with its renewed IAM token.

      The conformance suite makes ``time.sleep`` raise inside every primitive (an SDK's read
      retries sleep only after an error), greps every adapter package for ``while True`` and
      ``sleep(``, and checks that create sends one creating request and never sends a refused
      one again.
    * **Classified failures only.** Every failure is a ``ProviderError`` whose ``ErrorKind``
      drives the core: Transient (retried with backoff), Capacity / Quota / Unavailable /
      Failed (fail over, blocking the offer, region or cloud as ``block`` says), and
      InvalidRequest (abort) and Credentials (never retried: the whole cloud is left and
      the search goes on). An SDK exception, a traceback or a bare
      ``Exception`` escaping is a bug. A call whose outcome is unknown (a timeout after the
      request was sent) is Transient: the core observes before it repeats anything.
    * **Identity.** Everything a primitive makes carries ``identity_tags(vm_name)``: the VM
      name and this adapter's ``journal_id``. The core finds, adopts and deletes by them, so
      a crash between a create and its journal commit never duplicates a VM.
    * **Plain data.** Arguments and results round-trip through JSON: they travel inside
      journalled machine states and a later run (another process) reads them back.
    * **Secrets.** Credentials come from ``options`` (their names listed in
      ``secret_options``) and never appear in a message, a result or a log line.
    """

    name = "abstract"
    # Options that are credentials: never journalled (the rest are, so that later steps
    # such as ``down`` reach the VM where it was made).
    # The request limits the vendor documents per account (ApiLimit, each with its page): the core paces the
    # requests of every worker on one account under them, together (fleet/gate.py). Empty: none documented; a
    # throttle answer still holds the whole fleet.
    api_limits: Tuple[ApiLimit, ...] = ()
    secret_options: Tuple[str, ...] = ()

    def __init__(self, options: Optional[Dict[str, Any]] = None, journal_id: Optional[str] = None):
        self.options = dict(options or {})
        # The id of the journal this adapter works for: prepare/create tag every resource
        # with it (JOURNAL_ID_TAG); cleanup removes only side resources carrying it or none.
        self.journal_id = journal_id
        # How ``remembered`` lookups are shared with the fleet (fleet/gate.py); None: each is read.
        self.lookups: Optional[Callable[[str, List[Any], Callable[[], Any]], Any]] = None
        # What ``paced`` calls before each request: the fleet's pacing under ``api_limits`` (fleet/gate.py).
        self.pacer: Optional[Callable[[], None]] = None

    def paced(self) -> None:
        """Called by the adapter's HTTP client before every request it sends (``RestClient(before_send=...)``,
        a botocore ``before-send`` handler): the core keeps the fleet's requests on one account under the
        vendor's ``api_limits`` there, and may make the step wait. Nothing happens without a pacer."""
        if self.pacer is not None:
            self.pacer()

    def remembered(self, what: str, parts: List[Any], read: Callable[[], Any]) -> Any:
        """``read()``: a read-only lookup whose answer (JSON: lists, not tuples) depends only on ``what``,
        ``parts`` and this adapter's options and account, such as the image or default subnets of a region
        that prepare needs. The core may share its answer with the fleet for a while (``lookups``, set by
        fleet/gate.py); never for anything that names or depends on one VM."""
        if self.lookups is None:
            return read()
        return self.lookups(what, parts, read)

    def identity_tags(self, vm_name: str) -> Dict[str, str]:
        """The tags/labels every resource of ``vm_name`` carries."""
        tags = {VM_NAME_TAG: vm_name}
        if self.journal_id:
            tags[JOURNAL_ID_TAG] = self.journal_id
        return tags

    def resource_tags(self, spec: "InstanceSpec") -> Dict[str, str]:
        """The tags/labels of a resource made for ``spec``: the user's (``spec.tags``) merged with the
        identity tags, which win (a user tag can never pass for another VM or journal). A user tag in
        gpuprov's namespace (``gpuprov-*``, which request_params refuses) is left out, so that a tag an
        adapter adds of its own (``gpuprov-ssh-user``, ...) is never sent twice or overridden."""
        user = {k: v for k, v in (spec.tags or {}).items() if not k.lower().startswith(GPUPROV_TAG_PREFIX)}
        return dict(user, **self.identity_tags(spec.vm_name))

    # Whether ``retag`` can change the user tags of an existing instance (the ``tags`` option on a kept VM).
    can_retag = False

    # Whether plan matches a request's ``regions`` ignoring case (see offer_places).
    regions_fold = False

    def offer_places(self, offer: "Offer") -> List[str]:
        """Every name by which plan takes ``offer`` to answer a request's ``regions`` (default: its region
        and its zone). A VM made on the offer keeps these in its journalled record, and a later run judges
        its ``regions`` by them exactly as plan would (``regions_fold``: ignoring case): a request plan
        would meet with this offer never reads as a mismatch, which ``recreate`` would answer by
        destroying the VM on every run. Pure: no API call."""
        return [name for name in (offer.region, offer.zone) if name]

    def retag(self, location: Location, vm_name: str, instance_id: str, tags: Dict[str, str], purge: bool,
              check: bool = False) -> Dict[str, Any]:
        """Give instance ``instance_id`` of ``vm_name`` the user tags ``tags`` (and, with ``purge``, drop
        the other user tags it carries; gpuprov's own and the cloud's reserved ones always stay).
        Returns ``{"set": {name: value}, "removed": [name]}``, both empty when nothing changes;
        ``check`` computes it without changing anything. One call per resource of the VM, no wait.
        Only where ``can_retag``."""
        raise ProviderError(ErrorKind.INVALID_REQUEST, "tags: the %s cloud cannot change the tags of an existing VM"
                            % self.name)

    def capabilities(self) -> Capabilities:
        """What this cloud can do (k3s, boot scripts, spot, k3s access), and its pace
        (boot timeout, poll interval). Pure: no API call."""
        return Capabilities()

    def check_credentials(self) -> None:
        """Raise Credentials (block CLOUD) when this controller has no credentials for the
        cloud, as far as can be told here; return None when it has some or cannot tell.

        The core calls it before planning the cloud (the launch, check mode, ``offers``), so
        that a cloud without credentials is left at once, with no retry and nothing to
        compensate. The message names the cloud, the options and the environment variables
        that would provide them (``options.Credentials.message``).

        May: read the options, the environment and local files (what the SDK's own
        credential chain reads: ``~/.aws/credentials``, the gcloud ADC file). Must not: make
        a network call (an instance-metadata service is one: where only it could answer,
        return None), write anything, or put a credential in the message. Idempotent and
        cheap. The default checks nothing; ``TypedOptionsProvider`` reads the cloud's
        declared ``Credentials``."""
        return None

    def verify_credentials(self) -> None:
        """At most one read-only call asking the cloud whether it accepts the credentials,
        for a cloud whose ``plan`` makes no call (a static catalog), so that a preview
        (``offers``, check mode) can say the offers are unavailable while a real run would be
        refused. Raises Credentials when refused, Transient when the cloud does not answer.

        Must not: change anything, wait or retry, or run without ``check_credentials``
        having passed. The default makes no call: ``plan``'s own calls tell."""
        return None

    @abc.abstractmethod
    def plan(self, request: ResourceRequest) -> List[Offer]:
        """The offers that could satisfy ``request``, best first, from the vendor's live
        catalog where it has one (instance types x regions/zones, with prices).

        May: read catalogs, availability and prices. Must not: create, reserve or change
        anything. Offers that exist but have no capacity now come back with
        ``available=False`` and the vendor's reason. Raises InvalidRequest when no offer of
        this cloud can ever meet the request (a GPU it does not have), Credentials when it
        cannot authenticate, Transient when the API does not answer.
        The offers must not depend on ``request.vm_name`` (only checked): the fleet shares one plan of a
        request shape among its VMs (fleet/gate.py). Idempotent: read-only."""

    @abc.abstractmethod
    def prepare(self, offer: Offer, spec: InstanceSpec) -> Dict[str, Any]:
        """Make or reuse what ``create`` needs at the offer's location besides the
        instance: a security group or firewall rule scoped to ``spec.allowed_cidrs``, a
        registered SSH key, an image, a network. Returns plain data for ``create``.

        Must not: create the instance, or anything that bills by the hour. Everything it
        makes carries the identity tags, so ``cleanup`` alone removes it.
        Idempotent: calling it twice makes nothing new and returns an equal result."""

    @abc.abstractmethod
    def create(self, offer: Offer, prepared: Dict[str, Any], spec: InstanceSpec) -> str:
        """Request one instance of the offer, tagged with the identity, and return its id
        without waiting for it to boot.

        One creating request to the vendor where the API allows it (AWS: one per zone it
        tries, see "No waiting"), plus at most one server-side wait for its Operation. No
        request is sent twice within the call: a refusal is raised. If it takes several steps
        (write a record, then start), ``observe`` must tell the truth after a crash between
        any two of them: report what exists, as Pending/Running when it will come up, or
        Failed when it never will (the core then deletes it and creates afresh).
        Raises Capacity / Quota / Unavailable for a refusal the next offer may not get,
        Transient when the outcome is unknown.
        Not idempotent by itself: the core always observes before it calls create again."""

    @abc.abstractmethod
    def observe(self, location: Location, vm_name: str) -> List[Observed]:
        """Every instance at ``location`` carrying the VM name, whatever its journal id,
        each with its normalised status, its SSH endpoint once it has one, and the journal
        id it carries (``Observed.journal_id``; None for resources made before journal ids).
        Instances fully gone are omitted.

        May: list with filters, following one listing's pages (the SDK's bounded read retries
        included). Must not: change anything. The
        core decides what it may adopt or delete (``Observed.owned_by``).
        Idempotent: read-only."""

    def observe_all(self, location: Location) -> Optional[List[Observed]]:
        """Every instance at ``location`` that carries this adapter's journal id, whatever its VM name,
        as ``observe`` reports each, in one listing (with its pagination): the fleet's shared poll of a
        location (fleet/gate.py), which the core filters by instance id.

        Optional: the default, None, means "no such listing" (the core then observes per VM), as must an
        adapter without a journal id. Must not: change anything, or omit an instance ``observe`` would
        report for one of those VMs (the conformance suite compares the two). Idempotent: read-only."""
        return None

    @abc.abstractmethod
    def delete(self, location: Location, vm_name: str, instance_ids: List[str]) -> None:
        """Request deletion of exactly ``instance_ids`` at ``location``, without waiting for
        them to be gone (the core observes until they are).

        Must not: delete anything it was not given. Idempotent: an unknown or already
        deleted id is success, and asking again for one on its way out is harmless."""

    @abc.abstractmethod
    def cleanup(self, location: Location, vm_name: str) -> None:
        """Remove the side resources ``prepare`` made for the VM at ``location`` that carry
        this adapter's journal id (or no journal id: resources made before journal ids),
        never another journal's.

        Called once the instances are gone; raises Transient while the vendor still
        refuses because something uses them. Idempotent: nothing left is success."""

    def diagnose(self, location: Location, vm_name: str) -> Dict[str, Any]:
        """The vendor's own view of the VM, read-only, for ``gpuprov.cloud.health``:
        ``{"instances": [Observed as dicts, each with a ``vendor`` dict of the cloud's own
        fields], "findings": [short strings]}``. The default derives it from ``observe``;
        adapters add vendor-native findings (a state reason, a console message, a quota
        note). The same rules as ``observe``: bounded reads, no waiting, classified errors."""
        found = self.observe(location, vm_name)
        return {"instances": [o.to_dict() for o in found], "findings": []}

    def sweep_locations(self) -> List[Location]:
        """Where ``list_owned`` looks when the user names no region: every region this
        adapter's catalog knows (or one ``Location(cloud, ANY_REGION)`` where a single
        listing covers every region). Pure: no API call."""
        raise NotImplementedError("%s cannot list its resources for the orphan sweep" % self.name)

    def list_owned(self, location: Location) -> List[Owned]:
        """Every resource at ``location`` (every region for ``ANY_REGION``) that carries
        gpuprov's identity (``VM_NAME_TAG`` in its tags/labels, or the gpuprov name prefix
        where the cloud has no tags), whatever its journal id: instances, and every kind
        of side resource ``prepare`` makes and ``cleanup`` removes.

        For the orphan sweep (``gpuprov.cloud.orphans``), which joins the result with the
        journal. The same rules as ``observe``: read-only, one listing per resource kind
        with its pagination, no waiting, classified errors. Instances fully gone are
        omitted; instances on their way out are listed with their status."""
        raise NotImplementedError("%s cannot list its resources for the orphan sweep" % self.name)
