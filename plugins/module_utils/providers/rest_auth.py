# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The REST client's static credentials (rest.py re-exports them): a bearer token, a key in a header, HTTP basic
auth. Each gives the headers of a request and the secrets the client never shows; its repr shows none."""

from __future__ import annotations

import base64
from typing import Any, Dict, Tuple

from ansible_collections.gpuprov.cloud.plugins.module_utils.providers.base import BlockScope, ErrorKind, ProviderError

REDACTED = "***"


def secret_value(value: Any, option: str) -> str:
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise ProviderError(ErrorKind.CREDENTIALS, "%s: empty; set the option or its environment variable" % option,
                            BlockScope.CLOUD)
    return text


class BearerToken:
    """``Authorization: Bearer <token>``."""

    refreshable = False

    def __init__(self, token: str, option: str = "api_key"):
        self._token = secret_value(token, option)

    def headers(self) -> Dict[str, str]:
        return {"Authorization": "Bearer " + self._token}

    def secrets(self) -> Tuple[str, ...]:
        return (self._token,)

    def __repr__(self) -> str:
        return "BearerToken(%s)" % REDACTED


class HeaderToken:
    """A key in a header of the vendor's choosing (Hyperstack: ``api_key: <key>``)."""

    refreshable = False

    def __init__(self, header: str, value: str, option: str = "api_key"):
        self.header = header
        self._value = secret_value(value, option)

    def headers(self) -> Dict[str, str]:
        return {self.header: self._value}

    def secrets(self) -> Tuple[str, ...]:
        return (self._value,)

    def __repr__(self) -> str:
        return "HeaderToken(%r, %s)" % (self.header, REDACTED)


class BasicAuth:
    """HTTP basic auth (Lambda also takes the key as the user name with an empty password)."""

    refreshable = False

    def __init__(self, username: str, password: str = "", option: str = "api_key"):
        self._username = secret_value(username, option)
        self._password = password or ""
        self._encoded = base64.b64encode(("%s:%s" % (self._username, self._password)).encode("utf-8")).decode("ascii")

    def headers(self) -> Dict[str, str]:
        return {"Authorization": "Basic " + self._encoded}

    def secrets(self) -> Tuple[str, ...]:
        return tuple(s for s in (self._username, self._password, self._encoded) if s)

    def __repr__(self) -> str:
        return "BasicAuth(%s)" % REDACTED
