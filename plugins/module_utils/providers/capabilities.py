# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an adapter says it can do (part of the provider contract, base.py, which re-exports it): its
Capabilities, how the k3s API is reached, and what a guest power-off does to billing."""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.records import Record


class K3sAccess:
    DIRECT = "Direct"          # the cloud opens 6443 to the controller
    SSH_TUNNEL = "SshTunnel"   # the API is reached through an SSH forward


class PowerOffBilling:
    """What a guest power-off (the VM's watchdog at its limits, or anyone's ``poweroff``) does to billing on a cloud,
    as the vendor's pages or SDK say (``Capabilities.poweroff_billing``; docs/limits.md's billing table agrees)."""

    ENDS = "ends"                  # the instance is terminated or deleted: nothing of it bills any more
    ENDS_COMPUTE = "ends_compute"  # it stops: instance and GPUs stop billing, its disks and IPs bill until removed
    CONTINUES = "continues"        # the cloud bills a powered-off VM as a running one, or restarts it
    UNKNOWN = "unknown"            # the vendor does not say
    FREE = "free"                  # nothing on this cloud bills at all (docker, local)

    ALL = (ENDS, ENDS_COMPUTE, CONTINUES, UNKNOWN, FREE)


@dataclasses.dataclass(frozen=True)
class Capabilities(Record):
    kubernetes: bool = True
    boot_script: bool = False
    spot: bool = False
    k3s_access: Optional[str] = K3sAccess.SSH_TUNNEL
    boot_timeout_s: float = 900.0
    poll_interval_s: float = 10.0
    # How soon a readiness wait (a boot, an SSH login) first looks again, for a cloud whose instances are up
    # within moments (the local cloud's sshd listens milliseconds after create); None: the core's defaults.
    readiness_poll_first_s: Optional[float] = None
    # The Python Ansible should use on the VM, where interpreter discovery would guess wrong.
    python_interpreter: Optional[str] = None
    # What a guest power-off does to billing (a PowerOffBilling value), for an instance created with
    # InstanceSpec.terminate_on_guest_shutdown (every VM with a watchdog is). None: the adapter has not said, which
    # the conformance suite refuses: each answers from its vendor's documentation, "unknown" where that is silent.
    poweroff_billing: Optional[str] = None
    # The field of the create request the adapter sets when asked (terminate_on_guest_shutdown), as "Field=value"
    # (AWS: InstanceInitiatedShutdownBehavior=terminate); None where the create request has none, and a guest
    # power-off does what poweroff_billing says whatever was asked.
    poweroff_setting: Optional[str] = None
    # With a poweroff_setting: what a guest power-off does to an instance created without it (the cloud's default).
    poweroff_billing_unset: Optional[str] = None
    # Where the vendor says so: its page (URL) or SDK docstring, in one line.
    poweroff_source: str = ""

    def poweroff_billing_of(self, terminate_on_guest_shutdown: bool) -> Optional[str]:
        """What a guest power-off does to billing for an instance created with (or without) the shutdown setting."""
        if terminate_on_guest_shutdown or self.poweroff_setting is None:
            return self.poweroff_billing
        return self.poweroff_billing_unset


@dataclasses.dataclass(frozen=True)
class ApiLimit:
    """One request limit a vendor documents per account (``Provider.api_limits``): at most ``calls`` requests per
    ``per_s`` seconds. Without ``burst`` that is a window (250 a minute): the fleet keeps every ``per_s`` window
    under ``calls``, with a tenth of it as a burst. With ``burst`` it is a token bucket (EC2's: 100 at once, then 20
    a second): ``burst`` requests at once, refilled at ``calls`` per ``per_s``. ``source``: the vendor's page."""

    calls: float
    per_s: float
    burst: Optional[float] = None
    source: str = ""

    def bucket(self) -> Tuple[float, float]:
        """(size, refill per second) of the token bucket that keeps to this limit."""
        if self.burst is not None:
            return float(self.burst), self.calls / self.per_s
        size = max(1.0, self.calls // 10)
        return size, (self.calls - size) / self.per_s

    def __str__(self) -> str:
        if self.burst is not None:
            return "%g at once, then %g per %gs" % (self.burst, self.calls, self.per_s)
        unit = {1.0: "a second", 60.0: "a minute", 3600.0: "an hour"}.get(self.per_s, "per %gs" % self.per_s)
        return "%g requests %s" % (self.calls, unit)
