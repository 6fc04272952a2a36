# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a journalled VM satisfies a run's request: what it was asked for (kept in its record) and,
field by field, why it does not match (the launch's reuse check, vm/launch.py Reconciling)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Sequence

if TYPE_CHECKING:
    from ansible_collections.gpuprov.cloud.plugins.module_utils.vm.context import VmSettings


def request_of(settings: "VmSettings") -> Dict[str, Any]:
    """What a VM was asked for, kept in its journalled record to judge a later request."""
    request = settings.request
    return {"gpu": request.gpu, "gpu_count": request.gpu_count, "clouds": list(settings.clouds),
            "regions": list(request.regions), "spot": bool(request.spot)}


def in_regions(vm: Dict[str, Any], regions: Sequence[str]) -> bool:
    """Whether the journalled ``vm`` answers ``regions`` as its cloud's plan matched its offer: by the
    offer's places (``Provider.offer_places``, kept in the record; launch_states.migrate_state gives an
    older record its region and zone), ignoring case where the cloud's plan does."""
    fold = (lambda name: str(name).casefold()) if vm["regions_fold"] else str
    return bool({fold(p) for p in vm["places"] if p} & {fold(r) for r in regions if r})


def request_mismatch(vm: Dict[str, Any], settings: "VmSettings") -> List[str]:
    """Why the journalled ``vm`` does not satisfy this run's request (empty: it does),
    one phrase per differing field."""
    request = settings.request
    location = vm["location"]
    out = []
    if request.gpu and vm.get("gpu") != request.gpu:
        out.append("gpu: the VM has %s, the request asks for %s" % (vm.get("gpu") or "no GPU", request.gpu))
    if request.gpu and (vm.get("gpu_count") or 0) != request.gpu_count:
        out.append("gpu_count: the VM has %s, the request asks for %d" % (vm.get("gpu_count") or 0, request.gpu_count))
    if location["cloud"] not in settings.clouds:
        out.append("clouds: the VM is on %s, the request allows %s" % (location["cloud"], ", ".join(settings.clouds)))
    if request.regions and not in_regions(vm, request.regions):
        out.append("regions: the VM is in %s, the request allows %s" % (location["region"], ", ".join(request.regions)))
    if bool(vm.get("spot")) != bool(request.spot):
        out.append("spot: the VM is %s, the request asks for %s" % (
            "spot" if vm.get("spot") else "on-demand", "spot" if request.spot else "on-demand"))
    return out
