"""The error taxonomy a capability may raise, and the registration errors agentmw raises itself.

Every face maps the same four outcomes: a function that raises ``Retryable`` tells the caller to try
again (and when), ``NeedsInput`` asks a question, ``Permanent`` fails for good, and ``Rejected`` says
the request itself was not acceptable. Any other exception counts as permanent, with its message
sanitized so that no traceback or internal detail reaches a caller.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentError",
    "ConfigurationError",
    "NeedsInput",
    "Permanent",
    "RegistrationError",
    "Rejected",
    "Retryable",
]


class AgentError(Exception):
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


class RegistrationError(ValueError):
    """A capability cannot be registered as declared (bad name, duplicate, unsupported signature)."""


class ConfigurationError(ValueError):
    """A setting of the agent cannot work (a store URL of an unknown form, a folder that does not exist): raised
    when the agent is built, so that nothing fails later on a call."""
