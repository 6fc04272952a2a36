# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the VM's watchdog goes (issue 27): composed into the instance's boot script where its cloud runs one,
and moved over SSH when the limits change.

Never on ``local`` (its VM is an sshd on the controller: a power-off would power off the controller) nor on
``nebius`` (a VM powered off from inside is rebooted, and the watchdog would loop): there the reap alone enforces.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.limits import Limits
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.watchdog import watchdog_boot_part
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BootScript, InstanceSpec

NO_WATCHDOG_CLOUDS = ("local", "nebius")


def has_watchdog(cloud: str, boot_script: bool, limits: Optional[Limits]) -> bool:
    """Whether a VM of ``cloud`` (whose Capabilities.boot_script is ``boot_script``) gets the watchdog."""
    return bool(limits is not None and not limits.empty and boot_script and cloud not in NO_WATCHDOG_CLOUDS)


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
    """``spec`` as ``cloud`` gets it, with the watchdog composed into its boot script where it has one."""
    if limits is None or not has_watchdog(cloud, bool(getattr(caps, "boot_script", False)), limits):
        return spec
    part = watchdog_boot_part(limits, grace_s=limits.grace, interval_s=limits.check_interval_s)
    return dataclasses.replace(spec, boot_script=compose(spec.boot_script, part), terminate_on_guest_shutdown=True)
