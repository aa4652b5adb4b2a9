"""What an agent says about itself on A2A, and how its tasks are kept and pushed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .policy import PushPolicy

__all__ = ["A2ASettings"]


@dataclass(frozen=True)
class A2ASettings:
    """A2A options of an :class:`~agentmw.Agent` (``Agent(a2a=A2ASettings(...))``).

    Its tasks live in the agent's store (``Agent(store=...)``, docs/state.md), so every replica sharing it
    serves every task; how many and for how long are ``Limits.max_tasks`` and ``Timing.task_retention_seconds``.

    Args:
        path: where the A2A endpoint lives (JSON-RPC at ``path``, HTTP+JSON under it), relative to where the
            agent is mounted.
        description: the card's description (defaults to the agent's instructions, then its name).
        provider, documentation_url: copied to the card.
        security_schemes: card ``securitySchemes`` in 1.0 shape, e.g.
            ``{"bearer": {"httpAuthSecurityScheme": {"scheme": "bearer"}}}``.
        security_requirements: e.g. ``[{"bearer": []}]``.
        extended_card: ``identity -> extra card fields``, or None when that caller may not see it (403).
            Needs ``Agent(identify=...)`` to tell who the caller is.
        write_behind: False (the default, write-through): every answer (a result, a state such as
            ``INPUT_REQUIRED``, an accepted follow-up) goes out only once the task's record is committed to the
            store, the records of concurrent requests committed together (group commit); a store that refuses
            the write makes the answer a retryable error after ``commit_wait_seconds`` (the record stays
            queued and is written once the store takes it). True (opt-in): a blocking ``SendMessage`` answers
            as soon as its task settles and the write follows within about 5 ms; a process that dies in that
            window loses the record of a task already answered (docs/durability.md, "What is acknowledged
            when").
        push: the push policy (:class:`~agentmw.a2a.PushPolicy`: where pushes may go, its allowlist, configs
            per task and token length, retries; docs/a2a.md); ``None`` turns push notifications off (and
            says so on the card).
        dedupe_message_ids: whether a repeat of the *same* message (same caller, ``messageId``, content
            and ``taskId``) gets the first one's task (or reply, or a parked task's state at once) instead of
            running again (docs/a2a.md, "Repeated messages"). The spec leaves this to the server (a MAY,
            A2A#928). ``"side-effects"`` (the default): only where running again could do something twice:
            a new message whose skill (or tool) is neither ``read_only`` nor ``idempotent``, and every
            follow-up on a task; a repeat to a read-only or idempotent skill is a new message, with a task
            of its own (what the A2A TCK expects). ``True``: every repeat; ``False``: none (every message
            runs). A reused ``messageId`` with anything different is always a new message, with a warning
            in the log. Anonymous callers' messages are never de-duplicated (they share one identity, and
            one must never get another's task). Separate from idempotency keys.
        message_id_ttl_seconds: how long a ``messageId`` is remembered for that (``Limits.max_message_ids`` caps
            how many are).
        max_parts: the parts one message may hold (``SendMessage``, ``SendStreamingMessage`` and their 0.3 names);
            past it, the binding's invalid-params error, before anything runs (docs/limits.md, "Request bodies").
        card_v03: serve the card with the 0.3 fields merged in at ``/.well-known/agent-card.json`` too, for 0.3
            clients that send no ``A2A-Version`` (the a2a-sdk server's behaviour). Off by default: that card
            fails a strict A2A 1.0 validator. 0.3 readers always get it at ``/.well-known/agent.json``.
    """

    path: str = "/a2a"
    description: str = ""
    provider: Mapping[str, str] | None = None
    documentation_url: str | None = None
    security_schemes: Mapping[str, Any] | None = None
    security_requirements: Sequence[Mapping[str, Sequence[str]]] | None = None
    extended_card: Callable[[str], Mapping[str, Any] | None] | None = None
    write_behind: bool = False
    push: PushPolicy | None = field(default_factory=PushPolicy)
    dedupe_message_ids: bool | Literal["side-effects"] = "side-effects"
    message_id_ttl_seconds: float = 3600.0
    max_parts: int = 1_000
    card_v03: bool = (
        False  # merge the 0.3 fields into every card, as the a2a-sdk server does (not strict 1.0)
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", "/" + self.path.strip("/"))
        if self.dedupe_message_ids not in (True, False, "side-effects"):
            raise ValueError(
                f'dedupe_message_ids must be True, False or "side-effects", not {self.dedupe_message_ids!r}'
            )

    @property
    def push_enabled(self) -> bool:
        return self.push is not None
