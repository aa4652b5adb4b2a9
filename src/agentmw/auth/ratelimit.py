"""Rate limits per caller and per capability, kept in the agent's shared state so they hold across replicas.

Each limit is one small record per key (``ratelimit`` namespace), updated with compare-and-set: of replicas
taking the last unit at once, one gets it and the others read the new count and are refused. Two algorithms:

- ``"window"``: at most ``requests`` per fixed window of ``per`` seconds (windows start at multiples of
  ``per`` since the epoch); a refusal says when the window ends.
- ``"bucket"``: a token bucket of ``requests`` tokens refilled at ``requests / per`` a second; bursts up to
  the bucket, then a steady rate; a refusal says when the next token arrives.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..state import Conflict, StoreLimits

__all__ = ["NAMESPACE", "Limiter", "RateLimit"]

NAMESPACE = "ratelimit"
_CONTENDED_SECONDS = 2.0
"""How long a take may keep losing compare-and-set races before it is refused: a burst of N callers on one key
needs up to N rounds (each round one of them wins), so a count of tries would refuse a burst wider than it."""
_BACKOFF_SECONDS = 0.002
"""The most a loser waits, at random, before counting again, so a burst does not retry in lockstep."""


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``requests`` per ``per`` seconds.

    ``Agent(rate_limits=[...])``: per caller, over every request to a face (HTTP 429 with ``Retry-After``).
    ``@tool(rate_limit=...)`` (and skills, resources, prompts): per caller, for that capability, in the
    pipeline (a retryable failure with ``retry_after``, in each protocol's form). ``shared=True`` counts every
    caller together instead.
    """

    requests: int
    per: float = 60.0
    algorithm: Literal["window", "bucket"] = "window"
    shared: bool = False

    def __post_init__(self) -> None:
        if self.requests < 1 or self.per <= 0:
            raise ValueError("a rate limit needs requests >= 1 and per > 0")
        if self.algorithm not in ("window", "bucket"):
            raise ValueError("algorithm is 'window' or 'bucket'")

    def describe(self) -> str:
        return f"{self.requests} per {self.per:g} s"


class Limiter:
    """Takes units of rate limits from the shared state (``state`` is called on first use)."""

    def __init__(self, state: Callable[[], Any]) -> None:
        self._state = state
        self._max_age = 0.0
        self.refused = 0

    def _open(self, limit: RateLimit) -> Any:
        state = self._state()
        if limit.per * 2 > self._max_age:  # records outlive the longest window, then expire unused
            self._max_age = max(limit.per * 2, 60.0)
            state.limit(NAMESPACE, StoreLimits(max_count=100_000, max_age=self._max_age))
        return state

    async def take(self, limit: RateLimit, key: str) -> float | None:
        """Take one unit for ``key``: None when allowed, else the seconds until one is available."""
        state = self._open(limit)
        record_key = _record_key(limit, key)
        give_up = time.monotonic() + _CONTENDED_SECONDS
        while True:
            found = await state.get(NAMESPACE, record_key)
            now = time.time()
            value, wait = (_window if limit.algorithm == "window" else _bucket)(
                limit, found.value if found else None, now
            )
            if wait is not None:
                self.refused += 1
                return wait
            try:
                await state.put(NAMESPACE, record_key, value, expected_version=found.version if found else 0)
                return None
            except Conflict:  # another request (on this replica or another) took a unit first: count again
                if time.monotonic() >= give_up:
                    break
                await asyncio.sleep(random.uniform(0, _BACKOFF_SECONDS))
        self.refused += 1
        return 1.0  # contended past reason: refuse briefly rather than overrun the limit


def _record_key(limit: RateLimit, key: str) -> str:
    raw = f"{limit.algorithm}:{limit.requests}/{limit.per:g}:{key}"
    return raw if len(raw) <= 200 else raw[:80] + "#" + hashlib.sha256(raw.encode()).hexdigest()


def _window(
    limit: RateLimit, value: dict[str, Any] | None, now: float
) -> tuple[dict[str, Any], float | None]:
    window = math.floor(now / limit.per)
    count = int(value["n"]) if value is not None and value.get("w") == window else 0
    if count >= limit.requests:
        return {}, max((window + 1) * limit.per - now, 0.001)
    return {"w": window, "n": count + 1}, None


def _bucket(
    limit: RateLimit, value: dict[str, Any] | None, now: float
) -> tuple[dict[str, Any], float | None]:
    rate = limit.requests / limit.per
    if value is None:
        tokens = float(limit.requests)
    else:
        tokens = min(float(limit.requests), float(value["t"]) + max(0.0, now - float(value["at"])) * rate)
    if tokens < 1.0:
        return {}, (1.0 - tokens) / rate
    return {"t": tokens - 1.0, "at": now}, None
