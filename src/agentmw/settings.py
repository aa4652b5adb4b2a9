"""The settings every face shares: how much an agent accepts and keeps (:class:`Limits`) and for how long
(:class:`Timing`).

Each is a frozen value given once to ``Agent(limits=..., timing=...)`` and handed to the faces as the agent
builds them, as httpx's ``Limits`` and ``Timeout`` are. The settings of one face are its own object
(``McpSettings``, ``A2ASettings``, ``AguiSettings``). ``docs/limits.md`` lists every limit and its default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["Limits", "Timing"]

MIB: Final = 1024 * 1024
HOUR: Final = 3600.0
DAY: Final = 24 * HOUR


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one agent accepts per request and keeps at once; past a limit, the face's error.

    Args:
        max_body_bytes: a larger request body gets 413, on every face.
        max_body_values, max_body_depth: the JSON values (array items and object members, at every level)
            and the nesting one request body may hold, counted before it is decoded (at most 128 levels).
        max_in_flight: calls running at once across the agent; past it, calls are refused as retryable.
        max_sessions: handshake-era MCP sessions kept at once (per replica: past it, ``initialize`` gets
            503; in the store: past it, the least recently used session is forgotten).
        max_used_states: completed MCP ``requestState`` values remembered (each for
            ``Timing.input_state_ttl_seconds``) so that none completes twice.
        max_runs: AG-UI runs kept for reconnects and cancels (a run still in progress is always kept).
        max_threads: AG-UI threads kept (one with a run in progress, a parked question or an open interrupt
            is always kept).
        max_tasks: A2A tasks the agent's store keeps.
        max_message_ids: A2A ``messageId`` values remembered for deduplication (each for
            ``A2ASettings.message_id_ttl_seconds``; ``A2ASettings.dedupe_message_ids`` turns it off).
        max_idempotency_keys: idempotency records kept (each for ``Timing.idempotency_ttl_seconds``).
        max_approvals: out-of-band approvals kept (each until its gate's ``ttl_seconds``).
        max_untrusted_chars: text of an ``untrusted`` capability beyond this is truncated, with a marker.
        max_recovery_attempts: how many times one journaled execution is taken over (its replica died, or
            lost it) before it is given up as a dead letter (status ``dead``; its caller gets a failure saying
            so; ``agentmw executions retry`` makes it runnable again); DBOS's default.
        max_steps_per_execution: journaled steps (questions, ``ctx.call``, ``ctx.once``, patch markers) one
            execution may record; past it, it fails for good (code ``journal_full``).
        max_journal_bytes: bytes of journal (its steps' recorded values, encoded) one execution may record;
            past it, it fails for good (code ``journal_full``).
    """

    max_body_bytes: int = 4 * MIB
    max_body_values: int = 10_000
    max_body_depth: int = 64
    max_in_flight: int | None = None
    max_sessions: int = 10_000
    max_used_states: int = 100_000
    max_runs: int = 1_000
    max_threads: int = 10_000
    max_tasks: int = 10_000
    max_message_ids: int = 100_000
    max_idempotency_keys: int = 100_000
    max_approvals: int = 10_000
    max_untrusted_chars: int = 20_000
    max_recovery_attempts: int = 100
    max_steps_per_execution: int = 10_000
    max_journal_bytes: int = 16 * MIB


@dataclass(frozen=True, slots=True)
class Timing:
    """How long an agent keeps what it remembers, and how long it waits.

    Args:
        session_idle_seconds: a handshake-era MCP session unused for this long, on every replica, is forgotten.
        input_state_ttl_seconds: how long an MCP ``requestState`` stays valid (and, once used, remembered).
        park_timeout_seconds: how long a call parked on a question (an A2A ``INPUT_REQUIRED`` task, an AG-UI
            interrupt, an MCP task waiting for input) waits for its answer before it fails.
        run_retention_seconds: how long an AG-UI run is kept after it starts (one in progress always is).
        thread_idle_seconds: how long an unused AG-UI thread is kept.
        task_retention_seconds: how long an A2A task is kept after its last update.
        idempotency_ttl_seconds: how long a repeated idempotency key returns the first outcome.
        keepalive_seconds: a stateless MCP call that stays silent this long sends its stream a keep-alive
            comment, so proxies do not cut it.
        sync_watch_delay_seconds: a stateless MCP call waiting on a sync function's thread starts watching for
            the client leaving only after this long (a thread cannot be interrupted: watching a fast one would
            only cost).
    """

    session_idle_seconds: float = HOUR
    input_state_ttl_seconds: float = 900.0
    park_timeout_seconds: float = HOUR
    run_retention_seconds: float = HOUR
    thread_idle_seconds: float = HOUR
    task_retention_seconds: float = 7 * DAY
    idempotency_ttl_seconds: float = DAY
    keepalive_seconds: float = 15.0
    sync_watch_delay_seconds: float = 1.0
