"""agentmw.retries: the step retry policy and attempt()."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentmw.errors import ConfigurationError, NeedsInput, Permanent, Rejected, Retryable, StoreUnavailable
from agentmw.retries import STATS, RetryPolicy, StepFailed, attempt

FAST = RetryPolicy(attempts=4, initial_interval=0.0)


class Flaky:
    """Fails with ``errors`` in turn, then returns ``value``; counts its calls."""

    def __init__(self, *errors: BaseException, value: object = "done") -> None:
        self.errors = list(errors)
        self.value = value
        self.calls = 0

    async def __call__(self) -> object:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.value


def test_backoff_grows_by_the_coefficient_and_stops_at_the_cap() -> None:
    policy = RetryPolicy(attempts=10, initial_interval=0.5, backoff_coefficient=3.0, max_interval=10.0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.5, 4.5, 10.0, 10.0]
    assert RetryPolicy(initial_interval=2.0).cap == 200.0  # Temporal's default: 100 x the first interval
    assert (
        RetryPolicy(attempts=5, initial_interval=1.0, max_interval=None).delay(2000) == 100.0
    )  # no overflow


def test_jitter_stays_within_its_fraction_and_the_cap() -> None:
    policy = RetryPolicy(
        attempts=5, initial_interval=1.0, backoff_coefficient=2.0, jitter=0.5, max_interval=3.0
    )
    waits = [policy.wait(2) for _ in range(300)]
    assert all(1.0 <= w <= 3.0 for w in waits)
    assert len({round(w, 6) for w in waits}) > 50  # drawn, not fixed


def test_a_retryables_retry_after_replaces_the_backoff_capped() -> None:
    policy = RetryPolicy(initial_interval=1.0, max_interval=5.0)
    assert policy.wait(1, Retryable("busy", retry_after=0.25)) == 0.25
    assert policy.wait(1, StoreUnavailable()) == 1.0  # its default retry_after
    assert policy.wait(1, Retryable("busy", retry_after=60)) == 5.0
    assert policy.wait(3, Retryable("busy")) == 4.0  # no retry_after: the backoff
    assert RetryPolicy(initial_interval=0.0).wait(1, Retryable("busy", retry_after=7)) == 7.0  # no cap given


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attempts": 0},
        {"attempts": 1.5},
        {"attempts": True},
        {"initial_interval": -1},
        {"backoff_coefficient": 0.5},
        {"max_interval": -2},
        {"jitter": 1.5},
        {"non_retryable": "ValueError"},
        {"non_retryable": (ValueError, 3)},
    ],
)
def test_a_policy_that_cannot_work_is_refused_when_made(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError, match="RetryPolicy"):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_non_retryable_takes_one_type_or_several() -> None:
    assert RetryPolicy(non_retryable=KeyError).non_retryable == (KeyError,)  # type: ignore[arg-type]
    assert RetryPolicy(non_retryable=[KeyError, OSError]).non_retryable == (KeyError, OSError)  # type: ignore[arg-type]
    assert hash(RetryPolicy(non_retryable=(KeyError,))) == hash(RetryPolicy(non_retryable=(KeyError,)))


async def test_it_retries_until_the_call_returns() -> None:
    run = Flaky(ConnectionError("down"), TimeoutError("slow"))
    before = STATS.retries
    assert await attempt(FAST, run) == "done"
    assert run.calls == 3
    assert STATS.retries - before == 2


async def test_the_last_error_is_raised_when_the_attempts_are_spent() -> None:
    run = Flaky(*(ConnectionError(f"down {n}") for n in range(5)))
    gave_up = STATS.gave_up
    with pytest.raises(ConnectionError, match="down 3"):
        await attempt(FAST, run)
    assert run.calls == 4
    assert STATS.gave_up == gave_up + 1


async def test_no_policy_tries_once() -> None:
    run = Flaky(ConnectionError("down"))
    with pytest.raises(ConnectionError):
        await attempt(None, run)
    assert run.calls == 1


@pytest.mark.parametrize(
    "error",
    [Permanent("no"), Rejected("bad"), NeedsInput("which?"), StepFailed("x", 2), KeyError("k")],
)
async def test_errors_that_are_never_retried_end_at_once(error: BaseException) -> None:
    run = Flaky(error, value="never")
    policy = RetryPolicy(attempts=5, initial_interval=0.0, non_retryable=(KeyError,))
    with pytest.raises(type(error)):
        await attempt(policy, run)
    assert run.calls == 1


async def test_cancellation_is_never_retried() -> None:
    run = Flaky(asyncio.CancelledError(), value="never")
    with pytest.raises(asyncio.CancelledError):
        await attempt(FAST, run)
    assert run.calls == 1


async def test_should_retry_can_refuse_a_retry() -> None:
    run = Flaky(ValueError("a"), ValueError("b"))
    with pytest.raises(ValueError, match="a"):
        await attempt(FAST, run, should_retry=lambda exc: not isinstance(exc, ValueError))
    assert run.calls == 1
    again = Flaky(ConnectionError("a"), value=7)
    assert await attempt(FAST, again, should_retry=lambda exc: isinstance(exc, ConnectionError)) == 7


async def test_it_waits_between_tries_and_honors_retry_after() -> None:
    run = Flaky(Retryable("busy", retry_after=0.3), value="ok")
    started = time.monotonic()
    assert await attempt(RetryPolicy(attempts=2, initial_interval=0.0), run) == "ok"
    assert time.monotonic() - started >= 0.3


async def test_a_cancellation_during_a_wait_ends_it() -> None:
    run = Flaky(ConnectionError("down"), value="never")
    task = asyncio.ensure_future(attempt(RetryPolicy(attempts=3, initial_interval=30.0), run))
    while run.calls == 0:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert run.calls == 1


def test_step_failed_names_the_step_and_type_but_keeps_the_text_apart() -> None:
    failure = StepFailed.from_error("charge", 3, ConnectionError("db at 10.0.0.7 refused"))
    assert isinstance(failure, Permanent)
    assert failure.message == "step 'charge' failed after 3 attempts (ConnectionError)"
    assert "10.0.0.7" not in str(failure)
    assert failure.cause_message == "db at 10.0.0.7 refused"
    assert (failure.name, failure.attempts, failure.cause_type) == ("charge", 3, "ConnectionError")
    assert StepFailed("x", 1).message == "step 'x' failed after 1 attempt (Exception)"
