"""How an invocation ended: :class:`Outcome`, its :class:`Status` and :class:`Code`; how exceptions map to it.

The vocabulary every stage of the pipeline (``pipeline.py``), the journal and the faces share. It knows no
protocol: each face renders an outcome onto its own wire (docs/context.md, "Outcomes").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ._codec import from_json, to_json
from .content import Text
from .context import Ask, ClientCapabilityMissing, InputRequest
from .errors import AgentError, NeedsInput, Permanent, Rejected, Retryable
from .safety.idempotency import register_outcome_load

if TYPE_CHECKING:
    from .capability import Capability

__all__ = [
    "PERMANENT",
    "Code",
    "InputsPending",
    "Outcome",
    "Status",
    "describe_validation_error",
    "http_exception_outcome",
    "missing_capability",
    "needs_input",
    "raised_outcome",
    "refused",
    "settled",
    "unexpected",
]

logger = logging.getLogger("agentmw")


class Status(StrEnum):
    """How an invocation ended. Each face maps it to its wire (docs/context.md, "Outcomes")."""

    COMPLETED = "completed"
    NEEDS_INPUT = "needs_input"  # questions for the caller (``pending``); answered, the call goes on
    AWAITING_APPROVAL = "awaiting_approval"  # a person must approve the exact action first (``pending``: one
    # confirmation; ``data["approval"]``: the out-of-band approval to decide)
    FAILED = "failed"  # ``retryable`` tells a retry that may work from one that will not (permanent)
    REJECTED = "rejected"  # refused before or instead of running: invalid arguments, a root, a policy
    CANCELED = "canceled"

    @property
    def asks(self) -> bool:
        """The call waits for someone: the caller (questions) or an approver."""
        return self is Status.NEEDS_INPUT or self is Status.AWAITING_APPROVAL


class Code(StrEnum):
    """Why an outcome is what it is, beyond its status: the ``code`` of failures, refusals and the
    runtime's own answers. Each is a plain string on the wire (JSON-RPC ``data``, AG-UI ``RUN_ERROR``)."""

    INVALID_ARGUMENTS = "invalid_arguments"
    INVALID_OUTPUT = "invalid_output"
    ROOT_VIOLATION = "root_violation"
    NOT_FOUND = "not_found"
    REJECTED = "rejected"
    PERMANENT = "permanent"
    RETRYABLE = "retryable"
    RAISED = "raised"
    TIMEOUT = "timeout"
    BUSY = "busy"
    CANCELED = "canceled"
    RATE_LIMITED = "rate_limited"
    UNAUTHENTICATED = "unauthenticated"
    INSUFFICIENT_SCOPE = "insufficient_scope"
    FORBIDDEN = "forbidden"  # a host dependency's 403 (docs/auth.md)
    MISSING_CAPABILITY = "missing_capability"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    APPROVAL_INVALID = "approval_invalid"
    APPROVAL_REJECTED = "approval_rejected"
    APPROVAL_UNAVAILABLE = "approval_unavailable"
    TAKEN_OVER = "taken_over"
    EXECUTION_BUSY = "execution_busy"
    UNKNOWN_EXECUTION = "unknown_execution"
    UNKNOWN_CAPABILITY = "unknown_capability"
    REPLAY_DIVERGED = "replay_diverged"
    HOOK_FAILED = "hook_failed"  # a hook's ``before`` raised: the call fails closed (docs/observability.md)
    CLIENT_NOT_ANSWERED = (
        "client_not_answered"  # the gate's or the roots' question went unanswered (MCP, 2025)
    )


PERMANENT = "This failure is permanent: repeating the same call will not help."
_RETRYABLE_HTTP = frozenset({408, 425, 429, 502, 503, 504})


class InputsPending(BaseException):
    """Raised by a channel that cannot wait in place: the call ends now with these questions.

    A BaseException, like cancellation, so that a function's own ``except Exception`` cannot swallow it.
    """

    def __init__(
        self, requests: Mapping[str, InputRequest], answered: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__("input required")
        self.requests = dict(requests)
        self.answered = dict(answered or {})


@dataclass(slots=True)
class Outcome:
    status: Status
    content: list[Any] = field(default_factory=list)
    structured: Any = None
    message: str = ""
    retryable: bool = False
    retry_after: float | None = None
    pending: dict[str, InputRequest] | None = None
    code: Code | str | None = None
    """A :class:`Code`; a plain string only where the code carries a value (``http_404``), or a stored one."""
    data: Any = None
    value: Any = None

    @property
    def is_error(self) -> bool:
        return self.status in (Status.FAILED, Status.REJECTED)

    def to_dict(self) -> dict[str, Any]:
        """The outcome as strict JSON, for the shared state (an idempotency key's first outcome, read back
        on any replica with :meth:`from_dict`). Content parts, messages, artifacts and questions keep their
        types; any other value is kept as its JSON form (``_codec``)."""
        return {
            "status": str(self.status),
            "content": to_json(self.content),
            "structured": to_json(self.structured),
            "message": self.message,
            "retryable": self.retryable,
            "retryAfter": self.retry_after,
            "pending": to_json(self.pending),
            "code": None if self.code is None else str(self.code),
            "data": to_json(self.data),
            "value": to_json(self.value),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Outcome:
        return cls(
            status=Status(data["status"]),
            content=from_json(data.get("content")) or [],
            structured=from_json(data.get("structured")),
            message=data.get("message") or "",
            retryable=bool(data.get("retryable")),
            retry_after=data.get("retryAfter"),
            pending=from_json(data.get("pending")),
            code=data.get("code"),
            data=from_json(data.get("data")),
            value=from_json(data.get("value")),
        )


register_outcome_load(Outcome.from_dict)  # the idempotency cache rebuilds stored outcomes with it


def refused(code: Code, message: str, **fields: Any) -> Outcome:
    """A ``rejected`` outcome: nothing ran."""
    return Outcome(status=Status.REJECTED, message=message, code=code, **fields)


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "Invalid arguments: " + "; ".join(parts)


def settled(outcome: Outcome) -> bool:
    """Outcomes an idempotency key keeps: final ones, not a retryable failure or a pending question."""
    return outcome.status in (Status.COMPLETED, Status.REJECTED) or (
        outcome.status == Status.FAILED and not outcome.retryable
    )


def _sanitized(capability: Capability, exc: BaseException) -> str:
    """What a caller learns of an unexpected exception: its type, never its message or traceback.

    Exception messages routinely carry internals (paths, queries, credentials); a function that wants
    the caller to read a message raises ``Permanent``, ``Retryable`` or ``Rejected`` with it.
    """
    kind = type(exc).__name__
    return f"{capability.name} failed with an internal error ({kind}); details are in the server log."


def unexpected(capability: Capability, exc: BaseException) -> Outcome:
    """An exception agentmw has no meaning for: logged with its traceback, told to the caller by type only."""
    logger.error("capability %r raised", capability.name, exc_info=exc)
    message = _sanitized(capability, exc)
    return Outcome(
        status=Status.FAILED, content=[Text(f"{message} {PERMANENT}")], message=message, code=Code.PERMANENT
    )


def http_exception_outcome(exc: Exception) -> Outcome | None:
    """A FastAPI/Starlette ``HTTPException`` (raised by a function or a host dependency) as a failure."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or type(exc).__name__ not in ("HTTPException",):
        return None
    detail = getattr(exc, "detail", "") or ""
    if not isinstance(detail, str):
        detail = json.dumps(detail, default=str)
    headers = getattr(exc, "headers", None) or {}
    retry_after = None
    raw = headers.get("Retry-After") or headers.get("retry-after")
    if raw is not None:
        try:
            retry_after = float(raw)
        except ValueError:
            retry_after = None
    retryable = status in _RETRYABLE_HTTP or status >= 500 and status != 501
    return Outcome(
        status=Status.FAILED,
        content=[Text(f"HTTP {status}: {detail}".rstrip(": "))],
        message=f"HTTP {status}: {detail}",
        retryable=retryable,
        retry_after=retry_after,
        code=f"http_{status}",
        data={"status": status, "detail": detail},
    )


def raised_outcome(exc: Exception) -> Outcome | None:
    """agentmw's own exceptions (a question, a retryable, rejected or permanent failure, a missing client
    capability), raised by a function, or by a route handler and not turned into a response by the app."""
    if isinstance(exc, NeedsInput):
        return Outcome(
            status=Status.NEEDS_INPUT,
            pending={"question": Ask(exc.question, exc.schema)},
            message=exc.question,
            code=Code.RAISED,
        )
    if isinstance(exc, Retryable):
        when = (
            f" Retry after {exc.retry_after:g} seconds." if exc.retry_after is not None else " Retry later."
        )
        return Outcome(
            status=Status.FAILED,
            content=[Text(exc.message + when)],
            message=exc.message,
            retryable=True,
            retry_after=exc.retry_after,
            code=Code.RETRYABLE,
            data=exc.data,
        )
    if isinstance(exc, Rejected):
        return Outcome(status=Status.REJECTED, message=exc.message, code=Code.REJECTED, data=exc.data)
    if isinstance(exc, (Permanent, AgentError)):
        return Outcome(
            status=Status.FAILED,
            content=[Text(f"{exc.message} {PERMANENT}")],
            message=exc.message,
            code=Code.PERMANENT,
            data=exc.data,
        )
    if isinstance(exc, ClientCapabilityMissing):
        return missing_capability(exc)
    return None


def missing_capability(exc: ClientCapabilityMissing) -> Outcome:
    """The caller cannot answer what the call asks (no elicitation, sampling or roots)."""
    return Outcome(
        status=Status.REJECTED,
        message=str(exc),
        code=Code.MISSING_CAPABILITY,
        data=exc.capability,
        pending=exc.requests or None,
    )


def needs_input(pending: InputsPending) -> Outcome:
    """The call stops on questions its channel cannot wait for in place (a stateless era, a parked run)."""
    return Outcome(status=Status.NEEDS_INPUT, pending=pending.requests, data=pending.answered)
