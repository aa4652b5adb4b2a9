"""Everything that affects the task state machine lives here: the states, which are final, and the moves
between them (data, as h11's ``_state.py``), shared by every face's tasks.

:class:`TaskState` is the neutral state of a task. Its *values* are the spelling a record is stored with, so
that records written before this module existed read the same and an A2A task renders as a copy; a face
maps a state to its own words (``a2a/tasks.py``: ``TASK_STATE_*``, the identity; ``mcp/tasks.py``: MCP task
statuses) and never spells one itself.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = [
    "INTERRUPTED",
    "RUNNING",
    "SETTLED",
    "TERMINAL",
    "TRANSITIONS",
    "TaskState",
    "allowed",
]


class TaskState(enum.StrEnum):
    """The state of a task. A member compares and hashes equal to its stored spelling (a plain ``str``)."""

    SUBMITTED = "TASK_STATE_SUBMITTED"  # accepted, not started
    WORKING = "TASK_STATE_WORKING"  # its coroutine runs
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"  # parked on a question to the caller
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"  # parked until the caller authorizes something
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    REJECTED = "TASK_STATE_REJECTED"  # refused before it ran


RUNNING: frozenset[str] = frozenset({TaskState.SUBMITTED, TaskState.WORKING})
"""A process runs (or is about to run) the task's coroutine: the orphan sweep looks at these."""
INTERRUPTED: frozenset[str] = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})
"""The task waits for its caller: a stream may stop here, a record is written."""
TERMINAL: frozenset[str] = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
)
"""Final: nothing changes the task any more."""
SETTLED: frozenset[str] = TERMINAL | INTERRUPTED
"""Final or waiting: a blocking request answers, the record is written."""

_ENDS = frozenset(TERMINAL)
TRANSITIONS: Mapping[str, frozenset[str]] = {
    TaskState.SUBMITTED: frozenset({TaskState.WORKING}) | INTERRUPTED | _ENDS,
    TaskState.WORKING: frozenset({TaskState.WORKING}) | INTERRUPTED | _ENDS,
    # an answer resumes it; a question follows a question; a cancel or a lost holder ends it
    TaskState.INPUT_REQUIRED: frozenset({TaskState.WORKING}) | INTERRUPTED | _ENDS,
    TaskState.AUTH_REQUIRED: frozenset({TaskState.WORKING}) | INTERRUPTED | _ENDS,
    TaskState.COMPLETED: frozenset(),
    TaskState.FAILED: frozenset(),
    TaskState.CANCELED: frozenset(),
    TaskState.REJECTED: frozenset(),
}
"""From each state, the states a task may move to. A terminal state goes nowhere."""


def allowed(current: str, new: str) -> bool:
    """Whether a task in ``current`` may move to ``new`` (an unknown state moves nowhere)."""
    return new in TRANSITIONS.get(current, frozenset())
