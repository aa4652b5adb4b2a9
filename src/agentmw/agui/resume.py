"""The AG-UI resume decision, as data: which case a run that carries ``resume`` is, and why.

A run with ``resume`` answers (or cancels) the thread's open interrupts. What it does next depends on a few
facts about the thread on this replica (:func:`resume_facts`): the first case of :data:`RESUME_CASES` whose
facts hold decides (:func:`resume_case`), and ``Runs._resume_<name>`` (runs.py) does it. The table is the one
place that says which case wins over which, and why; everything that changes the decision changes it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from .threads import Thread

__all__ = ["RESUME_CASES", "ResumeCase", "resume_case", "resume_facts"]


@dataclass(frozen=True, slots=True)
class ResumeCase:
    """One row of :data:`RESUME_CASES`: the facts that must hold for it (:func:`resume_facts`), and why the
    run does what it does then (``Runs._resume_<name>``)."""

    name: str
    when: Mapping[str, bool]
    reason: str


RESUME_CASES: Final = (
    ResumeCase(
        "invalid",
        {"complete": False},
        "A resume answers every open interrupt and nothing else: any other is refused (INVALID_RESUME), and "
        "nothing is written.",
    ),
    ResumeCase(
        "cancel_parked",
        {"cancelled": True, "parked": True},
        "The client cancels, and the coroutine waits in this process: cancelling its task ends it for good "
        "(nothing after the question runs, its journal records the cancel); this run carries its end.",
    ),
    ResumeCase(
        "cancel_elsewhere",
        {"cancelled": True},
        "The client cancels an execution parked on another replica, or in none: its journal records the "
        "end, so no replica resumes it; the run ends cancelled.",
    ),
    ResumeCase(
        "arguments",
        {"arguments": True},
        "The interrupt asked for missing arguments, so nothing ran yet: the payload completes them and the "
        "run starts (or asks again).",
    ),
    ResumeCase(
        "answer_here",
        {"here": True},
        "The fast path: the coroutine that asked these very questions waits in this process's memory; it "
        "gets the answers, and this run carries its events from there.",
    ),
    ResumeCase(
        "expired",
        {"journaled": True, "expired": True},
        "Parked elsewhere or in no memory, and an interrupt expired with nobody closing it: it is late, so "
        "the journal records the end, and the client starts a new run (INVALID_RESUME).",
    ),
    ResumeCase(
        "replay",
        {"journaled": True},
        "Parked in another replica's memory, or in none (a restart): this replica replays the execution "
        "from its journal with the answers (docs/durability.md). The record names this run as running "
        "first, so of two replicas given the same resume one wins; a coroutine parked elsewhere is "
        "cancelled when its replica next sees the thread, and stops as taken over if it wakes first.",
    ),
    ResumeCase(
        "lost",
        {},
        "No journal names the execution (it never asked, or the record predates journals) and no memory "
        "here holds it: the interrupts are closed, a coroutine parked elsewhere is orphaned, and the client "
        "starts a new run (RESUME_LOST).",
    ),
)
"""How a run with ``resume`` goes on, first match wins; the last case matches always."""


def resume_facts(thread: Thread, resume: list[dict[str, Any]]) -> dict[str, bool]:
    """What :data:`RESUME_CASES` decides on, about a thread and a run's ``resume`` list."""
    answered = {entry.get("interruptId") for entry in resume}
    pending = list(thread.interrupts.values())
    execution = thread.execution
    task = execution.task if execution is not None else None
    parked = task is not None and not task.done()
    return {
        "complete": bool(pending) and answered == set(thread.interrupts),
        "cancelled": any(entry.get("status") == "cancelled" for entry in resume),
        "parked": parked,
        "arguments": bool(pending) and pending[0].kind == "arguments",
        # the coroutine that asked these very questions waits in this process's memory for the answers
        "here": parked
        and execution is not None
        and execution.answer is not None
        and not execution.answer.done()
        and task is not None
        and not task.cancelling()
        and all(p.request is not None for p in pending),
        "journaled": bool(pending) and pending[0].kind == "ask" and bool(thread.execution_id),
        "expired": any(p.expires <= datetime.now(UTC) for p in pending),
    }


def resume_case(facts: Mapping[str, bool]) -> ResumeCase:
    """The first case of :data:`RESUME_CASES` whose facts all hold."""
    return next(case for case in RESUME_CASES if all(facts[k] is v for k, v in case.when.items()))
