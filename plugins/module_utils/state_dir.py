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


def journal_location(configured: Optional[str] = None) -> str:
    """The journal a task uses: ``configured`` (the journal option), else the default; a
    PostgreSQL DSN as given, a path made absolute."""
    location = configured or default_journal_path()
    if is_dsn(location):
        return location.strip()
    return os.path.abspath(os.path.expanduser(location))


def journal_exists(location: str) -> bool:
    """Whether there may be a journal to read at ``location`` (a PostgreSQL journal is looked
    at on the server, so a DSN always may)."""
    return is_dsn(location) or os.path.exists(location)
