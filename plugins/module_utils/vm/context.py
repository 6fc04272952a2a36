# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the VM machines need besides their state: this run's settings, the
adapters (built once per cloud), and the controller-side SSH files."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, cast

from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry import boot as expiry_boot
from ansible_collections.gpuprov.cloud.plugins.module_utils.expiry.limits import Limits
from ansible_collections.gpuprov.cloud.plugins.module_utils.fleet.gate import FleetShare, GatedAdapter
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import SECRET_OPTION
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    Capabilities, InstanceSpec, Location, Observed, Provider, ResourceRequest,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry


def journalled_options(provider: Provider, options: Dict[str, Any]) -> Dict[str, Any]:
    """The adapter options that may be journalled: everything but credentials."""
    secret = set(provider.secret_options)
    return {k: v for k, v in (options or {}).items() if k not in secret and not SECRET_OPTION.search(k)}


@dataclasses.dataclass
class VmSettings:
    vm_name: str
    clouds: List[str]
    request: ResourceRequest
    spec: InstanceSpec
    cloud_options: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)
    retry_until_up: bool = False
    exhausted_wait: float = 30.0          # seconds between planning rounds with retry_until_up
    boot_timeout: Optional[float] = None  # None = the cloud's capability default
    ssh_timeout: float = 300.0
    teardown_timeout: float = 600.0
    step_attempts: int = 5
    teardown_attempts: int = 8
    # The boot script is the k3s installer (k8s not false): only clouds that can host k3s get it.
    boot_script_is_k3s: bool = False
    # A journalled VM that does not match the request is torn down and made anew (else: an error).
    recreate: bool = False
    # The search's order ("order": that of clouds; "price": cheapest first) and price ceiling (USD/h).
    prefer: str = "order"
    max_price_per_hour: Optional[float] = None
    # The limits a new instance's watchdog starts with (expiry/boot.py); None: no watchdog.
    limits: Optional[Limits] = None


class VmContext:
    """Settings + adapters + controller files (ssh config, known_hosts) + SSH check.

    Adapter options: the journal keeps, per VM and cloud, the non-secret options its
    resources were made with (``journalled``). Every step reaches the cloud with those,
    overlaid on this run's options (which bring the credentials), so a later ``down``
    or re-run looks where the VM really is. Planning a new search adopts this run's
    options (``adopt_current_options``).

    ``fleet``: what the run shares with the other VMs of its fleet (fleet/gate.py), set by a run that
    drives a machine; then every adapter comes gated: shared plans and listings, a shared throttle."""

    def __init__(self, settings: VmSettings, files=None,
                 ssh_check: Optional[Callable[..., Any]] = None,
                 providers: Optional[Dict[str, Provider]] = None,
                 journal_id: Optional[str] = None,
                 journalled: Optional[Dict[str, Dict[str, Any]]] = None):
        self.settings = settings
        self.files = files          # vm.ssh.ControllerFiles, or None in pure machine tests
        self.ssh_check = ssh_check  # callable(endpoint, alias) -> host key fingerprint
        self.journal_id = journal_id
        self.journalled: Dict[str, Dict[str, Any]] = {k: dict(v) for k, v in (journalled or {}).items()}
        self._fixed = set(providers or {})  # injected adapters (tests) are kept as given
        self._providers: Dict[str, Provider] = dict(providers or {})
        self.fleet: Optional[FleetShare] = None

    def share_fleet(self, fleet: Optional[FleetShare]) -> None:
        """Gate every adapter of this run with ``fleet`` (None: none), from now on."""
        self.fleet = fleet
        # Adapters built so far are built again, gated; injected ones are gated as they are.
        self._providers = {k: self._gated(k, v, self.options(k)) for k, v in self._providers.items() if k in self._fixed}

    def _gated(self, cloud: str, adapter: Provider, options: Dict[str, Any]) -> Provider:
        if self.fleet is None:
            return adapter
        return cast(Provider, self.fleet.gate(cloud, adapter, options, journalled_options(adapter, options)))

    def options(self, cloud: str) -> Dict[str, Any]:
        """This run's options for ``cloud`` with the journalled ones on top."""
        merged = dict(self.settings.cloud_options.get(cloud) or {})
        merged.update(self.journalled.get(cloud) or {})
        return merged

    def provider(self, cloud: str) -> Provider:
        if cloud not in self._providers:
            options = self.options(cloud)
            adapter = registry.get_provider(cloud, options, journal_id=self.journal_id)
            self._providers[cloud] = self._gated(cloud, adapter, options)
        return self._providers[cloud]

    def plan_afresh(self, fresh: bool) -> None:
        """A search's later rounds plan afresh instead of taking the fleet's recent plan."""
        for adapter in self._providers.values():
            if isinstance(adapter, GatedAdapter):
                adapter.fresh_plans = fresh

    def observe_booting(self, cloud: str, location: Location, vm_name: str, in_state: float,
                        max_age: float) -> List[Observed]:
        """What a Booting VM polls (``GatedAdapter.observe_booting``: a listing of ``location`` shared by the
        fleet, taken in the last ``in_state`` s and at most ``max_age`` s ago); ``observe`` ungated."""
        adapter: Any = self.provider(cloud)
        if isinstance(adapter, GatedAdapter):
            since = adapter.now() - in_state
            return adapter.observe_booting(location, vm_name, since, max_age)
        found: List[Observed] = adapter.observe(location, vm_name)
        return found

    def adopt_current_options(self) -> Dict[str, Dict[str, Any]]:
        """A new search reaches every cloud with this run's options; returns what to journal."""
        adopted = {}
        for cloud in self.settings.clouds:
            provider = self._providers.get(cloud) if cloud in self._fixed else None
            current = dict(self.settings.cloud_options.get(cloud) or {})
            if provider is None:
                provider = registry.get_provider(cloud, current, journal_id=self.journal_id)
                adopted[cloud] = journalled_options(provider, current)
                self._providers[cloud] = self._gated(cloud, provider, current)
                continue
            adopted[cloud] = journalled_options(provider, current)
        self.journalled = {k: dict(v) for k, v in adopted.items()}
        return adopted

    def capabilities(self, cloud: str) -> Capabilities:
        return self.provider(cloud).capabilities()

    def spec_for(self, cloud: str) -> InstanceSpec:
        """The instance spec as this cloud gets it: ``k3s_spec_for``'s, with the VM's watchdog in its boot
        script where its limits ask for one and the cloud runs boot scripts (expiry/boot.py)."""
        return expiry_boot.with_watchdog(self.k3s_spec_for(cloud), cloud, self.capabilities(cloud), self.settings.limits)

    def k3s_spec_for(self, cloud: str) -> InstanceSpec:
        """The instance spec without the watchdog: no boot script where it cannot run one,
        and no k3s installer where k3s cannot be hosted."""
        spec = self.settings.spec
        if spec.boot_script is None:
            return spec
        caps = self.capabilities(cloud)
        if not caps.boot_script or (self.settings.boot_script_is_k3s and not caps.kubernetes):
            return dataclasses.replace(spec, boot_script=None)
        return spec

    def poll_interval(self, cloud: str) -> float:
        return self.capabilities(cloud).poll_interval_s

    def boot_timeout(self, cloud: str) -> float:
        if self.settings.boot_timeout is not None:
            return self.settings.boot_timeout
        return self.capabilities(cloud).boot_timeout_s
