"""A task this process holds (:class:`LiveTask`): its record and what is not written yet (the engine's
``Handle``), its coroutine, who waits for it here, and what the face keeps of it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..lifecycle import Handle
from ..messages import Message

__all__ = ["LiveTask", "ResumedElsewhere", "live_bytes", "pinned", "release_waiters"]


class ResumedElsewhere(Exception):
    """Set on the answer future of a coroutine parked here when another process resumed its task."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"Task {task_id} was resumed by another process")


@dataclass(eq=False, slots=True)
class LiveTask(Handle):
    """A task this process holds: its record (``Handle``: what is not written yet), its coroutine, and what
    the face keeps of it here."""

    runner: asyncio.Task[None] | None = None
    answer: asyncio.Future[dict[str, Any]] | None = None
    settle_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    messages: list[Message] = field(default_factory=list)  # the user messages, as the skill sees them (ctx)
    quiet: bool = False  # nothing shown yet: a skill that may answer with a Message can still reply taskless
    first_view: dict[str, Any] | None = None  # a quiet task as submitted: a stream sends it once it is shown
    reply: dict[str, Any] | None = None  # the skill's message-only answer; then no task exists
    streamed: set[str] = field(default_factory=set)  # ids of the artifacts already sent
    on_reply: Callable[[dict[str, Any]], None] | None = None  # records a message-only reply (A2A messageIds)
    resume: Any = None  # the stored journal a follow-up resumes (its coroutine is in no process here)
    publish_later: bool = False  # publish once shown (a quiet task that streams)
    young: bool = False  # running, to be published if it still runs after Timing.publish_after_seconds
    face: Any = None  # what the face keeps here for the task (an MCP task's parked questions)
    bytes: int = 0  # its messages, as the face measured them (the handle table's budget, docs/limits.md)
    named: bool = False  # a quiet task whose id was given out (an immediate repeat): kept if it replies

    def holds(self) -> bool:
        """This process runs the coroutine, or it is parked here on a question."""
        return (self.runner is not None and not self.runner.done()) or self.answer is not None


def live_bytes(_task_id: str, live: LiveTask) -> int:
    return live.bytes


def pinned(live: LiveTask) -> bool:
    """A handle that runs, is parked, or has a waiter or a follower is never dropped from the table."""
    return bool(live.holds() or live.subscribers or live.settle_waiters or live.lock.locked())


def release_waiters(live: LiveTask) -> None:
    """The blocking sends waiting for the task to settle go on."""
    for waiter in live.settle_waiters:
        if not waiter.done():
            waiter.set_result(None)
    live.settle_waiters.clear()
