"""Unit tests of ``agentmw.runtime.invoke`` without a server: every outcome a function can produce."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any

import pytest
from pydantic import BaseModel, field_serializer
from starlette.exceptions import HTTPException

from agentmw import Agent, Context
from agentmw.content import Text
from agentmw.context import Ask
from agentmw.errors import AgentError, NeedsInput, Permanent, Rejected, Retryable
from agentmw.runtime import Outcome, invoke
from tests.waiting import eventually, stays

PERMANENT = "This failure is permanent: repeating the same call will not help."


class Budget(BaseModel):
    team: str
    amount: float


class Exploding(BaseModel):
    x: int

    @field_serializer("x")
    def _boom(self, value: int) -> int:
        raise RuntimeError("serializer secret /etc/shadow")


agent = Agent("t")
calls: dict[str, int] = {}
received: dict[str, Any] = {}


def bump(name: str) -> int:
    calls[name] = calls.get(name, 0) + 1
    return calls[name]


@pytest.fixture(autouse=True)
def _reset() -> None:
    calls.clear()
    received.clear()
    agent.idempotency.entries.clear()


@agent.tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@agent.tool
async def budget(team: str) -> Budget:
    """A model."""
    return Budget(team=team, amount=12.5)


@agent.tool
async def echo(text: str, ctx: Context) -> str:
    """Content mode, with the context injected."""
    received["ctx"] = ctx
    return f"echo {text}"


@agent.tool(name="chunks")
async def chunks_tool(n: int):  # type: ignore[no-untyped-def]
    """An async generator: its parts are joined."""
    for i in range(n):
        yield f"p{i}"


@agent.tool
async def raises(kind: str) -> str:
    """Raise the error named by ``kind``."""
    if kind == "retryable":
        raise Retryable("try later", retry_after=2, data={"why": "busy"})
    if kind == "retryable-bare":
        raise Retryable()
    if kind == "permanent":
        raise Permanent("gone for good", data={"id": 1})
    if kind == "rejected":
        raise Rejected("not allowed", data={"rule": "r1"})
    if kind == "needs-input":
        raise NeedsInput(
            "Which region?", schema={"type": "object", "properties": {"region": {"type": "string"}}}
        )
    if kind == "agent-error":
        raise AgentError("base class")
    if kind == "unexpected":
        raise RuntimeError("password=hunter2 at /srv/secret.db")
    if kind == "timeout-error":
        raise TimeoutError("socket read timed out (secret host)")
    if kind == "http-503":
        raise HTTPException(503, "down", headers={"Retry-After": "7"})
    if kind == "http-404":
        raise HTTPException(404, "no such thing")
    if kind == "http-501":
        raise HTTPException(501)
    return "fine"


@agent.tool
async def mismatch() -> Budget:
    """Declares a model and returns None."""
    return None  # type: ignore[return-value]


@agent.tool
async def wrong_type() -> int:
    """Declares int and returns a dict."""
    return {"x": 1}  # type: ignore[return-value]


@agent.tool
async def serializer_raises() -> Exploding:
    """The value's own serializer raises."""
    return Exploding(x=1)


@agent.tool
async def nan_float() -> float:
    """A NaN float."""
    return math.nan


@agent.tool
async def nan_nested() -> dict[str, float]:
    """A NaN inside an object."""
    return {"x": 1.0, "y": math.inf}


@agent.tool(timeout=0.05)
async def slow() -> str:
    """Past its deadline."""
    await asyncio.sleep(10)
    return "late"


@agent.tool(timeout=5)
async def quick_with_deadline() -> int:
    """Within its deadline."""
    return 7


@agent.tool(timeout=5)
async def own_timeout() -> int:
    """Raises TimeoutError itself, within its deadline."""
    raise TimeoutError("upstream secret")


@agent.tool
async def book(room: str) -> str:
    """Side-effecting: counts its runs."""
    return f"booked {room} #{bump('book')}"


@agent.tool
async def flaky(room: str) -> str:
    """Fails retryably the first time."""
    if bump("flaky") == 1:
        raise Retryable("again")
    return "ok"


@agent.tool
async def broken(room: str) -> str:
    """Fails permanently every time."""
    bump("broken")
    raise Permanent("no")


@agent.tool(read_only=True)
async def look(room: str) -> str:
    """Read-only: idempotency keys do not apply."""
    return f"look #{bump('look')}"


release: dict[str, asyncio.Event] = {}  # a fresh event per test


@agent.tool
async def waits(room: str) -> str:
    """Waits for the test, counting its runs."""
    bump("waits")
    await release["waits"].wait()
    return "done"


@agent.tool(max_in_flight=1)
async def single(n: int) -> int:
    """At most one at a time."""
    bump("single")
    await release["single"].wait()
    return n


def ctx_for(name: str, *, direct: bool = False, caller: str | None = None) -> tuple[Any, Context]:
    cap = agent.tools[name]
    return cap, Context(cap, caller=caller, agent=None if direct else agent)


async def call(name: str, arguments: Any = None, *, direct: bool = False, **kwargs: Any) -> Outcome:
    cap, ctx = ctx_for(name, direct=direct, caller=kwargs.pop("caller", None))
    return await invoke(cap, arguments, ctx, **kwargs)


def texts(outcome: Outcome) -> list[str]:
    return [part.text for part in outcome.content if isinstance(part, Text)]


# --- completed ------------------------------------------------------------------------------------


@pytest.mark.parametrize("direct", [False, True])
async def test_completed_with_structured_output(direct: bool) -> None:
    outcome = await call("add", {"a": 1, "b": 2}, direct=direct)
    assert (outcome.status, outcome.structured, outcome.value, outcome.code) == (
        "completed",
        {"result": 3},
        3,
        None,
    )
    assert texts(outcome) == ['{"result":3}']
    assert not outcome.is_error and not outcome.retryable


async def test_completed_with_a_model() -> None:
    outcome = await call("budget", {"team": "core"})
    assert outcome.status == "completed"
    assert outcome.structured == {"team": "core", "amount": 12.5}
    assert outcome.value == Budget(team="core", amount=12.5)
    assert texts(outcome) == ['{"team":"core","amount":12.5}']


async def test_completed_content_mode_with_context() -> None:
    cap, ctx = ctx_for("echo")
    outcome = await invoke(cap, {"text": "hi"}, ctx)
    assert (outcome.status, outcome.structured, texts(outcome)) == ("completed", None, ["echo hi"])
    assert received["ctx"] is ctx


async def test_async_generator_parts_are_joined() -> None:
    outcome = await call("chunks", {"n": 3})
    assert outcome.status == "completed" and texts(outcome) == ["p0p1p2"]


async def test_deadline_not_reached() -> None:
    outcome = await call("quick_with_deadline")
    assert (outcome.status, outcome.structured) == ("completed", {"result": 7})


# --- invalid arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"a": "x", "b": 1}, "Invalid arguments: a: "),
        ({"a": 1}, "Invalid arguments: b: Field required"),
        ({}, "Invalid arguments: a: Field required; b: Field required"),
        (None, "Invalid arguments: a: Field required; b: Field required"),
        ([1, 2], "Invalid arguments: expected an object"),
        ("a=1", "Invalid arguments: expected an object"),
    ],
)
async def test_invalid_arguments_are_rejected(arguments: Any, message: str) -> None:
    for direct in (False, True):
        outcome = await call("add", arguments, direct=direct)
        assert (outcome.status, outcome.code, outcome.retryable) == ("rejected", "invalid_arguments", False)
        assert outcome.message.startswith(message), outcome.message
        assert outcome.is_error


# --- errors raised by the function ----------------------------------------------------------------


async def test_retryable() -> None:
    outcome = await call("raises", {"kind": "retryable"})
    assert (outcome.status, outcome.retryable, outcome.retry_after, outcome.code) == (
        "failed",
        True,
        2,
        "retryable",
    )
    assert outcome.message == "try later" and outcome.data == {"why": "busy"}
    assert texts(outcome) == ["try later Retry after 2 seconds."]
    bare = await call("raises", {"kind": "retryable-bare"})
    assert (bare.status, bare.retryable, bare.retry_after, bare.code) == ("failed", True, None, "retryable")
    assert texts(bare) == ["temporarily unavailable Retry later."]


async def test_permanent() -> None:
    outcome = await call("raises", {"kind": "permanent"})
    assert (outcome.status, outcome.retryable, outcome.code) == ("failed", False, "permanent")
    assert outcome.message == "gone for good" and outcome.data == {"id": 1}
    assert texts(outcome) == [f"gone for good {PERMANENT}"]


async def test_agent_error_base_class_is_permanent() -> None:
    outcome = await call("raises", {"kind": "agent-error"})
    assert (outcome.status, outcome.retryable, outcome.code, outcome.message) == (
        "failed",
        False,
        "permanent",
        "base class",
    )


async def test_rejected() -> None:
    outcome = await call("raises", {"kind": "rejected"})
    assert (outcome.status, outcome.retryable, outcome.code) == ("rejected", False, "rejected")
    assert outcome.message == "not allowed" and outcome.data == {"rule": "r1"}
    assert outcome.is_error


async def test_needs_input() -> None:
    outcome = await call("raises", {"kind": "needs-input"})
    assert (outcome.status, outcome.code, outcome.message) == ("needs_input", "raised", "Which region?")
    assert outcome.pending == {
        "question": Ask("Which region?", {"type": "object", "properties": {"region": {"type": "string"}}})
    }
    assert not outcome.is_error


@pytest.mark.parametrize("direct", [False, True])
async def test_unexpected_exception_is_permanent_and_sanitized(
    direct: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="agentmw"):
        outcome = await call("raises", {"kind": "unexpected"}, direct=direct)
    assert (outcome.status, outcome.retryable, outcome.code) == ("failed", False, "permanent")
    assert (
        outcome.message
        == "raises failed with an internal error (RuntimeError); details are in the server log."
    )
    assert texts(outcome) == [f"{outcome.message} {PERMANENT}"]
    assert "hunter2" not in repr(outcome)
    assert outcome.data is None
    assert any("hunter2" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)  # the log has it


async def test_timeout_error_raised_by_the_function_is_not_the_deadline() -> None:
    for name, kind in (("raises", {"kind": "timeout-error"}), ("own_timeout", None)):
        outcome = await call(name, kind)
        assert (outcome.status, outcome.retryable, outcome.code) == ("failed", False, "permanent")
        assert "(TimeoutError)" in outcome.message and "secret" not in repr(outcome)


@pytest.mark.parametrize(
    ("kind", "status", "retryable", "retry_after"),
    [
        ("http-503", 503, True, 7.0),
        ("http-404", 404, False, None),
        ("http-501", 501, False, None),
    ],
)
async def test_http_exception(kind: str, status: int, retryable: bool, retry_after: float | None) -> None:
    outcome = await call("raises", {"kind": kind})
    assert (outcome.status, outcome.code, outcome.retryable, outcome.retry_after) == (
        "failed",
        f"http_{status}",
        retryable,
        retry_after,
    )
    assert outcome.data["status"] == status


# --- the return value -----------------------------------------------------------------------------


async def test_output_mismatch_is_invalid_output(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agentmw"):
        outcome = await call("mismatch")
    assert (outcome.status, outcome.retryable, outcome.code, outcome.structured) == (
        "failed",
        False,
        "invalid_output",
        None,
    )
    assert outcome.message.startswith(
        "The return value of mismatch does not match the declared output type Budget"
    )
    assert texts(outcome) == [f"{outcome.message} {PERMANENT}"]
    assert any(
        "does not match the declared output type" in r.getMessage() and r.exc_info is None
        for r in caplog.records
    )
    other = await call("wrong_type")
    assert (other.status, other.code) == ("failed", "invalid_output")
    assert "declared output type int" in other.message


async def test_serializer_that_raises_is_failed_and_sanitized() -> None:
    outcome = await call("serializer_raises")
    assert (outcome.status, outcome.retryable, outcome.code, outcome.structured) == (
        "failed",
        False,
        "permanent",
        None,
    )
    assert outcome.message.startswith("serializer_raises failed with an internal error (")
    assert "shadow" not in repr(outcome)


@pytest.mark.parametrize("name", ["nan_float", "nan_nested"])
async def test_nan_in_structured_output_is_failed(name: str) -> None:
    outcome = await call(name)
    assert (outcome.status, outcome.retryable, outcome.code, outcome.structured) == (
        "failed",
        False,
        "permanent",
        None,
    )
    assert (
        outcome.message
        == f"{name} failed with an internal error (ValueError); details are in the server log."
    )


# --- the deadline ---------------------------------------------------------------------------------


@pytest.mark.parametrize("direct", [False, True])
async def test_deadline_is_failed_retryable_timeout(direct: bool) -> None:
    started = time.monotonic()
    outcome = await call("slow", direct=direct)
    assert time.monotonic() - started < 2
    assert (outcome.status, outcome.retryable, outcome.code) == ("failed", True, "timeout")
    assert outcome.message == "slow did not finish within 0.05 seconds and was stopped."
    assert texts(outcome) == [f"{outcome.message} Retry later."]


# --- idempotency keys -----------------------------------------------------------------------------


async def test_same_key_same_arguments_runs_once() -> None:
    first = await call("book", {"room": "a"}, idempotency_key="k1")
    second = await call("book", {"room": "a"}, idempotency_key="k1")
    assert calls["book"] == 1
    assert first.status == second.status == "completed"
    assert texts(first) == texts(second) == ["booked a #1"]
    other_key = await call("book", {"room": "a"}, idempotency_key="k2")
    no_key = await call("book", {"room": "a"})
    assert (texts(other_key), texts(no_key), calls["book"]) == (["booked a #2"], ["booked a #3"], 3)


async def test_same_key_other_arguments_is_rejected() -> None:
    await call("book", {"room": "a"}, idempotency_key="k1")
    outcome = await call("book", {"room": "b"}, idempotency_key="k1")
    assert (outcome.status, outcome.code) == ("rejected", "idempotency_key_reused")
    assert calls["book"] == 1


async def test_keys_are_per_caller_and_per_capability() -> None:
    await call("book", {"room": "a"}, idempotency_key="k", caller="alice")
    await call("book", {"room": "a"}, idempotency_key="k", caller="bob")
    await call("book", {"room": "a"}, idempotency_key="k", caller="alice")
    assert calls["book"] == 2
    outcome = await call("flaky", {"room": "a"}, idempotency_key="k", caller="alice")  # same key, other tool
    assert outcome.status == "failed" and calls["flaky"] == 1


async def test_retryable_failure_is_not_cached() -> None:
    first = await call("flaky", {"room": "a"}, idempotency_key="k")
    assert (first.status, first.retryable) == ("failed", True)
    second = await call("flaky", {"room": "a"}, idempotency_key="k")
    assert (second.status, texts(second)) == ("completed", ["ok"])
    third = await call("flaky", {"room": "a"}, idempotency_key="k")
    assert texts(third) == ["ok"] and calls["flaky"] == 2


async def test_permanent_failure_is_cached() -> None:
    first = await call("broken", {"room": "a"}, idempotency_key="k")
    second = await call("broken", {"room": "a"}, idempotency_key="k")
    assert first.status == second.status == "failed" and calls["broken"] == 1


async def test_read_only_and_direct_calls_ignore_keys() -> None:
    await call("look", {"room": "a"}, idempotency_key="k")
    await call("look", {"room": "a"}, idempotency_key="k")
    assert calls["look"] == 2
    await call("book", {"room": "a"}, idempotency_key="k", direct=True)
    await call("book", {"room": "a"}, idempotency_key="k", direct=True)
    assert calls["book"] == 2


async def test_invalid_arguments_never_reach_the_key() -> None:
    bad = await call("book", {"room": 5}, idempotency_key="k")
    assert (bad.status, bad.code) == ("rejected", "invalid_arguments")
    good = await call("book", {"room": "a"}, idempotency_key="k")
    assert good.status == "completed" and calls["book"] == 1


async def test_concurrent_duplicate_waits_for_the_first() -> None:
    release["waits"] = asyncio.Event()
    first = asyncio.create_task(call("waits", {"room": "a"}, idempotency_key="k"))
    second = asyncio.create_task(call("waits", {"room": "a"}, idempotency_key="k"))
    await eventually(lambda: calls.get("waits") == 1, "the first call to start")
    await stays(
        lambda: calls["waits"] == 1 and not first.done() and not second.done(),
        "the duplicate waits for the first call",
        seconds=0.01,
    )
    assert calls["waits"] == 1 and not first.done() and not second.done()
    release["waits"].set()
    a, b = await asyncio.wait_for(asyncio.gather(first, second), 2)
    assert texts(a) == texts(b) == ["done"] and calls["waits"] == 1


# --- in-flight cap ----------------------------------------------------------------------------------


async def test_max_in_flight_answers_busy() -> None:
    release["single"] = asyncio.Event()
    first = asyncio.create_task(call("single", {"n": 1}))
    await eventually(lambda: calls.get("single"), "the first call to start")
    busy = await call("single", {"n": 2})
    assert (busy.status, busy.retryable, busy.retry_after, busy.code) == ("failed", True, 1.0, "busy")
    release["single"].set()
    done = await asyncio.wait_for(first, 2)
    assert done.structured == {"result": 1}
    again = await call("single", {"n": 3})
    assert again.structured == {"result": 3}
