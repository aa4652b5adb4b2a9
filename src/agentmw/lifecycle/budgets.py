"""Byte and count budgets: how many records, logs and handles a lifecycle client keeps, and for how long
(docs/limits.md). The state bounds what it stores (:func:`limit`); a process bounds the handles it holds
(:class:`~agentmw._bounded.BoundedTable`, re-exported as :data:`HandleTable`)."""

from __future__ import annotations

from collections.abc import Iterable

from .._bounded import BoundedTable
from ..state import State, StoreLimits

__all__ = ["HandleTable", "limit"]

HandleTable = BoundedTable
"""A process's handles, bounded in count, age and bytes; a pinned handle (running, parked) is never dropped."""


def limit(
    state: State,
    spaces: Iterable[str],
    *,
    max_count: int,
    max_age: float,
    max_len: int | None = None,
) -> None:
    """Bound each namespace of ``spaces``: at most ``max_count`` entries, each ``max_age`` seconds after its
    last write (a log: at most ``max_len`` events)."""
    for ns in spaces:
        if max_len is None:
            state.limit(ns, StoreLimits(max_count=max_count, max_age=max_age))
        else:
            state.limit(ns, StoreLimits(max_count=max_count, max_age=max_age, max_len=max_len))
