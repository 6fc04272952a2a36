# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one argument spec for choosing a cloud and passing its adapter options
(credentials included), shared by every module that calls a provider primitive.

It mirrors the doc fragment ``gpuprov.cloud.provider``:

* ``PROVIDER_SPEC`` (fragment ``gpuprov.cloud.provider``): ``cloud_options``;
* ``CLOUD_SPEC`` (fragment ``gpuprov.cloud.provider.modules``): ``cloud``, one cloud;
* ``CLOUDS_SPEC`` (fragment ``gpuprov.cloud.provider.search``): ``clouds``, a search order;
* ``REQUEST_SPEC`` (fragment ``gpuprov.cloud.provider.request``): what is asked for.

``cloud_options`` is keyed by cloud name, exactly as in ``gpuprov.cloud.vm``, so one
play variable serves every module. It is ``no_log``: never logged, and shown masked
in the task's ``invocation``. Ansible would also mask every value in it wherever it
appears in the result (any "0" in any number, the region, the zone...), which makes
the results unreadable, so ``mask_result`` narrows what results hide to the values of
the credential options (``SECRET_OPTION``: keys naming a secret, token, password,
access key, API key, private key or credentials).
"""

from __future__ import annotations

import copy
import re
from typing import Any, Dict, Iterable, Set

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.registry import DEFAULT_CLOUD

MASKED = "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
# Adapter option names whose values are credentials (aws_secret_access_key, aws_access_key_id,
# aws_session_token, credentials_file, api_key, password, private_key ...).
SECRET_OPTION = re.compile(r"secret|passw|token|access_key|api_?key|private|credential", re.IGNORECASE)

PROVIDER_SPEC = dict(
    cloud_options=dict(type="dict", default={}, no_log=True),
)

CLOUD_SPEC = dict(
    cloud=dict(type="str", default=DEFAULT_CLOUD),
)

CLOUDS_SPEC = dict(
    clouds=dict(type="list", elements="str", default=[DEFAULT_CLOUD]),
)

REQUEST_SPEC = dict(
    gpu=dict(type="str"),
    gpu_count=dict(type="int", default=1),
    regions=dict(type="list", elements="str", default=[]),
    spot=dict(type="bool", default=False),
)


def _merged(*specs: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for spec in specs + (extra,):
        for key, value in spec.items():
            if key in out:
                raise ValueError("argument %r defined twice" % key)
            out[key] = copy.deepcopy(value)
    return out


def provider_argument_spec(**extra: Any) -> Dict[str, Any]:
    """``cloud`` + ``cloud_options`` + the request options + ``extra`` (one cloud)."""
    return _merged(CLOUD_SPEC, PROVIDER_SPEC, REQUEST_SPEC, **extra)


def search_argument_spec(**extra: Any) -> Dict[str, Any]:
    """``clouds`` + ``cloud_options`` + the request options + ``extra`` (a search)."""
    return _merged(CLOUDS_SPEC, PROVIDER_SPEC, REQUEST_SPEC, **extra)


def options_for(cloud: str, cloud_options: Any, clouds: Iterable[str], known: Iterable[str]) -> Dict[str, Any]:
    """The adapter options of ``cloud`` from ``cloud_options`` (keyed by cloud name).

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
    return dict(value)


def _leaves(value: Any) -> Set[str]:
    """The strings Ansible masks for a value (as ansible.module_utils.common.parameters does)."""
    if isinstance(value, (str, bytes)):
        return {value if isinstance(value, str) else value.decode("utf-8", "replace")} if value else set()
    if isinstance(value, dict):
        return set().union(*(_leaves(v) for v in value.values())) if value else set()
    if isinstance(value, (list, tuple, set)):
        return set().union(*(_leaves(v) for v in value)) if value else set()
    if value is None or isinstance(value, bool):
        return set()
    return {str(value)}


def secret_values(cloud_options: Any) -> Set[str]:
    """Values of the credential options in ``cloud_options`` (a malformed entry counts whole)."""
    found: Set[str] = set()
    if not isinstance(cloud_options, dict):
        return _leaves(cloud_options)
    for options in cloud_options.values():
        if not isinstance(options, dict):
            found |= _leaves(options)
            continue
        for key, value in options.items():
            if SECRET_OPTION.search(str(key)):
                found |= _leaves(value)
    return found


def mask_result(module, result: Dict[str, Any]) -> Dict[str, Any]:
    """Before exit_json/fail_json: the task's ``invocation`` shows every no_log option masked
    whole, and the result hides the credentials of ``cloud_options`` (and every other no_log
    option's values) instead of every value of ``cloud_options``."""
    no_log = {name for name, spec in module.argument_spec.items() if spec.get("no_log")}
    values: Set[str] = set()
    for name in no_log:
        value = module.params.get(name)
        values |= secret_values(value) if name == "cloud_options" else _leaves(value)
    module.no_log_values = values
    result.setdefault("invocation", {"module_args": {
        name: (MASKED if name in no_log and value else value) for name, value in module.params.items()}})
    return result
