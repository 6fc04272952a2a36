"""What the shared conformance suite needs from each adapter's fake.

Each cloud adds one file ``tests/conformance/harnesses/<cloud>.py`` that defines
``make_harness(tmp_path_factory) -> Harness`` (a subclass of Harness below, or
``None`` plus a pytest.skip with the reason when the fake cannot run here, e.g. no
Docker engine). ``conftest.py`` discovers those files and parametrises the suite.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, InstanceSpec, Location, Provider, ResourceRequest,
)

ADAPTER_PACKAGE = "ansible_collections.gpuprov.cloud.plugins.module_utils.providers."


def adapter_class(provider: Provider) -> type:
    """The adapter class behind ``provider`` (harnesses may wrap it in a subclass)."""
    for cls in type(provider).__mro__:
        if cls.__module__.startswith(ADAPTER_PACKAGE) and cls is not Provider:
            return cls
    return type(provider)


class Harness:
    """An adapter wired to its fake, plus the levers the suite pulls."""

    cloud: str = ""
    provider: Provider
    request: ResourceRequest
    spec: InstanceSpec

    def error_kinds(self) -> Iterable[str]:
        """The ErrorKinds this fake can make the adapter raise (via inject_error)."""
        return ()

    def inject_error(self, primitive: str, kind: str) -> None:
        """Make the next call of ``primitive`` fail so that the adapter raises ``kind``."""
        raise NotImplementedError

    def settle(self, location: Location, instance_id: str) -> None:
        """Bring a created instance to Running with an endpoint (fakes that need a push)."""

    def resources(self) -> Set[str]:
        """Every billable or side resource the fake holds (instances, security groups,
        firewall rules, keys...), as opaque strings, for leak checks."""
        raise NotImplementedError

    def instance_ids(self) -> List[str]:
        """Ids of live (non-terminated) instances in the fake."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop servers and processes the harness started."""

    # -- optional hooks (the defaults suit most fakes) ----------------------------------

    def clear_errors(self) -> None:
        """Disarm whatever inject_error armed (the suite calls it after each injected call)."""

    def settle_deleted(self, location: Location, instance_id: str) -> None:
        """Finish an asynchronous deletion (fakes that need a push); delete never waits."""

    def unknown_instance_id(self) -> str:
        """A well-formed id of an instance that does not exist in the fake."""
        return "gpuprov-conformance-unknown"

    def create_unreachable(self, spec: InstanceSpec) -> Optional[str]:
        """Make, behind the adapter's back, an instance of ``spec.vm_name`` that is not
        reachable yet (AWS public-IP lag, a pod without sshConnection...); return its
        id, or None when the fake cannot (the check then skips)."""
        return None

    def new_provider(self) -> Provider:
        """A fresh adapter instance on the same fake, as after a controller crash."""
        return adapter_class(self.provider)(dict(self.provider.options), journal_id=self.provider.journal_id)

    def ignore_paging(self) -> None:
        """From now on the fake's server ignores the paging query of every paged listing (issue
        24): each page asked is answered as the first, with the listing's total where the vendor
        reports one, and still offers a next page. Clouds whose adapter reads no paged listing skip."""
        pytest.skip("the %s adapter reads no paged listing" % self.cloud)

    def page_requests(self) -> List[Tuple[str, bool]]:
        """(listing, whether it asked for the first page) of each request of a paged listing the
        fake has answered, in order."""
        return []

    def mutating_requests(self) -> List[str]:
        """The name of every request the fake has received that asks it to change something (a
        create, a delete, a tag, a rule), in order; reads, operation waits and logins left out.
        Clouds whose fake keeps no log of its requests skip."""
        pytest.skip("the %s fake keeps no log of the requests it received" % self.cloud)

    def create_shutdown_setting(self) -> Optional[str]:
        """The shutdown setting the fake's last creating request carried, as ``Capabilities.poweroff_setting`` writes
        it ("Field=value"), or None when it carried none (or the cloud's default). Asked only of clouds whose adapter
        has a ``poweroff_setting``: their harness must answer from what the fake received."""
        raise NotImplementedError("the %s harness cannot tell what the create request carried" % self.cloud)

    def fill_first_pages(self) -> None:
        """Add, behind the adapter's back, resources of someone else so that a paged listing
        whose vendor signals another page only by a full one has a full first page (where that
        still leaves the listing readable from its first page alone). Most harnesses need none."""


class MarketplacePaging:
    """ignore_paging and page_requests for the marketplace fakes (tests/fakes/marketplace.py):
    ``paged_listings`` maps the route key of each paged listing to its paging query parameter
    and that parameter's value on the first page (absent means the first page too)."""

    fake: Any
    paged_listings: Dict[str, Tuple[str, str]] = {}
    # Routes whose POST changes nothing (a login, a token check): not mutating requests.
    read_posts: Tuple[str, ...] = ()

    def ignore_paging(self) -> None:
        if not self.paged_listings:
            pytest.skip("the %s adapter reads no paged listing" % self.cloud)
        self.fake.ignore_paging = True

    def page_requests(self) -> List[Tuple[str, bool]]:
        with self.fake.lock:
            calls = list(self.fake.calls)
        asked = []
        for key, _method, _path, query, _body in calls:
            if key in self.paged_listings:
                param, first = self.paged_listings[key]
                asked.append((key, (query.get(param) or [first])[0] == first))
        return asked

    def mutating_requests(self) -> List[str]:
        with self.fake.lock:
            calls = list(self.fake.calls)
        return [key for key, method, _path, _query, _body in calls
                if method not in ("GET", "HEAD") and key not in self.read_posts]


class FakeApiHarness(MarketplacePaging, Harness):
    """A harness whose fake is a vendor API server (tests/fakes/<cloud>_api.py): it holds
    the fake's side resources, clears its armed faults and stops it; an instance the API
    has accepted and not booted yet is what a fresh adapter's own create makes (the fakes
    boot an instance only on later reads)."""

    fake: Any

    def clear_errors(self) -> None:
        self.fake.clear_faults()

    def resources(self) -> Set[str]:
        return self.fake.resources()

    def close(self) -> None:
        self.fake.stop()

    def create_unreachable(self, spec: InstanceSpec) -> Optional[str]:
        fresh = self.new_provider()
        offer = fresh.plan(self.request)[0]
        return fresh.create(offer, fresh.prepare(offer, spec), spec)


class LeverHarness(FakeApiHarness):
    """A vendor-API harness whose fake has the standard fault levers, each arming the next
    call of one route: ``rate_limit(key, retry_after=...)`` (or whatever ``transient``
    names), ``bad_auth(key)``, ``invalid(key)``, ``fail_capacity(key)``, ``fail_quota(key)``,
    and ``finish(instance_id)`` to end a boot or a deletion. ``first_call`` maps each
    primitive to the route its first request goes to."""

    first_call: Dict[str, str] = {}
    transient = "rate_limit"

    def error_kinds(self) -> Iterable[str]:
        return (ErrorKind.TRANSIENT, ErrorKind.CAPACITY, ErrorKind.QUOTA, ErrorKind.INVALID_REQUEST,
                ErrorKind.CREDENTIALS)

    def inject_error(self, primitive: str, kind: str) -> None:
        key = self.first_call[primitive]
        if kind == ErrorKind.TRANSIENT and self.transient == "rate_limit":
            self.fake.rate_limit(key, retry_after=2)
        elif kind == ErrorKind.TRANSIENT:
            getattr(self.fake, self.transient)(key)
        elif kind == ErrorKind.CREDENTIALS:
            self.fake.bad_auth(key)
        elif kind == ErrorKind.INVALID_REQUEST and primitive in ("prepare", "create"):
            self.fake.invalid(key)
        elif kind == ErrorKind.CAPACITY and primitive == "create":
            self.fake.fail_capacity(key)
        elif kind == ErrorKind.QUOTA and primitive == "create":
            self.fake.fail_quota(key)
        else:
            pytest.skip("the %s API has no %s answer to %s's requests" % (self.cloud, kind, primitive))

    def settle(self, location: Location, instance_id: str) -> None:
        self.fake.finish(instance_id)

    def settle_deleted(self, location: Location, instance_id: str) -> None:
        self.fake.finish(instance_id)
