# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cloud name -> adapter class. Adapters are imported only when asked for, so a
missing SDK for one cloud never breaks another."""

from __future__ import annotations

import importlib
from typing import Any, Dict, Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import (
    ErrorKind, Provider, ProviderError,
)

_PREFIX = "ansible_collections.gpuprov.cloud.plugins.module_utils.providers."

# cloud name -> (module under providers/, class name)
ADAPTERS = {
    "local": ("local", "LocalProvider"),
    "docker": ("docker", "DockerProvider"),
    "aws": ("aws", "AwsProvider"),
    "gcp": ("gcp", "GcpProvider"),
}

DEFAULT_CLOUD = "local"


def register(cloud: str, module: str, class_name: str) -> None:
    """Add an adapter (used by adapters that live outside this file's table, and by tests)."""
    ADAPTERS[cloud] = (module, class_name)


def known_clouds():
    return sorted(ADAPTERS)


def get_provider(cloud: str, options: Optional[Dict[str, Any]] = None,
                 journal_id: Optional[str] = None) -> Provider:
    """Instantiate the adapter for ``cloud`` or raise InvalidRequest naming the field."""
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
        raise ProviderError(
            ErrorKind.INVALID_REQUEST,
            "clouds: the %s adapter cannot load (%s); install the controller requirements "
            "(pip install -r requirements.txt)" % (cloud, exc),
        )
    return getattr(module, class_name)(options, journal_id=journal_id)
