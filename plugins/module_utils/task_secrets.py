# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The secrets a task's output must never show besides its ``no_log`` options.

Ansible hides the value of every ``no_log`` option wherever it would show (the task's
``invocation``, its result, warnings, the module's log line). The ``journal`` option cannot
be one, as a whole: the user needs to see which journal a task used. But a PostgreSQL DSN may
carry a password (``postgresql://user:PW@host/db`` or ``?password=PW``): that password is a
no_log value of its own, registered before anything is shown, so that the DSN shows as
``postgresql://user:********@host/db``. So are the journal's secrets the task reads from its
environment: the password in the DSN of ``GPUPROV_JOURNAL``, and ``PGPASSWORD``. (The clouds'
credentials are their adapters' ``no_log`` options, hidden by Ansible when a task gives them; one
that an adapter reads from its environment variable is scrubbed by the adapter from every message.)

A module gets them through :class:`journal_module.JournalModule`; an action plugin, which
builds its own result, through :class:`Hidden`."""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Mapping, Optional, Set
from urllib.parse import unquote, unquote_plus

from ansible.module_utils.common.parameters import remove_values

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_pg import dsn_userinfo

# The user part of a libpq URI: everything between the scheme and the last "@" before the host's path.
_DSN_USERINFO = re.compile(r"^\s*postgres(?:ql)?://([^/?#]*)@", re.IGNORECASE)
_DSN = re.compile(r"^\s*postgres(?:ql)?://", re.IGNORECASE)


def dsn_secrets(location: Any) -> Set[str]:
    """The password(s) in a PostgreSQL DSN (``user:PW@`` and ``password=PW`` parameters), as
    written and as libpq decodes them; empty for anything that is not a DSN."""
    if not isinstance(location, str) or not _DSN.match(location):
        return set()
    found = set()
    userinfo = _DSN_USERINFO.match(location)
    # Also as widely as the user part can be read: a password holding an unencoded '/', '?' or '#'.
    for user_part in (userinfo.group(1) if userinfo else None, dsn_userinfo(location)):
        if user_part and ":" in user_part:
            found.add(user_part.split(":", 1)[1])
    query = location.split("?", 1)[1].split("#", 1)[0] if "?" in location else ""
    for pair in query.split("&"):
        key, _sep, value = pair.partition("=")
        if unquote_plus(key).strip().lower() == "password":
            found.add(value)
    return {shown for secret in found for shown in (secret, unquote(secret), unquote_plus(secret)) if shown}


def environment_secrets(environ: Optional[Mapping[str, str]] = None) -> Set[str]:
    """The journal's secrets a task may read from ``environ`` (default: this process's environment):
    the password of the ``GPUPROV_JOURNAL`` DSN, and ``PGPASSWORD``."""
    environ = os.environ if environ is None else environ
    found = dsn_secrets(environ.get("GPUPROV_JOURNAL"))
    if environ.get("PGPASSWORD"):
        found.add(environ["PGPASSWORD"])
    return found


def _credential_values(params: Mapping[str, Any]) -> Iterable[Any]:
    """Every value under ``cloud_options`` (credentials among them): never exempted from masking."""
    for options in (params.get("cloud_options") or {}).values():
        if isinstance(options, Mapping):
            yield from (v for v in options.values() if isinstance(v, (str, int, float)) and not isinstance(v, bool))


def task_secrets(params: Mapping[str, Any], environ: Optional[Mapping[str, str]] = None) -> Set[str]:
    """What the output of a task with ``params`` (as given or as validated) must not show besides
    its no_log options: its journal DSN's password (the DSN as written: the option is a ``str``, never
    expanded), its ``journal_password``, and :func:`environment_secrets`."""
    found = dsn_secrets(params.get("journal"))
    if params.get("journal_password"):
        found.add(str(params["journal_password"]))
    return found | environment_secrets(environ)


# The shortest value of the boot script's environment that is masked wherever it shows. Masking is by
# value, and the whole boot_script option is no_log (a user's variables may carry a secret), so its short
# values (a port, a flag, a wait in seconds: the k3s installer's) would blank every equal value of the
# result, the connection's port included. Every other no_log value (a credential) is masked whatever it is.
MIN_MASKED_LENGTH = 8


def _ordinary(value: Any) -> bool:
    text = str(value)
    return len(text) < MIN_MASKED_LENGTH or text.strip().lstrip("+-").replace(".", "", 1).isdigit()


def boot_script_values(params: Mapping[str, Any]) -> Set[str]:
    """The boot script's environment values that are ordinary output (short, or numbers): never masked by
    value, unless another no_log option holds the same value."""
    script = params.get("boot_script")
    env = script.get("env") if isinstance(script, Mapping) else None
    return {str(v) for v in (env or {}).values() if v is not None and _ordinary(v)}


class Hidden:
    """The secrets of one task, for an action plugin: ``result()`` and ``text()`` mask each with
    ``********`` wherever it shows, as Ansible masks a module's no_log values (but the ordinary values of the
    boot script's environment, :func:`boot_script_values`)."""

    def __init__(self, params: Mapping[str, Any], no_log_values: Iterable[str] = ()):
        credentials = {str(v) for v in _credential_values(params)}
        ordinary = boot_script_values(params) - credentials
        self.values = (set(no_log_values) - ordinary) | task_secrets(params)

    def result(self, result: Any) -> Any:
        if not self.values:
            return result
        # Ansible's flags (failed, changed) and empty fields keep their values, as a module's do.
        hidden = remove_values(result, self.values)
        if isinstance(result, dict):
            hidden.update({k: v for k, v in result.items() if v is None or isinstance(v, bool)})
        return hidden

    def text(self, text: str) -> str:
        return remove_values(text, self.values) if self.values else text
