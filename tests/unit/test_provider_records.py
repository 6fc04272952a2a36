"""The contract's plain records (providers/base.py), pinned by value: which are immutable, the
defaults an adapter and a journalled state rely on when a field is left out, the closed sets of
statuses and resource kinds, a boot script rendered for startup-script clouds, and what the
abstract Provider gives every adapter."""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, SDK_READ_ATTEMPTS, SDK_READ_RETRY_S, VM_NAME_TAG, BootScript, Capabilities, ErrorKind,
    InstanceSpec, K3sAccess, Location, Observed, Offer, Owned, Provider, ProviderError, ResourceKind, SshEndpoint,
    Status, tag_changes,
)

LOCATION = Location("aws", "us-east-1", "us-east-1a")


# -- immutable records: what the core keys and compares by -----------------------------------------

@pytest.mark.parametrize("record, field, value", [
    (LOCATION, "region", "eu-west-1"),
    (SshEndpoint("10.0.0.1"), "port", 2222),
    (Observed("i-1", Status.RUNNING, location=LOCATION), "status", Status.STOPPED),
    (Owned(ResourceKind.INSTANCE, "i-1", LOCATION), "vm_name", "other"),
    (Capabilities(), "boot_script", True),
], ids=["Location", "SshEndpoint", "Observed", "Owned", "Capabilities"])
def test_records_the_core_keys_by_are_immutable_and_hashable(record, field, value):
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, field, value)
    assert {record: 1}[type(record).from_dict(record.to_dict())] == 1   # a dict key, equal after a round trip


# -- defaults ---------------------------------------------------------------------------------------

def test_an_ssh_endpoint_without_a_port_is_port_22_and_no_user():
    assert SshEndpoint("10.0.0.1") == SshEndpoint("10.0.0.1", 22, None)
    assert SshEndpoint.from_dict({"host": "10.0.0.1"}).port == 22


def test_an_owned_resource_without_tags_read_has_no_name_journal_status_or_price():
    owned = Owned.from_dict({"kind": ResourceKind.FIREWALL, "resource_id": "fw-1", "location": LOCATION.to_dict()})
    assert (owned.vm_name, owned.journal_id, owned.status, owned.price_per_hour, owned.name) == (None,) * 5
    assert owned.location == LOCATION


def test_an_offer_without_a_gpu_count_counts_no_gpu():
    offer = Offer.from_dict({"cloud": "aws", "region": "us-east-1", "instance_type": "m5.large"})
    assert (offer.gpu, offer.gpu_count, offer.spot, offer.available, offer.price_per_hour) == (None, 0, False, True, None)


def test_an_instance_spec_defaults_to_on_demand_with_only_ssh_open():
    spec = InstanceSpec.from_dict({"vm_name": "a", "ssh_public_key": "ssh-ed25519 AAAA"})
    assert (spec.spot, spec.open_ports, spec.allowed_cidrs, spec.tags, spec.boot_script) == (False, [22], [], {}, None)
    assert InstanceSpec("b", "k").open_ports is not spec.open_ports   # each spec its own list


def test_instance_spec_from_dict_leaves_the_journalled_dict_as_it_was():
    journalled = {"vm_name": "a", "ssh_public_key": "k", "boot_script": {"script": "echo hi", "env": {"A": "1"}}}
    spec = InstanceSpec.from_dict(journalled)
    assert spec.boot_script == BootScript("echo hi", {"A": "1"})
    assert journalled["boot_script"] == {"script": "echo hi", "env": {"A": "1"}}   # still plain JSON data


def test_capabilities_default_to_kubernetes_over_an_ssh_tunnel_without_boot_scripts_or_spot():
    caps = Capabilities()
    assert (caps.kubernetes, caps.boot_script, caps.spot, caps.k3s_access) == (True, False, False, K3sAccess.SSH_TUNNEL)
    assert (caps.boot_timeout_s, caps.poll_interval_s, caps.readiness_poll_first_s) == (900.0, 10.0, None)


# -- closed sets ----------------------------------------------------------------------------------------

def test_the_normalised_statuses_and_resource_kinds_are_exactly_these():
    assert Status.ALL == ("Pending", "Running", "Stopping", "Stopped", "Terminating", "Failed")
    assert set(ResourceKind.ALL) == {ResourceKind.INSTANCE, ResourceKind.SECURITY_GROUP, ResourceKind.FIREWALL,
                                     ResourceKind.SSH_KEY, ResourceKind.ENVIRONMENT, ResourceKind.OTHER}
    assert len(ResourceKind.ALL) == 6


# -- boot scripts on startup-script clouds ----------------------------------------------------------------

def test_a_boot_script_keeps_its_interpreter_line_then_its_environment_then_its_whole_body():
    script = BootScript("#!/bin/bash\nset -eu\necho one\necho two\n", {"B": "it's", "A": "1"})
    assert script.to_shell() == ("#!/bin/bash\n"
                                 "export A='1'\n"
                                 "export B='it'\"'\"'s'\n"
                                 "set -eu\necho one\necho two\n")


def test_a_boot_script_without_an_interpreter_line_gets_sh():
    assert BootScript("echo one\necho two", {"A": "x"}).to_shell() == "#!/bin/sh\nexport A='x'\necho one\necho two"


# -- retag ------------------------------------------------------------------------------------------------

def test_without_purge_retag_removes_nothing():
    current = {"team": "a", "old": "x", "gpuprov-vm": "v"}
    changes = tag_changes(current, {"team": "b"}, purge=False, keep=lambda k: k.startswith("gpuprov-"))
    assert changes == {"set": {"team": "b"}, "removed": []}
    purged = tag_changes(current, {"team": "b"}, purge=True, keep=lambda k: k.startswith("gpuprov-"))
    assert purged == {"set": {"team": "b"}, "removed": ["old"]}


# -- the abstract provider ----------------------------------------------------------------------------------

class MinimalProvider(Provider):
    """A Provider with only its abstract primitives filled in (doing nothing), so that what the tests read is the
    base's own behaviour."""

    def plan(self, request):
        return []

    def prepare(self, offer, spec):
        return {}

    def create(self, offer, prepared, spec):
        return ""

    def observe(self, location, vm_name):
        return []

    def delete(self, location, vm_name, instance_ids):
        return None

    def cleanup(self, location, vm_name):
        return None


def test_a_provider_made_without_options_has_empty_options_and_no_journal_id():
    provider = MinimalProvider()
    assert provider.options == {} and provider.journal_id is None
    assert provider.identity_tags("a") == {VM_NAME_TAG: "a"}
    assert Provider.name == "abstract" and Provider.secret_options == ()


def test_resource_tags_of_a_spec_without_user_tags_are_the_identity_tags():
    provider = MinimalProvider(journal_id="j-1")
    spec = dataclasses.replace(InstanceSpec("a", "k"), tags=None)
    assert provider.resource_tags(spec) == {VM_NAME_TAG: "a", JOURNAL_ID_TAG: "j-1"}


def test_the_base_provider_cannot_retag_and_says_so():
    provider = MinimalProvider()
    assert provider.can_retag is False and provider.regions_fold is False
    with pytest.raises(ProviderError) as info:
        provider.retag(LOCATION, "a", "i-1", {"team": "b"}, purge=False)
    assert info.value.kind == ErrorKind.INVALID_REQUEST and info.value.msg.startswith("tags:")


def test_an_instance_spec_terminates_on_a_guest_shutdown_only_when_asked():
    spec = InstanceSpec.from_dict({"vm_name": "a", "ssh_public_key": "k"})
    assert spec.terminate_on_guest_shutdown is False     # a user's own `poweroff` must not destroy a VM without limits
    assert InstanceSpec.from_dict(dict(spec.to_dict(), terminate_on_guest_shutdown=True)).terminate_on_guest_shutdown


def test_the_contracts_bounds_on_an_sdks_own_read_retries():
    assert (SDK_READ_ATTEMPTS, SDK_READ_RETRY_S) == (3, 30)   # small beside the core's own budget for a Transient state
