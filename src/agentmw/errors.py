"""Every exception agentmw raises or lets a capability raise, in one tree under :class:`AgentmwError`.

``docs/errors.md`` draws the tree and says what each branch means for a caller. In short:

- :class:`ConfigurationError` (and :class:`RegistrationError`): the agent cannot be built as configured;
  raised when it is built, never on a call.
- :class:`AgentError`: raised *by a capability* to choose its outcome. Every face maps the same four: a
  function that raises ``Retryable`` tells the caller to try again (and when), ``NeedsInput`` asks a question,
  ``Permanent`` fails for good, and ``Rejected`` says the request itself was not acceptable. Any other exception
  counts as permanent, with its message sanitized so that no traceback or internal detail reaches a caller.
- :class:`AccessRefused`: a caller refused at the identity boundary, before anything runs; it carries the HTTP
  ``status`` and ``headers`` (a ``WWW-Authenticate`` challenge, ``Retry-After``) every face answers with.
- :class:`SafetyViolation`: a call the safety layer refuses (a path outside the roots, an idempotency key
  reused with other arguments, an approval that cannot authorize the call); the pipeline turns it into a
  rejected outcome.
- ``ProtocolError`` (:mod:`agentmw._transport`): a request a face refuses on its wire (a JSON-RPC code and an
  HTTP status); faces render it at their boundary.

This module imports nothing of agentmw: every layer may raise from it.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AccessRefused",
    "AgentError",
    "AgentmwError",
    "ConfigurationError",
    "Forbidden",
    "NeedsInput",
    "Permanent",
    "RegistrationError",
    "Rejected",
    "Retryable",
    "SafetyViolation",
    "StoreUnavailable",
    "Unauthenticated",
    "retry_after_header",
]


class AgentmwError(Exception):
    """The base of every exception agentmw defines: ``except AgentmwError`` catches any of them."""


# --- configuration ------------------------------------------------------------------------------------------


class ConfigurationError(AgentmwError, ValueError):
    """A setting of the agent cannot work (a store URL of an unknown form, a folder that does not exist): raised
    when the agent is built, so that nothing fails later on a call."""


class RegistrationError(ConfigurationError):
    """A capability cannot be registered as declared (bad name, duplicate, unsupported signature)."""


# --- call outcomes: what a capability raises -----------------------------------------------------------------


class AgentError(AgentmwError):
    """Base class of the errors a capability may raise to choose its outcome."""

    def __init__(self, message: str = "", *, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class Retryable(AgentError):
    """A transient failure: the same call may succeed later, ideally after ``retry_after`` seconds."""

    def __init__(
        self, message: str = "temporarily unavailable", *, retry_after: float | None = None, data: Any = None
    ) -> None:
        super().__init__(message, data=data)
        self.retry_after = retry_after


class StoreUnavailable(Retryable):
    """The shared state cannot be used right now (Redis unreachable, paused or full; SQLite locked, full or
    read-only; Postgres down): nothing was acknowledged, and the same request may succeed once the store is back.
    Every backend raises it for its own transient faults, within a bounded time, so that every face answers its
    protocol's retryable error (HTTP 503 with ``Retry-After``) instead of an internal one."""

    def __init__(
        self,
        message: str = "the agent's store is unavailable; try again shortly",
        *,
        retry_after: float | None = 1.0,
        data: Any = None,
    ) -> None:
        super().__init__(message, retry_after=retry_after, data=data)


class Permanent(AgentError):
    """A failure that repeating the same call will not fix."""


class Rejected(AgentError):
    """The request itself is not acceptable (bad arguments, not allowed); nothing was executed."""


class NeedsInput(AgentError):
    """The function cannot go on without an answer from a person; ``schema`` describes the answer."""

    def __init__(self, question: str, *, schema: dict[str, Any] | None = None, data: Any = None) -> None:
        super().__init__(question, data=data)
        self.question = question
        self.schema = schema or {"type": "object", "properties": {}}


# --- access refusals: a caller refused at the identity boundary ----------------------------------------------


def retry_after_header(seconds: float) -> tuple[bytes, bytes]:
    """``Retry-After`` in whole seconds, rounded up, at least 1."""
    return (b"retry-after", str(max(1, int(-(-seconds // 1)))).encode())


class AccessRefused(AgentmwError):
    """A caller refused before anything ran: every face answers with ``status`` and ``headers``.

    The subclasses say why: no credentials (:class:`Unauthenticated`, 401), credentials that do not allow it
    (:class:`Forbidden`, 403), and, in :mod:`agentmw.auth`, a malformed credential (400), a foreign ``Host``
    (421), a rate limit (429), or a token that cannot be checked now (503).
    """

    status: ClassVar[int] = 403
    default_message: ClassVar[str] = "Forbidden"
    headers: list[tuple[bytes, bytes]] | None = None


class Unauthenticated(AccessRefused):
    """Missing or invalid credentials (an ``identify`` function may raise it): 401 with ``challenge`` as
    ``WWW-Authenticate``."""

    status: ClassVar[int] = 401
    default_message: ClassVar[str] = "Authentication required"

    def __init__(self, message: str = "Authentication required", *, challenge: str = "Bearer") -> None:
        super().__init__(message)
        self.challenge = challenge
        self.headers = [(b"www-authenticate", challenge.encode("latin-1", "replace"))]


class Forbidden(AccessRefused):
    """The caller is known but not allowed: 403."""


# --- safety refusals ----------------------------------------------------------------------------------------


class SafetyViolation(AgentmwError, ValueError):
    """A call the safety layer refuses before it runs; the pipeline answers it as a rejected outcome."""
