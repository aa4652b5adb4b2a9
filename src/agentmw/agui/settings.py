"""What an agent's AG-UI face is configured with (``Agent(agui=AguiSettings(...))``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AguiSettings"]


@dataclass(frozen=True, slots=True)
class AguiSettings:
    """AG-UI options of an :class:`~agentmw.Agent`.

    How many runs and threads are kept, and for how long, are the agent's ``Limits`` (``max_runs``,
    ``max_threads``) and ``Timing`` (``run_retention_seconds``, ``thread_idle_seconds``).

    Args:
        path: where each skill is served as an AG-UI agent (``<path>/<skill>``).
        buffer_events: events kept per run for reconnecting clients.
        consumer_limit: frames a stream consumer may fall behind before it is disconnected.
        max_messages, max_state_bytes, max_values: the messages one run may carry, the size of its ``state``
            as compact JSON, and the values of its body (at most ``Limits.max_body_values``: a run costs more
            per value than an MCP or A2A request); past them, 422.
    """

    path: str = "/agui"
    buffer_events: int = 2048
    consumer_limit: int = 4096
    max_messages: int = 250
    max_state_bytes: int = 256 * 1024
    max_values: int = 5_000

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", "/" + self.path.strip("/"))
