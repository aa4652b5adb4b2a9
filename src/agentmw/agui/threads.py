"""An AG-UI thread as this replica holds it, and its record in the shared state (``agui.threads``).

A thread holds the shared state (with a version the server arbitrates), the messages, the open interrupts and
at most one execution (``runs.Execution``). :meth:`Thread.record` is what every replica reads of it;
:meth:`Thread.load` takes the record another replica wrote. The lifecycle around it is ``runs.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .._transport import dumps_finite, loads
from ..context import Ask
from ..lifecycle import LEFT_FOR_ANOTHER
from ..state import encode

if TYPE_CHECKING:
    from .runs import Execution

__all__ = ["PendingInterrupt", "Thread", "iso", "thread_record"]


@dataclass(eq=False)
class PendingInterrupt:
    id: str
    key: str
    request: Ask | None
    expires: datetime
    kind: str = "ask"  # "ask": a parked ctx.ask; "arguments": the call has not started yet


@dataclass(eq=False)
class Thread:
    id: str
    owner: str
    skill: str
    state: dict[str, Any] = field(default_factory=dict)
    version: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    execution: Execution | None = None
    interrupts: dict[str, PendingInterrupt] = field(default_factory=dict)
    arguments: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None
    approval_id: str | None = None
    forwarded: dict[str, Any] = field(default_factory=dict)  # the run's forwardedProps (agui/messages.py)
    running: str | None = None  # the run carrying the execution now (any replica)
    parked_on: str | None = None  # the replica whose memory holds the execution parked on the interrupts
    execution_id: str | None = (
        None  # the journal of the thread's latest execution (any replica can replay it)
    )
    execution_info: dict[str, Any] | None = None  # while it is parked or resumed: startState, streamedText
    record_version: int = 0  # the version of the thread record this object matches (0: none written)
    bytes: int = (
        0  # its latest run's input as RUN_STARTED encoded it: state, messages, props (the table's budget)
    )

    def open_interrupt(
        self,
        key: str,
        request: Ask | None,
        message: str,
        schema: Mapping[str, Any],
        timeout: float,
        *,
        kind: str = "ask",
    ) -> dict[str, Any]:
        """The one constructor of interrupts: registers it on the thread, returns it as the wire shows it."""
        pending = PendingInterrupt(
            f"int-{os.urandom(8).hex()}",
            key,
            request,
            datetime.now(UTC) + timedelta(seconds=timeout),
            kind,
        )
        self.interrupts[pending.id] = pending
        reason = "confirmation" if request is not None and request.confirmation else "input_required"
        return {
            "id": pending.id,
            "reason": reason,
            "message": message,
            "responseSchema": dict(schema),
            "expiresAt": iso(pending.expires),
        }

    # --- the shared record ---------------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "skill": self.skill,
            "state": self.state,
            "version": self.version,
            "messages": self.messages,
            "arguments": self.arguments,
            "forwarded": self.forwarded,
            "idempotencyKey": self.idempotency_key,
            "approvalId": self.approval_id,
            "running": self.running,
            "parkedOn": self.parked_on,
            "execution": {"id": self.execution_id, **(self.execution_info or {})}
            if self.execution_id
            else None,
            "interrupts": {
                i.id: {"key": i.key, "kind": i.kind, "expires": i.expires.timestamp()}
                for i in self.interrupts.values()
            },
        }

    def load(self, value: Mapping[str, Any], version: int) -> None:
        """Take the record another writer made: the local execution stays, and one parked on interrupts the
        record no longer has is orphaned (answered or closed elsewhere), so it is cancelled."""
        self.owner = value["owner"]
        self.skill = value["skill"]
        self.state = value.get("state") or {}
        self.version = value.get("version") or 0
        self.messages = list(value.get("messages") or [])
        self.arguments = dict(value.get("arguments") or {})
        self.forwarded = dict(value.get("forwarded") or {})
        self.idempotency_key = value.get("idempotencyKey")
        self.approval_id = value.get("approvalId")
        self.running = value.get("running")
        self.parked_on = value.get("parkedOn")
        stored = value.get("execution")
        journaled: dict[str, Any] = stored if isinstance(stored, dict) else {}
        self.execution_id = journaled.get("id")
        self.execution_info = {k: v for k, v in journaled.items() if k != "id"} or None
        interrupts: dict[str, PendingInterrupt] = {}
        for key, item in (value.get("interrupts") or {}).items():
            local = self.interrupts.get(key)
            interrupts[key] = (
                local
                if local is not None
                else PendingInterrupt(
                    key,
                    item.get("key", ""),
                    None,
                    datetime.fromtimestamp(item.get("expires", 0), UTC),
                    item.get("kind", "ask"),
                )
            )
        orphaned = set(self.interrupts) - set(interrupts)
        self.interrupts = interrupts
        self.record_version = version
        execution = self.execution
        if (
            orphaned
            and execution is not None
            and execution.answer is not None
            and not execution.answer.done()
            and execution.task is not None
        ):
            execution.task.cancel(LEFT_FOR_ANOTHER)  # answered in another replica, which carries it on


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _plain(value: Any) -> Any:
    """A value as JSON holds it (what a function put in ``ctx.state`` may be any object)."""
    return loads(dumps_finite(value))


def thread_record(thread: Thread) -> dict[str, Any]:
    """The thread's record, as JSON holds it."""
    record = thread.record()
    try:
        encode(record)
    except (
        TypeError,
        ValueError,
    ):  # a function put something JSON cannot hold in ctx.state: as the wire shows it
        record = _plain(record)
    return record
