# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a guest power-off does to a VM's billing, said for people (issue 27).

The VM's watchdog powers it off at its limits; whether that ends the bill is the cloud's to say, and each adapter
says it in its Capabilities (``poweroff_billing``, from the vendor's pages or SDK; docs/limits.md's billing table
agrees). ``poweroff_sentence`` turns that into one plain sentence for ``status`` and the reap's output. Pure: it
reads capabilities, which need neither credentials nor a cloud call.
"""

from __future__ import annotations

from typing import Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    Capabilities, PowerOffBilling, ProviderError,
)

# What ends the billing a power-off leaves behind.
REMOVER = "gpuprov.cloud.reap (or down)"


def capabilities_of(cloud: str) -> Optional[Capabilities]:
    """``cloud``'s capabilities as its adapter states them without options or credentials; None when the adapter
    cannot be built here (an unknown cloud, its SDK not installed)."""
    try:
        return registry.get_provider(cloud, {}).capabilities()
    except ProviderError:
        return None


def poweroff_billing(cloud: str, caps: Optional[Capabilities] = None, shutdown_set: bool = True) -> str:
    """The PowerOffBilling verdict for a VM of ``cloud`` (``caps``: its capabilities, else the registry's), made
    with the adapter's shutdown setting (``shutdown_set``: InstanceSpec.terminate_on_guest_shutdown, as every VM
    with a watchdog is) or without it. UNKNOWN when the adapter says nothing known."""
    caps = caps if caps is not None else capabilities_of(cloud)
    verdict = caps.poweroff_billing_of(shutdown_set) if caps is not None else None
    return verdict if verdict in PowerOffBilling.ALL else PowerOffBilling.UNKNOWN


def poweroff_sentence(cloud: str, caps: Optional[Capabilities] = None, shutdown_set: bool = True) -> str:
    """One sentence saying what a guest power-off does to the billing of a VM of ``cloud`` (arguments as
    ``poweroff_billing``'s), naming the shutdown setting behind it where the adapter has one."""
    caps = caps if caps is not None else capabilities_of(cloud)
    verdict = poweroff_billing(cloud, caps, shutdown_set)
    setting = caps.poweroff_setting if caps is not None else None
    why = ""
    if setting:
        why = (" (the adapter set %s)" % setting) if shutdown_set else (" (the VM was made without %s)" % setting)
    if verdict == PowerOffBilling.ENDS:
        return "a guest power-off ends the billing of a VM on %s: the instance is terminated%s" % (cloud, why)
    if verdict == PowerOffBilling.ENDS_COMPUTE:
        return ("a guest power-off stops a VM on %s%s: its instance and GPUs no longer bill, but its disks and IP "
                "addresses bill until %s removes them" % (cloud, why, REMOVER))
    if verdict == PowerOffBilling.CONTINUES:
        return "a powered-off VM still bills on %s%s: only %s ends its billing" % (cloud, why, REMOVER)
    if verdict == PowerOffBilling.FREE:
        return "nothing bills on %s: a powered-off VM costs nothing, and %s removes what remains" % (cloud, REMOVER)
    return ("%s does not say whether a powered-off VM still bills%s: take it as billing until %s removes it"
            % (cloud, why, REMOVER))
