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


def crash_at_commit(n: int) -> Callable[[Optional[Dict[str, Any]], Dict[str, Any]], None]:
    """A hook that lets ``n`` commits through and kills the run (toy_machine.Crash) right before the next one."""
    from ansible_collections.gpuprov.cloud.tests.fakes.toy_machine import Crash  # pylint: disable=import-outside-toplevel
    commits = {"seen": 0}

    def hook(old: Optional[Dict[str, Any]], new: Dict[str, Any]) -> None:
        commits["seen"] += 1
        if commits["seen"] == n + 1:
            raise Crash("commit %d" % n)
    return hook
