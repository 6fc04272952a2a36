# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every adapter would otherwise write again: the missing-SDK error, the wrapper
that classifies an SDK's exceptions, and the checks of ports, CIDRs and requested
regions. Option parsing (types, timeouts, booleans, lists) is providers/options.py."""

from __future__ import annotations

import difflib
import functools
import ipaddress
from typing import Any, Callable, Iterable, List, Optional, Tuple, Type

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import ErrorKind, ProviderError
from ansible_collections.gpuprov.cloud.plugins.module_utils.requirements import missing_package

SSH_PORT = 22


def require_sdk(cloud: str, available: bool, package: str, import_error: Optional[BaseException] = None) -> None:
    """InvalidRequest saying how to install ``package`` (its pip name) when the SDK could not be imported:
    the exact command, with the path of the cloud's requirements file in this installed collection."""
    if not available:
        cause = " (%s)" % (import_error,) if import_error else ""
        raise ProviderError(ErrorKind.INVALID_REQUEST, "clouds: the %s adapter requires %s. %s%s"
                            % (cloud, package, missing_package(package, cloud), cause))


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
            raise ProviderError(ErrorKind.INVALID_REQUEST, "allowed_cidrs: %r is not a CIDR" % (cidr,)) from None
    return sorted(found)


# How many of a cloud's regions an unknown-region error names; the rest are counted.
REGIONS_NAMED = 12


def check_regions(cloud: str, requested: Iterable[Any], known: Iterable[str], first: Iterable[str] = (),
                  fold: bool = False, its: str = "its regions") -> List[str]:
    """The requested regions that ``cloud`` has, in the order asked and each once: what plan searches.

    ``known`` is every region the cloud has, from its catalogue, not only where it has capacity now (a
    real region with nothing free is "no offers", never this error). When the request names regions
    and ``cloud`` has none of them, plan has nothing to search and raises InvalidRequest naming them
    and the regions it has (``first`` first, e.g. its defaults, then the rest sorted; past
    REGIONS_NAMED, a count), with the nearest name where one looks like a typo. Where some requested
    regions are known, the others are left out, as the docker cloud always did: ``regions`` is shared
    by every cloud of a request (``clouds: [aws, gcp]`` with ``regions: [us-east-1, us-central1]``),
    so a region of another cloud is no typo. An empty ``known`` (an answer that names no region)
    cannot tell: the requested regions are returned as asked. ``fold`` compares ignoring case (the
    requested spellings are returned). ``cloud`` is how the message names the cloud ("the local cloud",
    "lambda"), ``its`` what it calls the list (where ``known`` is less than a catalogue: "the locations
    it lists H100 x1 in now")."""
    asked = list(dict.fromkeys(str(r) for r in requested or [] if r))
    names = {str(k) for k in known if k}
    if not asked or not names:
        return asked
    norm = (lambda name: name.casefold()) if fold else (lambda name: name)
    have = {norm(k) for k in names}
    kept = [r for r in asked if norm(r) in have]
    if kept:
        return kept
    ordered = [k for k in dict.fromkeys(str(f) for f in first) if k in names]
    ordered += sorted(names - set(ordered))
    listed = ", ".join(ordered[:REGIONS_NAMED])
    if len(ordered) > REGIONS_NAMED:
        listed += " and %d more" % (len(ordered) - REGIONS_NAMED)
    near = []
    for region in asked:
        near.extend(m for m in difflib.get_close_matches(region, ordered, n=2, cutoff=0.8) if m not in near)
    hint = " (did you mean %s?)" % " or ".join(near) if near else ""
    raise ProviderError(ErrorKind.INVALID_REQUEST, "regions: %s has %s %s%s; %s: %s" % (
        cloud, "no region" if len(asked) == 1 else "none of the regions", ", ".join(asked), hint, its, listed))
