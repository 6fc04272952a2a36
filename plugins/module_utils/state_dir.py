# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where gpuprov keeps its state on the controller: the journal, the controller key, ssh config."""

from __future__ import annotations

import os
from typing import Optional

from ansible_collections.gpuprov.cloud.plugins.module_utils.machine.journal_pg import is_dsn


def default_state_dir() -> str:
    """``$GPUPROV_HOME``, else ``$XDG_STATE_HOME/gpuprov``, else ``~/.local/state/gpuprov``."""
    if os.environ.get("GPUPROV_HOME"):
        return os.path.expanduser(os.environ["GPUPROV_HOME"])
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "gpuprov")


def default_journal_path() -> str:
    """``$GPUPROV_JOURNAL``, else ``<state dir>/journal.sqlite`` (either may be a PostgreSQL DSN)."""
    configured = os.environ.get("GPUPROV_JOURNAL")
    if is_dsn(configured):
        return configured.strip()
    return os.path.expanduser(configured or os.path.join(default_state_dir(), "journal.sqlite"))


def journal_location(configured: Optional[str] = None, relative_to: Optional[str] = None) -> str:
    """The journal a task uses: ``configured`` (the journal option, as the task wrote it), else the
    default. A PostgreSQL DSN is taken as written; a path gets ``~`` and ``$VAR`` expanded and is
    made absolute (a relative one against ``relative_to``, else the working directory).

    The one place the option is expanded: it is a ``str`` option, not a ``path`` one, because
    Ansible expands a ``path`` whatever it holds, and a ``$`` in a DSN's password is the password's."""
    if not configured:
        location = default_journal_path()
        return location if is_dsn(location) else os.path.abspath(location)
    if is_dsn(configured):
        return configured.strip()
    path = os.path.expanduser(os.path.expandvars(configured))
    return os.path.abspath(os.path.join(relative_to or "", path))


def journal_exists(location: str) -> bool:
    """Whether there may be a journal to read at ``location`` (a PostgreSQL journal is looked
    at on the server, so a DSN always may)."""
    return is_dsn(location) or os.path.exists(location)
