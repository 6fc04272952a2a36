# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which workers of a fleet talk to the same account of a cloud, and so share its answers and its throttle.

A cloud meters its API per account (a token, a key pair, a project), sometimes per endpoint: two workers
whose credentials and endpoint agree are one account to it. ``account_scope`` names that without showing
the credentials: a digest of them, salted with the journal's id, so that the journal (where the name is
kept) never holds anything a credential could be read back from, and two journals' names never match.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, Iterable, Optional

# Options that choose the account or the endpoint a call is metered on, beside the adapter's secrets:
# AWS's profile and endpoint, the REST clouds' api_url, GCP's and Nebius's project, Prime Intellect's team...
ACCOUNT_OPTIONS = frozenset((
    "profile", "endpoint_url", "api_url", "api_endpoint", "project", "project_id", "team_id", "tenant_id",
    "service_account_id", "docker_host", "root",
))


def _digest(salt: Optional[str], parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(("%s\n%s" % (salt or "", text)).encode("utf-8")).hexdigest()[:20]


def account_scope(cloud: str, options: Dict[str, Any], secret_options: Iterable[str], journal_id: Optional[str]) -> str:
    """``cloud:<digest>``: the account ``options`` reach ``cloud`` with (its secrets and ACCOUNT_OPTIONS)."""
    secret = set(secret_options)
    chosen = {k: v for k, v in (options or {}).items() if (k in secret or k in ACCOUNT_OPTIONS) and v not in (None, "")}
    return "%s:%s" % (cloud, _digest(journal_id, chosen))


def question_key(kind: str, scope: str, *parts: Any) -> str:
    """A shared answer's key: what was asked (``kind``), of which account, about what (digested)."""
    return "%s|%s|%s" % (kind, scope, _digest(None, list(parts)))
