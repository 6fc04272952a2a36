# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every adapter would otherwise write again: the missing-SDK error, the wrapper
that classifies an SDK's exceptions, and the checks of ports and CIDRs. Option
parsing (types, timeouts, booleans, lists) is providers/options.py."""

from __future__ import annotations

import functools
import ipaddress
from typing import Any, Callable, Iterable, List, Optional, Tuple, Type

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ErrorKind, ProviderError

SSH_PORT = 22


def require_sdk(cloud: str, available: bool, requirement: str, import_error: Optional[BaseException] = None) -> None:
    """InvalidRequest saying how to install ``requirement`` when the SDK could not be imported."""
    if not available:
        cause = " (%s)" % (import_error,) if import_error else ""
        raise ProviderError(ErrorKind.INVALID_REQUEST, "clouds: the %s adapter requires %s; pip install -r "
                            "requirements.txt%s" % (cloud, requirement, cause))


def classified(classify: Callable[[BaseException], ProviderError],
               exceptions: Tuple[Type[BaseException], ...]) -> Callable:
    """Decorate a primitive so that the SDK ``exceptions`` it lets out leave it classified
    (``classify(exc)``, chained to the original); a ProviderError passes as it is."""
    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except ProviderError:
                raise
            except exceptions as exc:
                raise classify(exc) from exc
        return wrapper
    return decorate


def tcp_ports(ports: Iterable[Any], extra: Iterable[int] = ()) -> List[int]:
    """``ports`` plus SSH and ``extra``, sorted and unique; InvalidRequest for a non-port."""
    wanted = set(ports or []) | {SSH_PORT} | set(extra)
    for port in wanted:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "open_ports: %r is not a TCP port" % (port,))
    return sorted(wanted)


def cidr_list(cidrs: Iterable[Any]) -> List[str]:
    """Normalised networks (host bits cleared), sorted and unique; InvalidRequest for a non-CIDR."""
    found = set()
    for cidr in cidrs:
        try:
            found.add(str(ipaddress.ip_network(str(cidr).strip(), strict=False)))
        except ValueError:
            raise ProviderError(ErrorKind.INVALID_REQUEST, "allowed_cidrs: %r is not a CIDR" % (cidr,))
    return sorted(found)
