"""One structured log record per invocation, on the ``agentmw.invocations`` logger.

The record's message is one readable line; its fields are in ``record.agentmw`` (a dict, for a JSON
formatter): ``trace_id``, ``span_id``, ``caller_hash``, ``capability``, ``kind``, ``protocol``,
``outcome``, ``code``, ``duration_ms``, and ``arguments`` only when logging them was asked for, with the
redaction applied. The caller is never logged, only its hash; arguments are never logged by default.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["DEFAULT_REDACTED", "REDACTED", "InvocationLog"]

DEFAULT_REDACTED: tuple[str, ...] = (
    "password",
    "passwd",
    "secret",
    "token",
    "key",
    "authorization",
    "cookie",
    "credential",
    "ssn",
    "card",
    "iban",
    "cvv",
)
REDACTED = "[redacted]"

_logger = logging.getLogger("agentmw.invocations")
_FAILED = frozenset({"failed", "rejected"})


def redact_names(arguments: Any, names: tuple[str, ...]) -> Any:
    """``arguments`` with the value of every key that contains one of ``names`` replaced, at any depth."""
    if isinstance(arguments, Mapping):
        return {
            key: REDACTED if any(name in str(key).lower() for name in names) else redact_names(value, names)
            for key, value in arguments.items()
        }
    if isinstance(arguments, (list, tuple)):
        return [redact_names(value, names) for value in arguments]
    return arguments


class InvocationLog:
    def __init__(
        self,
        *,
        log_arguments: bool = False,
        redact: Iterable[str] | Callable[[Mapping[str, Any]], Any] | None = None,
    ) -> None:
        self.log_arguments = log_arguments
        if callable(redact):
            self._redact: Callable[[Any], Any] = redact
        else:
            names = tuple(n.lower() for n in (DEFAULT_REDACTED if redact is None else redact))
            self._redact = lambda arguments: redact_names(arguments, names)

    def record(self, invocation: Any, outcome: Any, elapsed: float, ids: tuple[str, str] | None) -> None:
        status = str(outcome.status)
        level = logging.WARNING if status in _FAILED else logging.INFO
        if not _logger.isEnabledFor(level):
            return
        capability = invocation.capability
        fields: dict[str, Any] = {
            "trace_id": ids[0] if ids else None,
            "span_id": ids[1] if ids else None,
            "caller_hash": invocation.data.get("caller_hash"),
            "capability": capability.name,
            "kind": capability.kind,
            "protocol": invocation.protocol,
            "outcome": status,
            "code": str(outcome.code) if outcome.code else None,
            "duration_ms": round(elapsed * 1000, 3),
        }
        if self.log_arguments:
            try:
                fields["arguments"] = self._redact(invocation.arguments)
            except Exception:
                _logger.exception(
                    "redacting the arguments of %s failed: they are not logged", capability.name
                )
                fields["arguments"] = REDACTED
        _logger.log(
            level,
            "%s %s %s via %s: %s%s in %.1f ms (trace %s)",
            fields["kind"],
            fields["capability"],
            f"for {fields['caller_hash']}" if fields["caller_hash"] else "anonymously",
            fields["protocol"],
            status,
            f" ({fields['code']})" if fields["code"] else "",
            fields["duration_ms"],
            fields["trace_id"] or "-",
            extra={"agentmw": fields},
        )
