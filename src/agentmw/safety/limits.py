"""In-flight caps: a full agent or capability rejects at once with a retryable error, it never queues.

A call parked on a question (an A2A ``INPUT_REQUIRED`` task, an AG-UI interrupt, an MCP task waiting for
``tasks/update``) waits for a person, not for this process: it gives its in-flight slots back while it waits
(:meth:`InFlightLimits.parked`), so parked work can never lock out live calls, and parked calls have a cap of their
own (``max_parked``). An answer takes the slots again, even past the cap: the call was admitted once, and
refusing its answer would strand a person's reply.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from ..errors import Retryable

__all__ = ["Budgets", "InFlightLimits"]

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True, slots=True)
class Budgets:
    """Byte budgets of the tables kept per client-chosen id, caps per entry, and the cap on parked calls.

    Sizes are the lengths of the JSON the code already encodes (an AG-UI frame, an A2A message's canonical
    form, an MCP session's record), not of Python objects, which take two to three times as much. A table
    over its budget drops its oldest settled entries (running and parked ones stay, and count); an entry over
    its cap is refused with the protocol's error before anything runs. ``docs/limits.md`` lists them all.
    """

    # one AG-UI run's input (state, messages, props) as RUN_STARTED carries it: 413
    agui_input_bytes: int = 2 * MIB
    agui_run_buffer_bytes: int = 4 * MIB  # one run's reconnect buffer; its oldest frames go first
    agui_threads_bytes: int = 16 * MIB  # AG-UI threads in memory, measured by their latest run's input
    agui_runs_bytes: int = 16 * MIB  # AG-UI runs in memory: their input and reconnect buffer
    a2a_task_bytes: int = 2 * MIB  # the messages of one A2A task: -32602 past it
    a2a_tasks_bytes: int = 16 * MIB  # A2A task handles in memory, by their messages
    # remembered messageIds (the id, the caller, the message's fingerprint)
    a2a_message_ids_bytes: int = 16 * MIB
    # an MCP session's clientInfo and capabilities: initialize gets -32602 past it
    session_bytes: int = 64 * KIB
    sessions_bytes: int = 16 * MIB  # MCP sessions in memory on one replica
    max_parked: int = 1_000  # calls parked on a question at once; past it, parking fails as retryable
    parked_bytes: int = 64 * MIB  # what the parked calls' tasks and threads hold (as measured above)


# the slots the current task holds, innermost last: a skill and the tools it calls hold one each
_HELD: ContextVar[tuple[tuple[InFlightLimits, str], ...]] = ContextVar("agentmw_in_flight", default=())


class InFlightLimits:
    """The calls in flight, per agent and per capability, and the calls parked on a question: a call past a cap
    is refused at once (:meth:`acquire` says why), never queued."""

    def __init__(self, global_cap: int | None, max_parked: int = 1_000, parked_bytes: int = 64 * MIB) -> None:
        self.global_cap = global_cap
        self.max_parked = max_parked
        self.max_parked_bytes = parked_bytes
        self.total = 0
        self.per_capability: dict[str, int] = {}
        self.rejected = 0
        self.waiting = 0  # calls waiting on a question, holding no slot
        self.parked_bytes = 0  # what they hold, as their faces measured it

    def acquire(self, name: str, cap: int | None) -> str | None:
        """None when a slot was taken; otherwise why not (and nothing was taken)."""
        if self.global_cap is not None and self.total >= self.global_cap:
            self.rejected += 1
            return f"the agent is at its limit of {self.global_cap} calls in flight"
        current = self.per_capability.get(name, 0)
        if cap is not None and current >= cap:
            self.rejected += 1
            return f"{name} is at its limit of {cap} calls in flight"
        self.total += 1
        self.per_capability[name] = current + 1
        _HELD.set((*_HELD.get(), (self, name)))
        return None

    def release(self, name: str) -> None:
        self.total -= 1
        self.per_capability[name] -= 1
        held = _HELD.get()
        for index in range(len(held) - 1, -1, -1):
            if held[index][0] is self and held[index][1] == name:
                _HELD.set(held[:index] + held[index + 1 :])
                break

    @contextlib.contextmanager
    def parked(self, size: int = 0) -> Iterator[None]:
        """While the body waits for an answer, the current call's slots are free for other calls.

        ``size``: the bytes the parked call's task or thread holds. Raises :class:`Retryable` (nothing is given
        back or taken) when ``max_parked`` calls already wait, or their sizes would pass ``parked_bytes``.
        """
        if self.waiting >= self.max_parked or (
            self.waiting and self.parked_bytes + size > self.max_parked_bytes
        ):
            self.rejected += 1
            raise Retryable(
                f"the agent already has {self.waiting} calls waiting for an answer; nothing more can "
                "wait now",
                retry_after=60.0,
            )
        names = [name for limits, name in _HELD.get() if limits is self]
        for name in names:
            self.total -= 1
            self.per_capability[name] -= 1
        self.waiting += 1
        self.parked_bytes += size
        try:
            yield
        finally:
            self.waiting -= 1
            self.parked_bytes -= size
            for name in names:
                self.total += 1
                self.per_capability[name] += 1
