# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the VM's watchdog goes (issue 27): composed into the instance's boot script where its cloud runs one, and
installed (or refreshed) over SSH once the VM is up and its limits are journalled or moved: that covers a cloud
without a boot script and a VM that was up before it had limits.

Never on the clouds of ``NO_WATCHDOG``, each for the reason it gives: there ``gpuprov.cloud.reap`` alone enforces
the limits, and the vm task says so.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.limits import Limits
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.watchdog import watchdog_boot_part
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BootScript, InstanceSpec

NO_WATCHDOG: Dict[str, str] = {
    "local": "its VM is an sshd on this controller, and a power-off from inside would power off the controller",
}
NO_WATCHDOG_CLOUDS = tuple(NO_WATCHDOG)


def has_watchdog(cloud: str, limits: Optional[Limits]) -> bool:
    """Whether a VM of ``cloud`` with ``limits`` gets the watchdog (at boot where it can, else over SSH)."""
    return bool(limits is not None and not limits.empty and cloud not in NO_WATCHDOG)


def no_watchdog_warning(name: str, cloud: str, limits: Optional[Limits]) -> Optional[str]:
    """What the vm task says of a VM with limits that gets no watchdog; None for any other."""
    if limits is None or limits.empty or cloud not in NO_WATCHDOG:
        return None
    return ("%s: no watchdog on the %s cloud (%s): only gpuprov.cloud.reap enforces its limits, so schedule it "
            "(docs/limits.md)" % (name, cloud, NO_WATCHDOG[cloud]))


def compose(script: Optional[BootScript], part: str) -> BootScript:
    """``script`` (the k3s installer, or None) with ``part`` run first, after its ``#!`` line: the installer may
    end the script (exec, exit), and the watchdog must be in place whatever it does."""
    if script is None:
        return BootScript(script="#!/bin/sh\n" + part)
    if script.script.startswith("#!"):
        first, _newline, body = script.script.partition("\n")
        return dataclasses.replace(script, script="%s\n%s\n%s" % (first, part, body))
    return dataclasses.replace(script, script="#!/bin/sh\n%s\n%s" % (part, script.script))


def with_watchdog(spec: InstanceSpec, cloud: str, caps: Any, limits: Optional[Limits]) -> InstanceSpec:
    """``spec`` as ``cloud`` gets it, with the watchdog composed into its boot script where it has one, and the
    adapter asked to make a guest power-off end the billing where its API can (``terminate_on_guest_shutdown``:
    AWS InstanceInitiatedShutdownBehavior=terminate, Nebius recovery_policy=FAIL; Capabilities.poweroff_setting)."""
    if limits is None or not has_watchdog(cloud, limits) or not getattr(caps, "boot_script", False):
        return spec
    part = watchdog_boot_part(limits, grace_s=limits.grace, interval_s=limits.check_interval_s)
    return dataclasses.replace(spec, boot_script=compose(spec.boot_script, part), terminate_on_guest_shutdown=True)
