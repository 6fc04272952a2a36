"""The provider contract's plain data and defaults (providers/base.py), pinned where the core
relies on them: which observed instance counts as booted, leaving or live (and so may be
reused, adopted or deleted), error kinds and block scopes and their validation, offer and
location identities, the identity tags every resource carries, tag changes, boot scripts,
and the base Provider's defaults. Mutation testing (make mutation) found these unpinned.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ANY_REGION, JOURNAL_ID_TAG, VM_NAME_TAG, BlockScope, BootScript, Capabilities, ErrorKind, InstanceSpec,
    Location, Observed, Offer, Owned, Provider, ProviderError, ResourceKind, SshEndpoint, Status, tag_changes,
    validate_vm_name,
)
from ansible_collections.gpuprov.cloud.tests.fakes.scripted_provider import ScriptedProvider

ENDPOINT = SshEndpoint("203.0.113.5", 22, "ubuntu")


# --- observed instances ----------------------------------------------------------------------

@pytest.mark.parametrize("status, endpoint, usable", [
    (Status.RUNNING, ENDPOINT, True),
    (Status.RUNNING, None, False),
    (Status.PENDING, ENDPOINT, False),     # an endpoint before Running is not a booted VM
    (Status.STOPPED, ENDPOINT, False),
    (Status.STOPPING, ENDPOINT, False),
    (Status.TERMINATING, ENDPOINT, False),
    (Status.FAILED, ENDPOINT, False),
])
def test_only_a_running_instance_with_an_endpoint_is_booted(status, endpoint, usable):
    assert Observed("i-1", status, endpoint=endpoint).usable is usable


@pytest.mark.parametrize("status, leaving, live", [
    (Status.PENDING, False, True),
    (Status.RUNNING, False, True),
    (Status.STOPPING, True, False),
    (Status.TERMINATING, True, False),
    (Status.STOPPED, False, False),
    (Status.FAILED, False, False),
])
def test_leaving_and_live_partition_the_statuses(status, leaving, live):
    observed = Observed("i-1", status)
    assert (observed.leaving, observed.live) == (leaving, live)


def test_an_instance_belongs_to_its_own_journal_or_to_any_when_it_carries_none():
    assert Observed("i-1", Status.RUNNING, journal_id="j1").owned_by("j1")
    assert not Observed("i-1", Status.RUNNING, journal_id="j1").owned_by("j2")
    assert not Observed("i-1", Status.RUNNING, journal_id="j1").owned_by(None)
    assert Observed("i-1", Status.RUNNING).owned_by("j2")          # made before journal ids: legacy


def test_observed_and_owned_round_trip_through_json_with_their_nested_records():
    observed = Observed("i-1", Status.RUNNING, "ok", ENDPOINT, Location("c", "r", "z"), "j1",
                        ErrorKind.QUOTA, BlockScope.REGION)
    assert Observed.from_dict(json.loads(json.dumps(observed.to_dict()))) == observed
    bare = Observed("i-2", Status.PENDING)
    assert Observed.from_dict(bare.to_dict()) == bare
    owned = Owned(ResourceKind.INSTANCE, "i-1", Location("c", "r"), "vm1", "j1", Status.RUNNING, 1.5, "vm1-x")
    assert Owned.from_dict(json.loads(json.dumps(owned.to_dict()))) == owned


# --- errors ----------------------------------------------------------------------------------

def test_an_unknown_error_kind_or_block_scope_is_refused_at_once():
    with pytest.raises(ValueError, match="unknown error kind 'Oops'"):
        raise ProviderError("Oops", "x")
    with pytest.raises(ValueError, match="unknown block scope 'galaxy'"):
        raise ProviderError(ErrorKind.CAPACITY, "x", "galaxy")


@pytest.mark.parametrize("kind, scope", [
    (ErrorKind.CAPACITY, BlockScope.OFFER), (ErrorKind.QUOTA, BlockScope.REGION),
    (ErrorKind.UNAVAILABLE, BlockScope.OFFER), (ErrorKind.FAILED, BlockScope.OFFER),
    (ErrorKind.TRANSIENT, None), (ErrorKind.INVALID_REQUEST, None), (ErrorKind.CREDENTIALS, None),
])
def test_each_kind_blocks_its_default_scope_unless_the_adapter_says(kind, scope):
    assert ProviderError(kind, "m").block_scope == scope
    assert ProviderError(kind, "m", BlockScope.CLOUD).block_scope == BlockScope.CLOUD


def test_only_invalid_request_and_credentials_are_fatal():
    assert sorted(k for k in ErrorKind.ALL if ProviderError(k, "m").fatal) == sorted(
        [ErrorKind.INVALID_REQUEST, ErrorKind.CREDENTIALS])


def test_an_error_says_its_kind_and_travels_as_data():
    exc = ProviderError(ErrorKind.QUOTA, "vCPU limit", BlockScope.CLOUD)
    assert str(exc) == "Quota: vCPU limit" and exc.retry_after is None
    assert exc.to_dict() == {"kind": "Quota", "msg": "vCPU limit", "block": "cloud"}
    assert ProviderError(ErrorKind.QUOTA, "m").to_dict()["block"] == "region"


@pytest.mark.parametrize("name", ["a", "vm-1", "x" * 63, "0abc9"])
def test_a_dns_label_is_a_vm_name(name):
    assert validate_vm_name(name) == name


@pytest.mark.parametrize("name", ["", "-a", "a-", "A", "a_b", "x" * 64, None, 7])
def test_anything_else_is_refused_naming_the_field(name):
    with pytest.raises(ProviderError) as info:
        validate_vm_name(name)
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("name: expected a DNS label")


# --- identities ------------------------------------------------------------------------------

def test_offer_and_location_identities():
    zoned = Offer("aws", "us-east-1", "p5.48xlarge", zone="us-east-1a")
    assert zoned.offer_id == "aws:us-east-1:p5.48xlarge:us-east-1a"
    assert Offer("aws", "us-east-1", "p5.48xlarge").offer_id == "aws:us-east-1:p5.48xlarge"
    assert zoned.location == Location("aws", "us-east-1", "us-east-1a")
    assert str(zoned.location) == "aws/us-east-1/us-east-1a" and str(Location("aws", "r")) == "aws/r"
    assert Offer.from_dict(json.loads(json.dumps(zoned.to_dict()))) == zoned


def test_every_resource_carries_the_vm_name_and_the_journal_id_over_the_users_tags():
    provider = ScriptedProvider("fakea")
    provider.journal_id = "j1"
    assert provider.identity_tags("vm1") == {VM_NAME_TAG: "vm1", JOURNAL_ID_TAG: "j1"}
    spec = InstanceSpec("vm1", "ssh-ed25519 AAAA", tags={"team": "ml", VM_NAME_TAG: "other", "GPUPROV-x": "y"})
    assert provider.resource_tags(spec) == {"team": "ml", VM_NAME_TAG: "vm1", JOURNAL_ID_TAG: "j1"}
    provider.journal_id = None
    assert provider.identity_tags("vm1") == {VM_NAME_TAG: "vm1"}     # before journal ids: the name only


def test_tag_changes_set_what_differs_and_purge_only_what_is_not_kept():
    current = {"a": "1", "b": "2", "gpuprov-vm-name": "vm1", "aws:x": "y"}

    def keep(name):
        return name.startswith(("gpuprov-", "aws:"))
    assert tag_changes(current, {"a": "1", "b": "3"}, False, keep) == {"set": {"b": "3"}, "removed": []}
    assert tag_changes(current, {"c": "4"}, True, keep) == {"set": {"c": "4"}, "removed": ["a", "b"]}
    assert tag_changes(current, dict(current), True, keep) == {"set": {}, "removed": []}


def test_a_boot_script_exports_its_environment_after_its_shebang():
    script = BootScript("#!/bin/bash\necho hi", {"B": "two words", "A": "it's"})
    assert script.to_shell() == "#!/bin/bash\nexport A='it'\"'\"'s'\nexport B='two words'\necho hi"
    assert BootScript("echo hi").to_shell() == "#!/bin/sh\necho hi"


def test_an_instance_spec_round_trips_with_its_boot_script():
    spec = InstanceSpec("vm1", "ssh-ed25519 AAAA", "ubuntu", BootScript("echo", {"K": "v"}), [22, 6443],
                        ["10.0.0.0/8"], True, {"team": "ml"})
    assert InstanceSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert spec.labels == {VM_NAME_TAG: "vm1"}
    assert InstanceSpec("vm1", "k").open_ports == [22]


# --- the base Provider's defaults ------------------------------------------------------------

class MinimalProvider(Provider):
    """Only the primitives: every default of the contract shows."""

    name = "minimal"

    def plan(self, request):
        return []

    def prepare(self, offer, spec):
        return {}

    def create(self, offer, prepared, spec):
        return "i-1"

    def observe(self, location, vm_name):
        return [Observed("i-1", Status.RUNNING, endpoint=ENDPOINT, location=location)]

    def delete(self, location, vm_name, instance_ids):
        return None

    def cleanup(self, location, vm_name):
        return None


def test_the_base_provider_defaults():
    provider = MinimalProvider({"token": "t"}, journal_id="j1")
    assert provider.options == {"token": "t"} and provider.journal_id == "j1"
    assert provider.capabilities() == Capabilities()
    assert Capabilities().boot_timeout_s == 900.0 and Capabilities().poll_interval_s == 10.0
    assert provider.check_credentials() is None and provider.verify_credentials() is None
    assert not provider.can_retag and not provider.regions_fold
    assert provider.offer_places(Offer("c", "r1", "t", zone="r1-a")) == ["r1", "r1-a"]
    assert provider.offer_places(Offer("c", "r1", "t")) == ["r1"]
    with pytest.raises(ProviderError) as info:
        provider.retag(Location("c", "r1"), "vm1", "i-1", {"a": "b"}, purge=False)
    assert info.value.kind == ErrorKind.INVALID_REQUEST and "minimal cloud cannot change the tags" in info.value.msg
    report = provider.diagnose(Location("c", "r1"), "vm1")
    assert report["findings"] == [] and [i["instance_id"] for i in report["instances"]] == ["i-1"]
    with pytest.raises(NotImplementedError, match="minimal cannot list"):
        provider.sweep_locations()
    with pytest.raises(NotImplementedError, match="minimal cannot list"):
        provider.list_owned(Location("c", ANY_REGION))
