# -*- coding: utf-8 -*-
# Copyright: contributors to gpuprov.cloud
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A journal that calls a test's hook right before it commits each transition: where a test crashes a run
between a step's side effect and its commit (the seed's crash points), or records what each commit replaces.

``hook(old, new)`` gets the journalled JSON of the state being left (the row as it stands) and of the one about to
be committed; raising from it leaves the commit undone, as a process killed at that moment would. Everything else
is the wrapped journal's own."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional


class JournalWithCommitHook:
    def __init__(self, journal: Any, hook: Callable[[Optional[Dict[str, Any]], Dict[str, Any]], None]):
        self._journal = journal
        self._hook = hook

    def transition(self, key: str, owner: str, version: int, state: Dict[str, Any], *args: Any, **kwargs: Any) -> int:
        row = self._journal.load(key)
        self._hook(row.state if row is not None else None, state)
        return self._journal.transition(key, owner, version, state, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)


def with_commit_hook(journal: Any, hook: Optional[Callable[[Optional[Dict[str, Any]], Dict[str, Any]], None]]) -> Any:
    """``journal`` itself without a hook, else the journal wrapped to call it."""
    return journal if hook is None else JournalWithCommitHook(journal, hook)
