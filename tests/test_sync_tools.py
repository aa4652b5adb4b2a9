"""Plain ``def`` capabilities: the worker-thread hop (``agentmw._executor``) and what cancelling them means.

Over a real socket with the official client in both eras; the worker pool itself with real threads: its
bound, a call cancelled before it starts (it never does) and one cancelled while it runs (answered at once,
its result discarded, its worker busy until it returns); and the MCP disconnect watcher, which a fast sync
call never starts.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Permanent
from agentmw._executor import _Workers
from agentmw.mcp._cancel import CallGuard
from agentmw.settings import Timing
from agentmw.testing import McpTestClient
from tests.conftest import serve
from tests.waiting import eventually

REQUEST_TAG: contextvars.ContextVar[str] = contextvars.ContextVar("request_tag", default="unset")
log: list[str] = []
gates: dict[str, threading.Event] = {}


def add(a: int, b: int) -> int:
    return a + b


def where(label: str) -> dict[str, str]:
    """Which thread ran it, and the context variable the host app set for the request."""
    return {"label": label, "thread": threading.current_thread().name, "tag": REQUEST_TAG.get()}


def fails(kind: str) -> str:
    if kind == "permanent":
        raise Permanent("the catalog is closed")
    raise ValueError("internal detail: /srv/secret.db")


def hold(label: str, wait: bool = True) -> str:
    log.append(f"{label}:started")
    if wait:
        gates[label].wait(10)
    log.append(f"{label}:finished")
    return f"{label} done"


async def pause(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "paused"


def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "napped"


def build(timing: Timing | None = None, **tool_options: Any) -> Starlette:
    agent = Agent("sync", timing=timing or Timing())
    for fn in (add, where, fails, pause, nap):
        agent.tool(fn)
    agent.tool(hold, **tool_options)
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)

    async def tagged(scope: Any, receive: Any, send: Any) -> None:  # the host app's own request context
        REQUEST_TAG.set(dict(scope.get("headers") or []).get(b"x-tag", b"none").decode())
        await app(scope, receive, send)

    return tagged  # type: ignore[return-value]


def client(url: str, mode: str) -> Client:
    http = httpx2.AsyncClient(headers={"x-tag": f"tag-{mode}"}, timeout=30)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, cache=None)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_sync_tools_over_a_real_socket(mode: str) -> None:
    with serve(build()) as url:
        async with client(url, mode) as mcp:
            assert (await mcp.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}
            seen = (await mcp.call_tool("where", {"label": "x"})).structured_content
            assert seen == {"label": "x", "thread": "agentmw sync worker", "tag": f"tag-{mode}"}
            results = await asyncio.gather(*(mcp.call_tool("add", {"a": i, "b": 1}) for i in range(20)))
            assert [r.structured_content["result"] for r in results] == [i + 1 for i in range(20)]
            permanent = await mcp.call_tool("fails", {"kind": "permanent"})
            assert permanent.is_error and permanent.content[0].text.startswith("the catalog is closed")
            internal = await mcp.call_tool("fails", {"kind": "other"})
            assert internal.is_error and "ValueError" in internal.content[0].text
            assert "secret" not in internal.content[0].text


async def test_a_deadline_answers_at_once_and_the_late_result_is_discarded() -> None:
    log.clear()
    gates["d1"] = threading.Event()
    async with McpTestClient(build(timeout=0.2)) as mcp:
        start = time.monotonic()
        result = await mcp.call_tool("hold", {"label": "d1"})
        assert time.monotonic() - start < 2, "the deadline waited for the thread"
        assert result["isError"] is True
        assert "did not finish within 0.2 seconds" in result["content"][0]["text"]
        assert log == ["d1:started"]
        gates["d1"].set()  # the function cannot be interrupted: it runs on to its end, and nobody hears of it
        await eventually(lambda: "d1:finished" in log, "the abandoned function did not finish")
        again = await mcp.call_tool("hold", {"label": "d2", "wait": False})
        assert again["content"][0]["text"] == "d2 done"


async def test_a_closed_stream_cancels_a_long_sync_call_and_frees_its_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stateless era: past ``Timing.sync_watch_delay_seconds`` the watcher runs, so a client that leaves still
    cancels the call."""
    log.clear()
    gates["c1"] = threading.Event()
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "hold",
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }

    def call(i: int, label: str, wait: bool) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": "hold", "arguments": {"label": label, "wait": wait}, "_meta": meta},
        }

    with serve(build(Timing(sync_watch_delay_seconds=0.05), max_in_flight=1)) as url:
        async with httpx.AsyncClient(base_url=url) as http:
            with pytest.raises(httpx.ReadTimeout):  # the client gives up and closes the connection
                await http.post("/mcp", json=call(1, "c1", True), headers=headers, timeout=0.5)
            await eventually(lambda: "c1:started" in log, "the first call did not start")

            async def second() -> dict[str, Any]:
                reply = await http.post("/mcp", json=call(2, "c2", False), headers=headers, timeout=10)
                return reply.json()["result"]

            # The first call's slot is free although its function still runs: the disconnect cancelled it.
            result: dict[str, Any] = {}

            async def served() -> bool:  # the watcher may not have seen the disconnect yet: Busy, retry
                nonlocal result
                result = await second()
                return not result.get("isError")

            await eventually(
                served, lambda: f"the second call to be served: {result}", timeout=5, interval=0.05
            )
            assert result["content"][0]["text"] == "c2 done", result
            assert "c1:finished" not in log
        gates["c1"].set()
        await eventually(lambda: "c1:finished" in log, "the cancelled function did not run to its end")


async def test_a_fast_sync_call_starts_no_watcher(monkeypatch: pytest.MonkeyPatch) -> None:
    watched: list[str] = []
    original = CallGuard._watch

    async def counting(self: CallGuard) -> None:
        watched.append("watch")
        await original(self)

    monkeypatch.setattr(CallGuard, "_watch", counting)
    async with McpTestClient(build()) as mcp:  # the stateless era, whose closed stream is the cancellation
        assert (await mcp.call_tool("nap", {"seconds": 0.05}))["content"][0]["text"] == "napped"
        assert watched == [], "a watcher ran while the sync function's thread did"
        assert (await mcp.call_tool("pause", {"seconds": 0.05}))["content"][0]["text"] == "paused"
        assert watched == ["watch"], "an async call that waits is watched at once"
    async with McpTestClient(build(Timing(sync_watch_delay_seconds=0.05))) as mcp:
        assert (await mcp.call_tool("nap", {"seconds": 0.3}))["content"][0]["text"] == "napped"
        assert watched == ["watch", "watch"], "a long sync call is watched after sync_watch_delay_seconds"


# --- the worker pool, with real threads -------------------------------------------------------------------


async def test_the_pool_is_bounded_and_its_idle_workers_end() -> None:
    workers = _Workers(2, idle_seconds=0.2)
    running, most = 0, 0
    lock = threading.Lock()

    def busy(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return i

    assert await asyncio.gather(*(workers.run(busy, {"i": i}) for i in range(8))) == list(range(8))
    assert most == 2
    assert workers._threads == 2
    await eventually(lambda: workers._threads == 0, "idle workers did not end")
    assert await workers.run(busy, {"i": 9}) == 9  # a new worker starts when none is left


async def test_a_call_cancelled_before_it_starts_never_runs() -> None:
    workers = _Workers(1, idle_seconds=1)
    release = threading.Event()
    ran: list[str] = []

    def step(name: str) -> str:
        ran.append(name)
        if name == "first":
            release.wait(5)
        return name

    first = asyncio.ensure_future(workers.run(step, {"name": "first"}))
    await eventually(lambda: ran == ["first"], "the first call did not start")
    queued = asyncio.ensure_future(workers.run(step, {"name": "queued"}))
    await eventually(lambda: workers._backlog == 1, "the second call was not queued behind the first")
    queued.cancel()
    release.set()
    assert await first == "first"
    assert await workers.run(step, {"name": "third"}) == "third"
    assert ran == ["first", "third"]
    with pytest.raises(asyncio.CancelledError):
        await queued


async def test_a_call_cancelled_while_it_runs_is_answered_at_once_and_its_result_discarded() -> None:
    workers = _Workers(1, idle_seconds=1)
    release = threading.Event()
    ran: list[str] = []
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context))

    def step(name: str) -> str:
        ran.append(f"{name}:started")
        if name == "long":
            release.wait(5)
            ran.append("long:finished")
            raise RuntimeError("raised after the caller left")
        return name

    long = asyncio.ensure_future(workers.run(step, {"name": "long"}))
    await eventually(lambda: ran == ["long:started"], "the call did not start")
    long.cancel()
    start = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await long
    assert time.monotonic() - start < 0.5
    after = asyncio.ensure_future(workers.run(step, {"name": "after"}))
    await eventually(lambda: workers._backlog == 1, "the next call was not queued")
    assert ran == ["long:started"], "the bound counts the cancelled call's worker until its function returns"
    release.set()
    assert await after == "after"
    assert ran == ["long:started", "long:finished", "after:started"]
    assert errors == [], "a discarded result must not surface as an unhandled error"


async def test_context_and_exceptions_cross_the_hop() -> None:
    workers = _Workers(2, idle_seconds=1)
    REQUEST_TAG.set("caller")

    def read_and_set() -> str:
        value = REQUEST_TAG.get()
        REQUEST_TAG.set("changed in the thread")  # a copy: the caller's context is not changed
        return value

    def stop() -> None:
        raise StopIteration

    assert await workers.run(read_and_set, {}) == "caller"
    assert REQUEST_TAG.get() == "caller"
    with pytest.raises(ValueError, match="internal detail"):
        await workers.run(fails, {"kind": "other"})
    with pytest.raises(RuntimeError, match="StopIteration"):
        await workers.run(stop, {})
