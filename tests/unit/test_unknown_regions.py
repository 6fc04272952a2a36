"""A region a cloud does not have, end to end on the local cloud (real sshd, a temporary state
directory): ``provision -e regions=mars-1`` fails before anything is made, naming the regions; a
re-run of a VM made in ``local`` with ``regions: [mars-1]`` keeps the VM, with or without
``recreate``, instead of destroying and re-making it on every run (issue 24, item 4). The helper
every adapter uses, ``common.check_regions``, is pinned down first."""

from __future__ import annotations

import pytest

from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks import primitives
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ErrorKind, ProviderError
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.common import REGIONS_NAMED, check_regions
from ansible_collections.gpuprov.cloud.plugins.module_utils.tasks.service import VmService

BASE = {"name": "reg", "state": "present", "clouds": ["local"], "gpu": None, "gpu_count": 1, "regions": [],
        "spot": False, "retry_until_up": False, "boot_timeout": None, "ssh_timeout": 60, "teardown_timeout": 60,
        "journal": None, "ssh_key": None, "ssh_user": None, "cloud_options": {}, "k8s": None, "boot_script": None}
REFUSED = "regions: the local cloud has no region mars-1; its regions: local"


# -- common.check_regions ----------------------------------------------------------------

def _refused(*args, **kwargs) -> str:
    with pytest.raises(ProviderError) as info:
        check_regions(*args, **kwargs)
    assert info.value.kind == ErrorKind.INVALID_REQUEST
    return info.value.msg


def test_no_regions_asked_is_no_filter_and_known_ones_keep_their_order():
    assert check_regions("x", [], ["a-1"]) == []
    assert check_regions("x", None, ["a-1"]) == []
    assert check_regions("x", ["b-1", "a-1", "b-1"], ["a-1", "b-1"]) == ["b-1", "a-1"]


def test_another_clouds_region_next_to_a_known_one_is_left_out():
    assert check_regions("aws", ["us-central1", "us-east-1"], ["us-east-1"]) == ["us-east-1"]


def test_none_known_names_the_asked_and_the_clouds_regions_first_ones_first():
    msg = _refused("lambda", ["mars-1", "venus-2"], ["us-west-1", "asia-south-1", "us-east-1"], first=["us-east-1"])
    assert msg == "regions: lambda has none of the regions mars-1, venus-2; its regions: us-east-1, asia-south-1, us-west-1"


def test_a_long_list_is_cut_with_a_count_and_a_typo_gets_the_nearest_name():
    known = ["r-%02d" % i for i in range(REGIONS_NAMED + 5)] + ["us-east-1"]
    msg = _refused("aws", ["us-est-1"], known, first=["us-east-1"])
    assert "(did you mean us-east-1?)" in msg
    assert msg.endswith("its regions: us-east-1, %s and 6 more" % ", ".join(known[:REGIONS_NAMED - 1]))


def test_an_answer_naming_no_region_cannot_tell_and_fold_ignores_case():
    assert check_regions("x", ["mars-1"], []) == ["mars-1"]
    assert check_regions("x", ["us-ks-2"], ["US-KS-2"], fold=True) == ["us-ks-2"]
    assert "its data centers: US-KS-2" in _refused("x", ["us-ks-2"], ["US-KS-2"], its="its data centers")


# -- the local cloud, through the vm service and the offers module ------------------------

@pytest.fixture
def home(home):
    """conftest.py's home; at the end this file's VM is taken down."""
    yield home
    if (home / "journal.sqlite").exists():   # never leave an sshd behind
        VmService(dict(BASE, state="absent")).run()


def test_provision_in_an_unknown_region_fails_before_anything_is_made(home):
    predicted = VmService(dict(BASE, regions=["mars-1"])).run(check_mode=True)
    assert predicted["failed"] and predicted["plan"] == [] and REFUSED in predicted["msg"]

    lines = []
    result = VmService(dict(BASE, regions=["mars-1"]), progress=lines.append).run()
    assert result["failed"] and result["state"] == "Aborted", result
    assert result["msg"] == "reg: Aborted: " + REFUSED
    assert not (home / "local" / "reg").exists(), "the local cloud made the VM's directory"
    assert not any("Preparing" in line for line in lines), lines


def test_offers_in_an_unknown_region_name_the_regions():
    result = primitives.offers({"clouds": ["local"], "regions": ["mars-1"], "cloud_options": {}})
    assert result["failed"] is True and result["offers"] == []
    assert [(e["cloud"], e["kind"], e["primitive"]) for e in result["errors"]] == [("local", "InvalidRequest", "plan")]
    assert result["errors"][0]["msg"] == REFUSED


def test_a_vm_in_local_asked_for_in_mars_1_is_kept_with_or_without_recreate(home):
    up = VmService(dict(BASE)).run()
    assert not up.get("failed"), up

    again = VmService(dict(BASE, regions=["mars-1"])).run()
    assert again["failed"] and "regions: the VM is in local, the request allows mars-1" in again["msg"], again

    # recreate plans the new request first: a region no cloud has costs the user nothing.
    recreate = VmService(dict(BASE, regions=["mars-1"], recreate=True)).run()
    assert recreate["failed"] and REFUSED in recreate["msg"] and "kept" in recreate["msg"], recreate
    assert up["vm"]["instance_id"] == VmService(dict(BASE, regions=["local"])).run()["vm"]["instance_id"]
