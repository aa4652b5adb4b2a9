"""safety/limits.py: the in-flight caps, their refusal messages (returned to the caller as the reason of a
retryable error) and the count of refusals (reported in the agent's statistics)."""

from __future__ import annotations

from agentmw.safety.limits import InFlightLimits


def test_caps_refuse_with_their_reason_and_count_each_refusal() -> None:
    limits = InFlightLimits(2)
    assert limits.rejected == 0 and limits.total == 0 and limits.per_capability == {}
    assert limits.acquire("a", 1) is None
    assert limits.acquire("a", 1) == "a is at its limit of 1 calls in flight"
    assert limits.rejected == 1
    assert limits.acquire("b", None) is None
    assert (limits.total, limits.per_capability) == (2, {"a": 1, "b": 1})
    assert limits.acquire("c", None) == "the agent is at its limit of 2 calls in flight"
    assert limits.acquire("a", 5) == "the agent is at its limit of 2 calls in flight"
    assert limits.rejected == 3
    assert (limits.total, limits.per_capability) == (2, {"a": 1, "b": 1})  # a refusal takes nothing
    limits.release("a")
    assert (limits.total, limits.per_capability) == (1, {"a": 0, "b": 1})
    assert limits.acquire("a", 1) is None
    assert limits.rejected == 3


def test_no_global_cap() -> None:
    limits = InFlightLimits(None)
    for _ in range(50):
        assert limits.acquire("x", None) is None
    assert limits.acquire("y", 0) == "y is at its limit of 0 calls in flight"
    assert (limits.total, limits.rejected) == (50, 1)
