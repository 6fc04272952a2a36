"""User tags and labels (the ``tags`` option): validated once (request_params.user_tags), merged
under the identity tags, which a user can never override (Provider.resource_tags), and put on
every resource each adapter makes where its cloud takes tags or labels."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.tests.unit.conftest import AWS_JOURNAL_ID
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    JOURNAL_ID_TAG, VM_NAME_TAG, InstanceSpec, Offer, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.request_params import instance_spec, user_tags

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIUnitTestOnlyNotARealKey000000000000000 unit@test"
USER = {"team": "ml", "cost-center": "42"}
JOURNAL = AWS_JOURNAL_ID   # the aws fixture's (conftest.py); the other adapters here are given it too


def spec(name="tagged", tags=None):
    return InstanceSpec(vm_name=name, ssh_public_key=KEY, tags=dict(USER if tags is None else tags))


# -- the option --------------------------------------------------------------------------------

def test_tags_become_strings_and_reach_the_spec():
    made = instance_spec({"tags": {"team": "ml", "cost-center": 42, "gpu-budget": True, "empty": None}}, "v", KEY)
    assert made.tags == {"team": "ml", "cost-center": "42", "gpu-budget": "true", "empty": ""}
    assert instance_spec({}, "v", KEY).tags == {}


@pytest.mark.parametrize("tags, message", [
    ({VM_NAME_TAG: "other"}, "tags: 'gpuprov-vm-name' is reserved"),
    ({JOURNAL_ID_TAG: "x"}, "tags: 'gpuprov-journal-id' is reserved"),
    ({"GPUPROV-Anything": "x"}, "tags: 'GPUPROV-Anything' is reserved"),
    ({"": "x"}, "tags: expected non-empty tag names"),
    ({"team": ["a"]}, "tags.team: expected a string or number, got list"),
    (["team"], "tags: expected a dict of tag names to values, got list"),
])
def test_a_bad_or_reserved_tag_is_refused_naming_the_field(tags, message):
    with pytest.raises(ProviderError) as info:
        user_tags({"tags": tags})
    assert info.value.msg.startswith(message), info.value.msg


def test_identity_tags_win_over_user_tags():
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.local import LocalProvider
    provider = LocalProvider({"root": "/nonexistent"}, journal_id=JOURNAL)
    # Even a spec built around request_params (say, by another caller) cannot override the identity.
    forged = spec(tags={VM_NAME_TAG: "other", JOURNAL_ID_TAG: "x", "team": "ml"})
    assert provider.resource_tags(forged) == {VM_NAME_TAG: "tagged", JOURNAL_ID_TAG: JOURNAL, "team": "ml"}


# -- AWS (moto): the instance, its volumes and its security group ---------------------------------

def _tags(resource):
    return {t["Key"]: t["Value"] for t in resource.get("Tags") or []}


def test_aws_tags_the_instance_its_volumes_and_its_security_group(aws):
    provider, ec2 = aws
    offer = Offer(cloud="aws", region="us-east-1", instance_type="g4dn.xlarge", gpu="T4", gpu_count=1)
    prepared = provider.prepare(offer, spec())
    instance_id = provider.create(offer, prepared, spec())
    inst = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    group = ec2.describe_security_groups(GroupIds=[prepared["security_group_id"]])["SecurityGroups"][0]
    volumes = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [instance_id]}])["Volumes"]
    for resource in [inst, group] + volumes:
        tags = _tags(resource)
        assert {k: tags.get(k) for k in USER} == USER, tags
        assert tags[VM_NAME_TAG] == "tagged" and tags[JOURNAL_ID_TAG] == JOURNAL
    assert volumes
    provider.delete(offer.location, "tagged", [instance_id])


def test_aws_refuses_a_tag_it_could_not_hold_before_any_call(aws):
    provider, _ec2 = aws
    offer = Offer(cloud="aws", region="us-east-1", instance_type="g4dn.xlarge", gpu="T4", gpu_count=1)
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer, spec(tags={"aws:owner": "me"}))
    assert info.value.msg.startswith("tags: 'aws:owner' cannot be an AWS tag name")
    with pytest.raises(ProviderError) as info:
        provider.prepare(offer, spec(tags={"team": "ml#1"}))
    assert info.value.msg.startswith("tags.team: 'ml#1' cannot be an AWS tag value")


def test_aws_retag_sets_and_purges_user_tags_only(aws):
    provider, ec2 = aws
    offer = Offer(cloud="aws", region="us-east-1", instance_type="g4dn.xlarge", gpu="T4", gpu_count=1)
    prepared = provider.prepare(offer, spec())
    instance_id = provider.create(offer, prepared, spec())
    assert provider.retag(offer.location, "tagged", instance_id, dict(USER), purge=True) == {"set": {}, "removed": []}
    wanted = {"team": "ai", "owner": "kim"}
    assert provider.retag(offer.location, "tagged", instance_id, wanted, purge=True, check=True) == {
        "set": {"team": "ai", "owner": "kim"}, "removed": ["cost-center"]}
    inst = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    assert _tags(inst)["team"] == "ml"   # check changed nothing
    provider.retag(offer.location, "tagged", instance_id, wanted, purge=True)
    inst = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    group = ec2.describe_security_groups(GroupIds=[prepared["security_group_id"]])["SecurityGroups"][0]
    for resource in (inst, group):
        tags = _tags(resource)
        assert tags["team"] == "ai" and tags["owner"] == "kim" and "cost-center" not in tags, tags
        assert tags[VM_NAME_TAG] == "tagged" and tags[JOURNAL_ID_TAG] == JOURNAL
    assert _tags(inst)["Name"] == "tagged"
    kept = provider.retag(offer.location, "tagged", instance_id, {"extra": "1"}, purge=False)
    assert kept == {"set": {"extra": "1"}, "removed": []}
    with pytest.raises(ProviderError) as info:
        provider.retag(offer.location, "other", instance_id, {}, purge=True)
    assert info.value.msg.startswith("tags: %s is not an instance of VM other" % instance_id)
    provider.delete(offer.location, "tagged", [instance_id])


# -- the vm module on the local cloud (real sshd): made with the tags, a kept VM retagged ---------

VM = {"name": "tagvm", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
      "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
      "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None,
      "tags": {"team": "ml", "cost-center": 42}, "purge_tags": True}


@pytest.fixture
def home(home):
    """conftest.py's home; at the end this file's VM is taken down."""
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
    yield home
    if (home / "journal.sqlite").exists():   # never leave an sshd behind
        VmService(dict(VM, state="absent")).run()


def _local_tags(home, instance_id):
    import json
    return json.loads((home / "local" / "tagvm" / instance_id / "instance.json").read_text())["tags"]


def test_vm_tags_a_new_vm_and_retags_a_kept_one_with_purge_tags(home):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
    up = VmService(dict(VM)).run()
    assert up["changed"] and up["state"] == "Ready", up
    instance_id = up["vm"]["instance_id"]
    tags = _local_tags(home, instance_id)
    assert {k: tags[k] for k in ("team", "cost-center")} == {"team": "ml", "cost-center": "42"}
    assert tags[VM_NAME_TAG] == "tagvm" and tags[JOURNAL_ID_TAG]

    same = VmService(dict(VM)).run()
    assert same["changed"] is False and same["tags"] == {"set": {}, "removed": []}
    untouched = VmService(dict(VM, tags=None)).run()
    assert untouched["changed"] is False and "tags" not in untouched

    would = VmService(dict(VM, tags={"team": "ai"})).run(check_mode=True)
    assert would["changed"] and would["tags"] == {"set": {"team": "ai"}, "removed": ["cost-center"]}
    assert "would change tags: set team=ai; removed cost-center" in would["msg"]
    assert _local_tags(home, instance_id)["team"] == "ml"

    added = VmService(dict(VM, tags={"owner": "kim"}, purge_tags=False)).run()
    assert added["changed"] and added["tags"] == {"set": {"owner": "kim"}, "removed": []}
    purged = VmService(dict(VM, tags={"team": "ai"})).run()
    assert purged["changed"] and purged["tags"] == {"set": {"team": "ai"}, "removed": ["cost-center", "owner"]}
    from ansible_collections.gpuprov.cloud.tests.unit.test_return_spec import mismatches, return_spec
    assert mismatches(return_spec("vm"), purged) == [] and mismatches(return_spec("vm"), would) == []
    tags = _local_tags(home, instance_id)
    assert tags["team"] == "ai" and "owner" not in tags and tags[VM_NAME_TAG] == "tagvm"   # identity stays
    assert purged["vm"]["instance_id"] == instance_id   # the same VM, never recreated for its tags


def test_vm_refuses_a_reserved_tag_before_anything_exists(home):
    from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService
    result = VmService(dict(VM, tags={"gpuprov-vm-name": "other"})).run()
    assert result["failed"] and result["msg"].startswith("tags: 'gpuprov-vm-name' is reserved"), result
    assert not (home / "local" / "tagvm").exists()


# -- docker: container labels ------------------------------------------------------------------------

def test_docker_labels_the_container_with_the_user_tags_under_gpuprov_labels():
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ResourceRequest
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.docker import (
        DEFAULT_BASE_IMAGE, DockerProvider,
    )
    from ansible_collections.gpuprov.cloud.tests.fakes import docker_engine as de
    engine, why = de.engine()
    if engine is None:
        pytest.skip(why)
    de.ensure_base_image(engine, DEFAULT_BASE_IMAGE)
    provider = DockerProvider(journal_id=JOURNAL)
    name = de.unique_name("tut-labels")
    made = spec(name, tags=dict(USER, **{"gpuprov-managed-by": "me"}))   # forged: gpuprov's own label wins
    offer = provider.plan(ResourceRequest(vm_name=name))[0]
    try:
        provider.create(offer, provider.prepare(offer, made), made)
        labels = de.containers_of(engine, name)[0].labels
        assert {k: labels.get(k) for k in USER} == USER, labels
        assert labels[VM_NAME_TAG] == name and labels[JOURNAL_ID_TAG] == JOURNAL
        assert labels["gpuprov-managed-by"] == "gpuprov.cloud"
    finally:
        de.remove_containers(engine, name)


# -- nebius (gRPC fake): the instance and its boot disk ----------------------------------------------

def test_nebius_labels_the_instance_and_its_boot_disk():
    pytest.importorskip("nebius")
    import tempfile
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ResourceRequest
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.nebius import NebiusProvider
    from ansible_collections.gpuprov.cloud.tests.fakes.nebius_grpc import NebiusGrpcFake
    with tempfile.TemporaryDirectory() as folder:
        fake = NebiusGrpcFake(folder)
        try:
            provider = NebiusProvider({"api_endpoint": fake.api_endpoint, "api_insecure": True, "iam_token": fake.token,
                                       "project_id": fake.project_id, "ssh_port": fake.ssh_port,
                                       "request_timeout_s": 10}, journal_id=JOURNAL)
            made = InstanceSpec(vm_name="tagged", ssh_public_key=KEY, allowed_cidrs=["198.51.100.7/32"],
                                tags=dict(USER, **{"gpuprov-ssh-user": "mallory"}))
            offer = provider.plan(ResourceRequest(vm_name="tagged", gpu="H100"))[0]
            provider.create(offer, provider.prepare(offer, made), made)
            request = [c for c in fake.calls if c[0] == "instances.create"][-1][1]
        finally:
            fake.stop()
    for labels in (dict(request.metadata.labels), dict(request.spec.boot_disk.managed_disk.labels)):
        assert {k: labels.get(k) for k in USER} == USER, labels
        assert labels[VM_NAME_TAG] == "tagged" and labels[JOURNAL_ID_TAG] == JOURNAL
    assert request.metadata.labels["gpuprov-ssh-user"] == "ubuntu"   # gpuprov's own label wins


# -- hyperstack (REST fake): the VM's labels -----------------------------------------------------------

def test_hyperstack_labels_the_vm_name_equals_value():
    pytest.importorskip("requests")
    import tempfile
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ResourceRequest
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.hyperstack import HyperstackProvider
    from ansible_collections.gpuprov.cloud.tests.fakes.hyperstack_api import HyperstackApiFake
    with tempfile.TemporaryDirectory() as folder:
        fake = HyperstackApiFake(folder)
        try:
            provider = HyperstackProvider({"api_url": fake.api_url, "api_key": fake.token, "ssh_user": "tester",
                                           "ssh_port": fake.ssh_port, "allowed_cidrs": ["198.51.100.7/32"]},
                                          journal_id=JOURNAL)
            made = spec("tagged-hs")
            offer = provider.plan(ResourceRequest(vm_name="tagged-hs", gpu="A100-80GB"))[0]
            provider.create(offer, provider.prepare(offer, made), made)
            (_key, _method, _path, _query, body), = fake.calls_of("vms.create")
        finally:
            fake.stop()
    assert sorted(body["labels"]) == sorted(["cost-center=42", "team=ml", "gpuprov-vm-name=tagged-hs",
                                             "gpuprov-journal-id=%s" % JOURNAL])


# -- digitalocean (REST fake): the droplet's tags ------------------------------------------------------

def test_digitalocean_tags_the_droplet_name_colon_value_and_refuses_what_it_cannot_hold():
    pytest.importorskip("requests")
    import tempfile
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ResourceRequest
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.digitalocean import DigitalOceanProvider
    from ansible_collections.gpuprov.cloud.tests.fakes.digitalocean_api import DigitalOceanApiFake, public_key
    with tempfile.TemporaryDirectory() as folder:
        fake = DigitalOceanApiFake(folder)
        try:
            provider = DigitalOceanProvider({"api_url": fake.api_url, "api_key": fake.token,
                                             "ssh_port": fake.ssh_port}, journal_id=JOURNAL)
            made = InstanceSpec(vm_name="tagged-do", ssh_public_key=public_key("me@laptop", b"unit"),
                                allowed_cidrs=["203.0.113.9/32"], tags=dict(USER))
            offer = next(o for o in provider.plan(ResourceRequest(vm_name="tagged-do", gpu="RTX4000ADA"))
                         if o.available)
            droplet = provider.create(offer, provider.prepare(offer, made), made)
            tags = fake.droplets[int(droplet)]["tags"]
            calls = len(fake.calls)
            with pytest.raises(ProviderError) as info:
                provider.prepare(offer, InstanceSpec(vm_name="tagged-do", ssh_public_key=made.ssh_public_key,
                                                     tags={"team": "m l"}))
            assert len(fake.calls) == calls   # refused before any call
        finally:
            fake.stop()
    assert {"team:ml", "cost-center:42"} <= set(tags), tags
    assert any(t.startswith(VM_NAME_TAG + ":") for t in tags) and any(t.startswith(JOURNAL_ID_TAG) for t in tags)
    assert info.value.msg.startswith("tags.team: 'team:m l' cannot be a DigitalOcean tag")


# -- gcp (Compute REST fake): the instance's and its boot disk's labels -------------------------------

def test_gcp_labels_the_instance_and_boot_disk_lower_cased_and_refuses_what_gcp_cannot_hold():
    pytest.importorskip("google.cloud.compute_v1")
    pytest.importorskip("pytest_httpserver")
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ResourceRequest
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.gcp import GcpProvider
    from ansible_collections.gpuprov.cloud.tests.fakes.gcp_compute import GcpComputeFake
    fake = GcpComputeFake()
    try:
        provider = GcpProvider({"project": fake.project, "api_endpoint": fake.url, "read_retry_s": 0},
                               journal_id=JOURNAL)
        made = InstanceSpec(vm_name="tagged", ssh_public_key=KEY, allowed_cidrs=["198.51.100.7/32"],
                            tags={"Team": "ML", "cost-center": "42"})
        offer = provider.plan(ResourceRequest(vm_name="tagged", gpu="L4"))[0]
        provider.create(offer, provider.prepare(offer, made), made)
        assert len(fake.instances) == 1
        inst = next(iter(fake.instances.values()))
        with pytest.raises(ProviderError) as info:
            provider.prepare(offer, InstanceSpec(vm_name="other", ssh_public_key=KEY, tags={"2fast": "x"},
                                                 allowed_cidrs=["198.51.100.7/32"]))
        assert not any("gpuprov-other" in name for name in fake.firewalls)   # refused before any call
    finally:
        fake.stop()
    labels = inst["labels"]
    assert {k: labels.get(k) for k in ("team", "cost-center")} == {"team": "ml", "cost-center": "42"}, labels
    assert labels[VM_NAME_TAG] == "tagged" and labels[JOURNAL_ID_TAG] == JOURNAL
    disk_labels = inst["disks"][0]["initializeParams"]["labels"]
    assert disk_labels == labels
    assert info.value.msg.startswith("tags.2fast: '2fast'='x' cannot be a GCP label")


# -- lambda (REST fake): the instance's tags -------------------------------------------------------------

def test_lambda_tags_the_instance():
    pytest.importorskip("requests")
    import tempfile
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ResourceRequest
    from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.lambda_cloud import LambdaProvider
    from ansible_collections.gpuprov.cloud.tests.fakes.lambda_api import LambdaApiFake
    with tempfile.TemporaryDirectory() as folder:
        fake = LambdaApiFake(folder)
        try:
            provider = LambdaProvider({"api_url": fake.api_url, "api_key": fake.token, "ssh_port": fake.ssh_port},
                                      journal_id=JOURNAL)
            made = InstanceSpec(vm_name="tagged-la", ssh_public_key=KEY, allowed_cidrs=["203.0.113.9/32"],
                                tags=dict(USER))
            offer = next(o for o in provider.plan(ResourceRequest(vm_name="tagged-la", gpu="A10")) if o.available)
            instance_id = provider.create(offer, provider.prepare(offer, made), made)
            tags = {t["key"]: t["value"] for t in fake.instances[instance_id]["tags"]}
        finally:
            fake.stop()
    assert tags == dict(USER, **{VM_NAME_TAG: "tagged-la", JOURNAL_ID_TAG: JOURNAL})
