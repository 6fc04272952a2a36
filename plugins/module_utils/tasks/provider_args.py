# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options every member of the ``group/gpuprov.cloud.gpuprov`` module_defaults group
accepts (vm, offers, instance, instance_info, journal_info), one argument spec per
concern, so a group default never breaks a member ("Unsupported parameters"):

* ``CLOUD_CHOICE_SPEC``: ``clouds`` (a search order) and ``cloud`` (one cloud), reconciled
  by :func:`reconcile_clouds`: a search with no ``clouds`` searches ``[cloud]``, a
  one-cloud task with no ``cloud`` takes the first of ``clouds``;
* ``CLOUD_OPTIONS_SPEC``: ``cloud_options``, a dict keyed by cloud name, as the modules
  declare and document it (each cloud's options are documented once, on its own page:
  docs/clouds/<cloud>.md). :func:`validation_spec` is what a task is validated against: the
  same spec with each cloud's declared adapter options (providers/cloud_options/<cloud>.py)
  as the suboptions of ``cloud_options``, so Ansible's validator refuses an unknown cloud or
  option and a wrong value, naming it, and hides exactly the credentials (the ``no_log``
  suboptions) in logs, the task's ``invocation`` and results, and nothing else: regions,
  zones and counts stay readable;
* ``REQUEST_SPEC``: what is asked for (``gpu``, ``gpu_count``, ``regions``, ``spot``);
* ``VM_SETTINGS_SPEC``: where the controller keeps its state and how it reaches a VM
  (``journal``, ``ssh_key``, ``ssh_user``, ``boot_timeout``, ``ssh_timeout``,
  ``teardown_timeout``, ``lease_ttl``; :func:`lease_ttl` reads the last).

A member that has no use for a shared option accepts it and ignores it, as its
documentation says (doc fragments ``gpuprov.cloud.group``).
"""

from __future__ import annotations

import copy
import os
from typing import Any, Dict, Iterable

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers import registry
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.registry import DEFAULT_CLOUD


CLOUD_CHOICE_SPEC = dict(
    clouds=dict(type="list", elements="str"),
    cloud=dict(type="str"),
)

# As declared (and documented): a dict. What validates it is validation_spec's.
CLOUD_OPTIONS_SPEC = dict(
    cloud_options=dict(type="dict", default={}),
)

REQUEST_SPEC = dict(
    gpu=dict(type="str"),
    gpu_count=dict(type="int", default=1),
    regions=dict(type="list", elements="str", default=[]),
    spot=dict(type="bool", default=False),
    prefer=dict(type="str", default="order", choices=["order", "price"]),
    max_price_per_hour=dict(type="float"),
)

VM_SETTINGS_SPEC = dict(
    # A str, not a path: Ansible would expand a DSN's "$" too; state_dir.journal_location expands a path.
    journal=dict(type="str"),
    # A PostgreSQL journal's password, when neither the DSN nor libpq's environment (PGPASSWORD,
    # PGPASSFILE) gives it: never logged, journalled or shown in a DSN.
    journal_password=dict(type="str", no_log=True),
    ssh_key=dict(type="path", no_log=False),
    ssh_user=dict(type="str"),
    boot_timeout=dict(type="int"),
    ssh_timeout=dict(type="int"),
    teardown_timeout=dict(type="int"),
    lease_ttl=dict(type="int"),
)

# The journal lease a run holds on a VM name, in seconds, when neither the task nor GPUPROV_LEASE_TTL
# sets one. A run killed on another host blocks the name until its lease expires; the holder renews it
# every third of it, so a shorter one frees a name sooner for more journal writes.
LEASE_TTL_DEFAULT_S = 120
LEASE_TTL_BOUNDS_S = (10, 3600)


# The user's tags/labels of the modules that make resources (vm, instance); not a group option, so
# a module_defaults group never hands them to a module that would ignore them.
TAGS_SPEC = dict(
    tags=dict(type="dict"),
    purge_tags=dict(type="bool", default=True),
)


def _merged(*specs: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for spec in specs + (extra,):
        for key, value in spec.items():
            if key in out:
                raise ValueError("argument %r defined twice" % key)
            out[key] = copy.deepcopy(value)
    return out


GROUP_SPEC = _merged(CLOUD_CHOICE_SPEC, CLOUD_OPTIONS_SPEC, REQUEST_SPEC, VM_SETTINGS_SPEC)


def group_argument_spec(**extra: Any) -> Dict[str, Any]:
    """The group's shared options + a member's own (``extra``; none may redefine a shared one)."""
    return _merged(GROUP_SPEC, **extra)


def validation_spec(argument_spec: Dict[str, Any]) -> Dict[str, Any]:
    """The spec a task of a module declaring ``argument_spec`` is validated against: the same, with
    each cloud's declared adapter options as the suboptions of ``cloud_options`` (a copy; a spec
    without ``cloud_options`` is returned as it is).

    A module declares and documents ``cloud_options`` as a plain dict (so that its documentation
    need not repeat every cloud's options); every place that validates a task's arguments
    (journal_module.JournalModule, the action plugins, plugin_utils/controller_module.py) validates
    them against this instead, as strictly as if the module declared the suboptions: an unknown cloud
    or option (``cloud_options.local.rooot``) and a wrong value fail the task naming it, before
    anything runs, and the credentials are no_log values from then on."""
    declared = argument_spec.get("cloud_options")
    if declared is None or declared.get("options"):
        return argument_spec
    spec = dict(argument_spec)
    spec["cloud_options"] = dict(declared, options=registry.cloud_options_argument_spec())
    return spec


def lease_ttl(params: Dict[str, Any], environ: Any = None) -> float:
    """The ``lease_ttl`` setting in seconds: the task's, else ``GPUPROV_LEASE_TTL``, else
    LEASE_TTL_DEFAULT_S. Raises ValueError naming the field when it is not whole seconds within
    LEASE_TTL_BOUNDS_S."""
    environ = os.environ if environ is None else environ
    field, value = "lease_ttl", params.get("lease_ttl")
    if value is None and environ.get("GPUPROV_LEASE_TTL", "").strip():
        field, value = "GPUPROV_LEASE_TTL", environ["GPUPROV_LEASE_TTL"].strip()
        value = int(value) if value.isdigit() else value
    if value is None:
        return float(LEASE_TTL_DEFAULT_S)
    low, high = LEASE_TTL_BOUNDS_S
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError("%s: expected whole seconds between %d and %d, got %r" % (field, low, high, value))
    return float(value)


def reconcile_clouds(params: Dict[str, Any]) -> Dict[str, Any]:
    """Fill the unset one of ``clouds`` and ``cloud`` from the other (both unset: the default
    cloud), so that a search module reads ``clouds`` and a one-cloud module reads ``cloud``
    whichever of the two a task or a group default set. Changes ``params`` and returns it."""
    clouds = [c for c in params.get("clouds") or [] if c]
    cloud = params.get("cloud") or (clouds[0] if clouds else DEFAULT_CLOUD)
    params["clouds"] = clouds or [cloud]
    params["cloud"] = cloud
    return params


def options_for(cloud: str, cloud_options: Any, clouds: Iterable[str], known: Iterable[str]) -> Dict[str, Any]:
    """The adapter options of ``cloud`` from ``cloud_options`` (keyed by cloud name), unset
    ones left out (the adapter types them against its declaration).

    Raises ValueError naming the field when ``cloud_options`` is not a mapping of
    mappings or names a cloud that is neither used here nor known."""
    cloud_options = cloud_options or {}
    if not isinstance(cloud_options, dict):
        raise ValueError("cloud_options: expected a dict keyed by cloud name, got %s" % type(cloud_options).__name__)
    unknown = sorted(set(cloud_options) - set(clouds) - set(known))
    if unknown:
        raise ValueError("cloud_options: unknown cloud(s) %s; expected keys among %s"
                         % (", ".join(unknown), ", ".join(sorted(known))))
    value = cloud_options.get(cloud) or {}
    if not isinstance(value, dict):
        raise ValueError("cloud_options.%s: expected a dict of adapter options, got %s"
                         % (cloud, type(value).__name__))
    return {key: option for key, option in value.items() if option is not None}
