"""How often and how long the lifecycle acts: heartbeats, leases, sweeps, waits. Not the public
``agentmw.Timing`` (how long an agent keeps and waits for what callers see); a face sets its own cadence."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Cadence"]


@dataclass(frozen=True, slots=True)
class Cadence:
    """How long things last (A2A's are module constants of ``a2a/registry.py``, MCP's ``mcp/tasks.TIMING``)."""

    publish_after_seconds: float = 0.25  # a task still running this long is written, for other replicas
    heartbeat_seconds: float = 10.0  # a process's heartbeat key lives this long, renewed every third of it
    lease_seconds: float = 10.0  # a running task's journal lease (docs/durability.md), renewed every third
    sweep_seconds: float = 5.0  # a process looks for orphaned tasks on first use, then at most this often
    retry_take_over_seconds: float = 2.0  # a take-over that found the task busy is not tried again sooner
    cancel_wait_seconds: float = 5.0  # how long a cancel waits for the holder to confirm
    commit_wait_seconds: float = 5.0  # how long an answer waits for its record to be committed before the
    # caller is told StoreUnavailable (retryable; the record stays queued and is written once the store takes it)
