# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where gpuprov keeps its state on the controller: the journal, the controller key, ssh config."""

from __future__ import annotations

import os


def default_state_dir() -> str:
    """``$GPUPROV_HOME``, else ``$XDG_STATE_HOME/gpuprov``, else ``~/.local/state/gpuprov``."""
    if os.environ.get("GPUPROV_HOME"):
        return os.path.expanduser(os.environ["GPUPROV_HOME"])
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "gpuprov")


def default_journal_path() -> str:
    """``$GPUPROV_JOURNAL``, else ``<state dir>/journal.sqlite``."""
    return os.path.expanduser(os.environ.get("GPUPROV_JOURNAL") or
                              os.path.join(default_state_dir(), "journal.sqlite"))
