# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cloud name -> adapter class and its declared options. Adapters are imported only
when asked for, so a missing SDK for one cloud never breaks another; their option
declarations (providers/cloud_options/<cloud>.py) are plain data, imported here.

Adding a cloud: its package under providers/, its options module under
providers/cloud_options/, and one line in each table below."""

from __future__ import annotations

import importlib
from typing import Any, Dict, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, Provider, ProviderError,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.cloud_options import (
    aws as aws_options, digitalocean as digitalocean_options, docker as docker_options, gcp as gcp_options,
    hyperstack as hyperstack_options, lambda_cloud as lambda_options, local as local_options,
    massedcompute as massedcompute_options, nebius as nebius_options, primeintellect as primeintellect_options,
    runpod as runpod_options, verda as verda_options,
)
from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.options import argument_spec
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import missing_import

_PREFIX = "ansible_collections.gpuprov.cloud.plugins.module_utils.providers."

# cloud name -> (module under providers/, class name)
ADAPTERS = {
    "local": ("local", "LocalProvider"),
    "docker": ("docker", "DockerProvider"),
    "aws": ("aws", "AwsProvider"),
    "gcp": ("gcp", "GcpProvider"),
    # "lambda" is a Python keyword: the package is lambda_cloud.
    "lambda": ("lambda_cloud", "LambdaProvider"),
    "runpod": ("runpod", "RunpodProvider"),
    "primeintellect": ("primeintellect", "PrimeIntellectProvider"),
    "verda": ("verda", "VerdaProvider"),
    "massedcompute": ("massedcompute", "MassedComputeProvider"),
    "hyperstack": ("hyperstack", "HyperstackProvider"),
    "digitalocean": ("digitalocean", "DigitalOceanProvider"),
    "nebius": ("nebius", "NebiusProvider"),
}

# cloud name -> its option declaration (``cloud_options.<cloud>``)
OPTION_SPECS = {
    "local": local_options.OPTIONS,
    "docker": docker_options.OPTIONS,
    "aws": aws_options.OPTIONS,
    "gcp": gcp_options.OPTIONS,
    "lambda": lambda_options.OPTIONS,
    "runpod": runpod_options.OPTIONS,
    "primeintellect": primeintellect_options.OPTIONS,
    "verda": verda_options.OPTIONS,
    "massedcompute": massedcompute_options.OPTIONS,
    "hyperstack": hyperstack_options.OPTIONS,
    "digitalocean": digitalocean_options.OPTIONS,
    "nebius": nebius_options.OPTIONS,
}

DEFAULT_CLOUD = "local"


def register(cloud: str, module: str, class_name: str) -> None:
    """Add an adapter (used by adapters that live outside this file's table, and by tests)."""
    ADAPTERS[cloud] = (module, class_name)


def known_clouds():
    return sorted(ADAPTERS)


def cloud_options_argument_spec() -> Dict[str, Any]:
    """The argument spec of ``cloud_options``: one dict per cloud, whose suboptions are that
    cloud's declared options (Ansible then hides exactly the credentials, its ``no_log`` ones)."""
    return {cloud: dict(type="dict", options=argument_spec(OPTION_SPECS[cloud])) for cloud in sorted(OPTION_SPECS)}


def preload(cloud: str) -> None:
    """Import ``cloud``'s adapter now, if it can be: a process that forks workers (ansible-playbook's
    strategy) so hands it to every one of them instead of each importing it again. An adapter that
    cannot load is left to get_provider, which says why."""
    module_name = ADAPTERS[cloud][0]
    try:
        importlib.import_module(module_name if "." in module_name else _PREFIX + module_name)
    except ImportError:
        pass


def get_provider(cloud: str, options: Optional[Dict[str, Any]] = None,
                 journal_id: Optional[str] = None) -> Provider:
    """Instantiate the adapter for ``cloud`` or raise InvalidRequest naming the field.

    The adapter checks and types ``options`` against its declaration as it is built: an
    unknown option, a wrong type or choice is an InvalidRequest naming
    ``cloud_options.<cloud>`` and the field."""
    if cloud not in ADAPTERS:
        raise ProviderError(
            ErrorKind.INVALID_REQUEST,
            "clouds: unknown cloud %r; expected one of %s" % (cloud, ", ".join(known_clouds())),
        )
    module_name, class_name = ADAPTERS[cloud]
    module_path = module_name if "." in module_name else _PREFIX + module_name
    try:
        module = importlib.import_module(module_path)
    except ImportError as exc:
        raise ProviderError(ErrorKind.INVALID_REQUEST, "clouds: the %s adapter cannot load (%s). %s"
                            % (cloud, exc, missing_import(exc, cloud))) from exc
    return getattr(module, class_name)(options, journal_id=journal_id)
