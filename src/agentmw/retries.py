"""Retry policies for a function's steps: ``ctx.once(..., retry=RetryPolicy(...))`` and ``ctx.call(..., retry=...)``.

A :class:`RetryPolicy` says how often a step is tried (``attempts``, the first included), how long to wait between
tries (exponential backoff from ``initial_interval`` by ``backoff_coefficient``, capped at ``max_interval``, with
optional ``jitter``) and which errors are never retried (``non_retryable``), as Temporal's activity retry policy
and DBOS's step retries do. :func:`attempt` applies one; the journal (``agentmw.journal``) runs a journaled step
through it and records only the final result, so a replay neither repeats the tries nor their waits.

Never retried, whatever the policy: cancellation (and any ``BaseException`` that is not an ``Exception``),
:class:`~agentmw.errors.Permanent`, :class:`~agentmw.errors.Rejected`, :class:`~agentmw.errors.NeedsInput`. A
:class:`~agentmw.errors.Retryable` with ``retry_after`` waits that long instead of the backoff (capped at
``max_interval``, when one is given). docs/context.md, "Retries".
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from .errors import ConfigurationError, NeedsInput, Permanent, Rejected, Retryable

__all__ = ["STATS", "RetryPolicy", "RetryStats", "StepFailed", "attempt"]

T = TypeVar("T")

_NEVER_RETRIED: tuple[type[BaseException], ...] = (Permanent, Rejected, NeedsInput)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a step is retried.

    Args:
        attempts: the most tries, the first included (1: no retry). Default 3, as DBOS's steps.
        initial_interval: seconds to wait after the first failure. Default 1.0.
        backoff_coefficient: each wait is the previous one times this (at least 1). Default 2.0.
        max_interval: the longest wait, in seconds; default 100 times ``initial_interval`` (as Temporal).
        jitter: a fraction from 0 to 1: each wait is drawn uniformly within ``± jitter`` of the backoff (then
            capped), so that many callers failing at once do not retry in step. Default 0 (exact waits).
        non_retryable: exception types (or one type) that end the step at once, with their subclasses.
    """

    attempts: int = 3
    initial_interval: float = 1.0
    backoff_coefficient: float = 2.0
    max_interval: float | None = None
    jitter: float = 0.0
    non_retryable: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise ConfigurationError(
                f"RetryPolicy.attempts must be an int of at least 1, not {self.attempts!r}"
            )
        for field_name in ("initial_interval", "backoff_coefficient", "jitter"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ConfigurationError(f"RetryPolicy.{field_name} must be a number >= 0, not {value!r}")
        if self.backoff_coefficient < 1:
            raise ConfigurationError(
                f"RetryPolicy.backoff_coefficient must be at least 1, not {self.backoff_coefficient!r}"
            )
        if self.jitter > 1:
            raise ConfigurationError(f"RetryPolicy.jitter is a fraction from 0 to 1, not {self.jitter!r}")
        cap = self.max_interval
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or not cap >= 0):
            raise ConfigurationError(f"RetryPolicy.max_interval must be a number >= 0 or None, not {cap!r}")
        object.__setattr__(self, "non_retryable", _types(self.non_retryable))

    @property
    def cap(self) -> float:
        """The longest wait between two tries, in seconds."""
        return float(self.max_interval if self.max_interval is not None else 100 * self.initial_interval)

    def delay(self, failures: int) -> float:
        """The backoff, in seconds, after the ``failures``-th failed try (1, 2, ...), before jitter."""
        if failures < 1:
            raise ValueError("failures counts from 1")
        try:
            wait = self.initial_interval * self.backoff_coefficient ** (failures - 1)
        except OverflowError:
            wait = self.cap
        return min(float(wait), self.cap)

    def wait(self, failures: int, error: BaseException | None = None) -> float:
        """How long :func:`attempt` waits after the ``failures``-th failed try ended with ``error``: a
        :class:`~agentmw.errors.Retryable`'s ``retry_after`` when it has one (at most ``max_interval``, when
        that is given), else the backoff with its jitter, at most :attr:`cap`."""
        after = getattr(error, "retry_after", None) if isinstance(error, Retryable) else None
        if isinstance(after, (int, float)) and not isinstance(after, bool) and after >= 0:
            return float(after) if self.max_interval is None else min(float(after), self.max_interval)
        wait = self.delay(failures)
        if self.jitter:
            wait *= 1 + self.jitter * random.uniform(-1.0, 1.0)  # spreading retries, not a secret
        return max(0.0, min(wait, self.cap))

    def retryable(self, error: BaseException) -> bool:
        """Whether this policy would try again after ``error`` (attempts aside)."""
        if not isinstance(error, Exception):  # cancellation, KeyboardInterrupt, the outcomes' aborts
            return False
        return not isinstance(error, _NEVER_RETRIED + self.non_retryable)


def _types(value: object) -> tuple[type[BaseException], ...]:
    found: Iterable[object]
    if isinstance(value, type):
        found = (value,)
    elif isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        found = tuple(value)
    else:
        raise ConfigurationError(f"RetryPolicy.non_retryable takes exception types, not {value!r}")
    types: list[type[BaseException]] = []
    for item in found:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise ConfigurationError(f"RetryPolicy.non_retryable takes exception types, not {item!r}")
        types.append(item)
    return tuple(types)


class StepFailed(Permanent):
    """A step with a retry policy that failed for good: after its last try, or at once for an error it does not
    retry. In a journaled execution the failure is recorded, so a replay raises this again without running the
    step. It is :class:`~agentmw.errors.Permanent`: left unhandled, it ends the call failed with its message,
    which names the step, the tries and the error's type, but not the error's text (it may hold internals);
    ``cause_message`` has that text for the function itself."""

    def __init__(
        self, name: str, attempts: int, cause_message: str = "", cause_type: str = "Exception"
    ) -> None:
        tries = "attempt" if attempts == 1 else "attempts"
        super().__init__(f"step {name!r} failed after {attempts} {tries} ({cause_type})")
        self.name = name
        self.attempts = attempts
        self.cause_message = cause_message
        self.cause_type = cause_type

    @classmethod
    def from_error(cls, name: str, attempts: int, error: BaseException) -> StepFailed:
        return cls(name, attempts, str(error), type(error).__qualname__)


class RetryStats:
    """What :func:`attempt` did in this process, for the metrics (``agentmw_step_retries``): ``retries`` counts
    tries beyond the first, ``gave_up`` the steps that still failed after more than one try."""

    __slots__ = ("gave_up", "retries")

    def __init__(self) -> None:
        self.retries = 0
        self.gave_up = 0


STATS = RetryStats()
"""This process's counts (every agent's steps alike)."""


async def attempt(
    policy: RetryPolicy | None,
    run: Callable[[], Awaitable[T]],
    *,
    should_retry: Callable[[BaseException], bool] | None = None,
) -> T:
    """``await run()`` until it returns, as ``policy`` allows; the last error is raised as it was.

    ``policy`` None tries once. An error is retried only when the policy allows it (:meth:`RetryPolicy.retryable`)
    and ``should_retry(error)``, if given, is true; between tries this waits :meth:`RetryPolicy.wait`. A
    cancellation during a wait ends it at once.
    """
    if policy is None:
        return await run()
    failures = 0
    while True:
        try:
            return await run()
        except BaseException as exc:
            failures += 1
            if (
                failures >= policy.attempts
                or not policy.retryable(exc)
                or (should_retry is not None and not should_retry(exc))
            ):
                if failures > 1:
                    STATS.gave_up += 1
                raise
            wait = policy.wait(failures, exc)
        STATS.retries += 1
        await asyncio.sleep(wait)
