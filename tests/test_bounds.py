"""Every table keyed by a client-chosen id is bounded in count and in age (docs/limits.md).

Each table is shown pruned by count and by age, with small limits: through the faces with real requests
where that is reasonable (AG-UI threads and runs, MCP sessions, A2A message ids and task handles), and
directly for the table classes (approvals, idempotency records, used request states).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import replace

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context
from agentmw._bounded import BoundedTable, UsedTokens
from agentmw.mcp import _state
from agentmw.mcp.stateless import UsedStates
from agentmw.safety import Approvals, IdempotencyCache
from agentmw.settings import Limits, Timing
from agentmw.state import MemoryState, StoreLimits
from agentmw.testing import McpError, McpTestClient
from tests.waiting import eventually


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# --- the table class --------------------------------------------------------------------------------


def test_table_caps_count_oldest_first() -> None:
    table: BoundedTable[str, int] = BoundedTable(3, 60)
    for i in range(10):
        table[f"k{i}"] = i
    assert list(table) == ["k7", "k8", "k9"] and len(table) == 3


def test_table_forgets_by_age_and_prunes_on_insert() -> None:
    clock = Clock()
    table: BoundedTable[str, int] = BoundedTable(100, 10, clock=clock)
    for i in range(5):
        table[f"k{i}"] = i
    clock.now += 11
    assert "k0" not in table and table.get("k1") is None  # reads treat an expired entry as gone
    table["new"] = 1  # an insert drops the expired ones in one batch
    assert list(table) == ["new"]
    table.put("short", 2, ttl=1)
    clock.now += 2
    assert table.get("short") is None and table.get("new") == 1


def test_table_touch_renews_and_pinned_entries_stay() -> None:
    clock = Clock()
    busy = {"b"}
    table: BoundedTable[str, str] = BoundedTable(2, 10, clock=clock, touch=True, pinned=lambda v: v in busy)
    table["a"], table["b"] = "a", "b"
    clock.now += 8
    assert table.get("a") == "a"  # used: renewed, and now the newest
    clock.now += 8
    table["c"] = "c"
    assert list(table) == ["c", "b"]  # over the count: "b" is pinned, so the oldest other one went
    for key in ("d", "e", "f"):
        table[key] = key
    assert list(table) == ["b", "f"]  # the pinned one survives the flood, and still counts
    clock.now += 100
    table["g"] = "g"
    assert "b" in table and "a" not in table  # and outlives its age while pinned
    busy.clear()
    clock.now += 100
    table["h"] = "h"
    assert "b" not in table


def test_table_evictions_are_reported() -> None:
    dropped: list[tuple[str, bool]] = []
    clock = Clock()
    table: BoundedTable[str, int] = BoundedTable(
        2, 10, clock=clock, on_evict=lambda k, v, early: dropped.append((k, early))
    )
    table["a"], table["b"], table["c"] = 1, 2, 3
    clock.now += 11
    table["d"] = 4
    assert dropped == [("a", True), ("b", False), ("c", False)]


# --- AG-UI threads and runs, through the face -------------------------------------------------------


def agui_agent(**limits: object) -> tuple[Agent, Starlette]:
    agent = Agent("bounds", **limits)  # type: ignore[arg-type]

    @agent.skill
    async def echo(text: str) -> str:
        """Echo the text."""
        return text

    @agent.skill
    async def ask(ctx: Context) -> str:
        """Ask a question and wait for the answer."""
        answer = await ctx.ask("Proceed?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return f"answered {answer.content}"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


async def agui_run(client: httpx.AsyncClient, skill: str, thread: str | None = None) -> str:
    thread = thread or f"t-{uuid.uuid4().hex}"
    body = {
        "threadId": thread,
        "runId": f"r-{uuid.uuid4().hex}",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": uuid.uuid4().hex, "role": "user", "content": "hi"}],
    }
    response = await client.post(f"/agui/{skill}", json=body)
    assert response.status_code == 200 and "RUN_FINISHED" in response.text, response.text
    return thread


def http(app: Starlette) -> httpx.AsyncClient:
    # a caller of its own: anonymous callers share one identity, so their repeats are never de-duplicated
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://127.0.0.1:8000",
        headers={"authorization": "Bearer repeater"},
        timeout=10,
    )


async def test_agui_threads_and_runs_are_capped_by_count() -> None:
    agent, app = agui_agent(limits=Limits(max_threads=3, max_runs=2))
    async with http(app) as client:
        threads = [await agui_run(client, "echo") for _ in range(8)]
    endpoint = agent.agui_app
    assert list(endpoint.threads) == threads[-3:]
    assert len(endpoint.runs) == 2


async def test_agui_threads_and_runs_are_forgotten_by_age() -> None:
    agent, app = agui_agent(timing=Timing(thread_idle_seconds=0.05, run_retention_seconds=0.05))
    async with http(app) as client:
        old = [await agui_run(client, "echo") for _ in range(3)]
        await anyio.sleep(0.1)
        new = await agui_run(client, "echo")
    endpoint = agent.agui_app
    assert list(endpoint.threads) == [new] and len(endpoint.runs) == 1
    assert not any(thread in endpoint.threads for thread in old)


async def test_agui_thread_with_a_parked_question_is_kept() -> None:
    agent, app = agui_agent(
        limits=Limits(max_threads=2, max_runs=2),
        timing=Timing(thread_idle_seconds=0.05, run_retention_seconds=0.05),
    )
    async with http(app) as client:
        parked = await agui_run(client, "ask")  # ends with an interrupt; the execution waits for the answer
        await anyio.sleep(0.1)  # older than the idle age, and
        for _ in range(5):  # pushed past the count by new threads
            await agui_run(client, "echo")
        endpoint = agent.agui_app
        assert parked in endpoint.threads and len(endpoint.threads) == 2
        thread = endpoint.threads.get(parked)
        execution = thread.execution
        assert execution is not None and not execution.task.done()
        execution.task.cancel()
        await asyncio.gather(execution.task, return_exceptions=True)
        await anyio.sleep(0.1)
        await agui_run(client, "echo")
        assert parked not in endpoint.threads  # once nothing waits on it, the age applies again


# --- MCP handshake sessions, through the face --------------------------------------------------------


async def test_mcp_sessions_capped_by_count_and_forgotten_by_age() -> None:
    # idle long enough that a loaded CI machine opens the third session before the first two are idle
    agent = Agent("tiny", limits=Limits(max_sessions=2), timing=Timing(session_idle_seconds=1.0))
    app = agent.asgi()
    first = await McpTestClient(app, era="2025-11-25").__aenter__()
    second = await McpTestClient(app, era="2025-11-25").__aenter__()
    with pytest.raises(McpError) as full:
        await McpTestClient(app, era="2025-11-25").__aenter__()
    assert full.value.status == 503 and len(agent.mcp.sessions.sessions) == 2
    await anyio.sleep(
        1.5
    )  # past the idle bound, and past the store's record life (idle + a renewal interval)
    async with McpTestClient(app, era="2025-11-25") as third:
        sessions = agent.mcp.sessions.sessions
        assert list(sessions) == [third.session_id]  # the idle ones were dropped in one batch
    for client in (first, second):
        with pytest.raises(McpError):
            await client.request("ping")
        client.session_id = None
        await client.__aexit__(None, None, None)


# --- MCP used requestStates ---------------------------------------------------------------------------


def test_used_states_capped_by_count_fail_closed() -> None:
    secret = b"k" * 32
    states = [_state.seal(secret, target="tools/call:x", digest="d", answers={}, ttl=60) for _ in range(5)]
    used = UsedStates(60, max_entries=2)
    for state in states[:3]:
        used.add(state)
    assert len(used) == 2
    assert used.seen(states[0])  # forgotten to stay within the count, still refused: the table fails closed
    assert used.seen(states[1]) and used.seen(states[2])
    later = _state.seal(secret, target="tools/call:x", digest="d", answers={}, ttl=120)
    assert not used.seen(later) and not used.seen("garbage")


def test_used_states_forgotten_by_age() -> None:
    clock = Clock()
    used = UsedTokens(10, 100, expiry_of=lambda token: None)
    used.table.clock = clock
    used.add("a")
    assert used.seen("a")
    clock.now += 11
    assert not used.seen("a") and len(used) == 0  # expired: the state itself is refused as stale anyway


# --- A2A message ids and task handles, through the face ------------------------------------------------


def a2a_agent(store: MemoryState | None = None, **limits: object) -> tuple[Agent, Starlette, MemoryState]:
    store = store or MemoryState()
    agent = Agent("bounds", store=store, **limits)  # type: ignore[arg-type]

    @agent.skill
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app, store


async def send(client: httpx.AsyncClient, parts: list[dict], message_id: str | None = None) -> dict:
    message = {"messageId": message_id or uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts}
    response = await client.post(
        "/a2a",
        headers={"a2a-version": "1.0"},
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
    )
    assert response.status_code == 200, response.text
    return response.json()["result"]["task"]


async def test_a2a_message_ids_capped_by_count() -> None:
    agent, app, _ = a2a_agent(limits=Limits(max_message_ids=3))
    async with http(app) as client:
        first = await send(client, [{"data": {"a": 1, "b": 2}}], "m-first")
        assert (await send(client, [{"data": {"a": 1, "b": 2}}], "m-first"))["id"] == first[
            "id"
        ]  # deduplicated
        for _ in range(3):
            await send(client, [{"data": {"a": 1, "b": 2}}])
        messages = agent.a2a_app.ops.tasks._messages
        assert len(messages) == 3 and ("anonymous", "m-first") not in messages
        assert (await send(client, [{"data": {"a": 1, "b": 2}}], "m-first"))["id"] != first["id"]


async def test_a2a_message_ids_forgotten_by_age() -> None:
    agent, app, _ = a2a_agent()
    # its own setting, apart from Timing.idempotency_ttl_seconds; the face is built on first use, after this
    agent.a2a = replace(agent.a2a, message_id_ttl_seconds=0.05)
    async with http(app) as client:
        first = await send(client, [{"data": {"a": 1, "b": 2}}], "m-again")
        await anyio.sleep(0.1)
        again = await send(client, [{"data": {"a": 1, "b": 2}}], "m-again")
    assert again["id"] != first["id"] and len(agent.a2a_app.ops.tasks._messages) == 1


async def test_a2a_waiting_task_handles_are_bounded_and_reload_from_the_store() -> None:
    agent, app, store = a2a_agent(limits=Limits(max_tasks=2))
    agent.a2a_app  # noqa: B018  (the face is built: it bounds the state's namespaces by the agent's limits)
    store.limit("a2a.tasks", StoreLimits(max_count=100))  # the state keeps more tasks than the process holds
    async with http(app) as client:
        waiting = [
            await send(client, [{"text": "no numbers"}]) for _ in range(5)
        ]  # INPUT_REQUIRED: arguments
        assert all(task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" for task in waiting)
        live = agent.a2a_app.ops.tasks.live
        await agent.a2a_app.ops.tasks.flush()  # each answer came before its write (write-behind)
        assert len(live) == 2 and (await store.scan("a2a.tasks", total=True)).total == 5  # kept in its state
        message = {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "taskId": waiting[0]["id"],
            "parts": [{"data": {"a": 2, "b": 3}}],
        }
        response = await client.post(
            "/a2a",
            headers={"a2a-version": "1.0"},
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
        )
        assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"  # reloaded


# --- approvals and idempotency records ------------------------------------------------------------------


async def test_approvals_capped_by_count_and_forgotten_by_age() -> None:
    approvals = Approvals(max_records=3)
    made = [await approvals.create("tool", {"i": i}, "Run tool", "mcp", "alice", ttl=60) for i in range(5)]
    assert await approvals.count() == 3 and await approvals.get(made[0].id) is None
    assert await approvals.get(made[4].id)
    short = await approvals.create("tool", {"i": 9}, "Run tool", "mcp", "alice", ttl=0.01)

    async def expired() -> bool:
        return await approvals.get(short.id) is None

    await eventually(expired, "the short approval to expire", timeout=0.02)
    assert await approvals.get(short.id) is None
    assert await approvals.state.get("approvals", short.id) is None  # forgotten, not only hidden


async def test_idempotency_records_capped_by_count_and_forgotten_by_age() -> None:
    cache = IdempotencyCache(ttl_seconds=0.05, max_entries=3)
    runs = []

    async def produce(i: int) -> str:
        runs.append(i)
        return f"out{i}"

    for i in range(6):
        await cache.run(("alice", "tool", f"k{i}"), "{}", lambda i=i: produce(i), lambda _: True)
    kept = [await cache.state.get_key("idem", cache.state_key(("alice", "tool", f"k{i}"))) for i in range(6)]
    assert [value is not None for value in kept] == [False, False, False, True, True, True]
    assert (
        await cache.run(("alice", "tool", "k5"), "{}", lambda: produce(99), lambda _: True) == "out5"
    )  # kept
    await cache.run(("alice", "tool", "k0"), "{}", lambda: produce(100), lambda _: True)
    assert runs[-1] == 100  # dropped past the count: it runs again

    async def expired() -> bool:
        return await cache.state.get_key("idem", cache.state_key(("alice", "tool", "k5"))) is None

    await eventually(expired, "k5's outcome to expire", timeout=0.1)
    assert await cache.run(("alice", "tool", "k5"), "{}", lambda: produce(101), lambda _: True) == "out101"


async def test_idempotency_keeps_a_call_in_flight() -> None:
    cache = IdempotencyCache(ttl_seconds=60, max_entries=1)
    gate = asyncio.Event()

    async def slow() -> str:
        await gate.wait()
        return "slow"

    first = asyncio.ensure_future(cache.run(("a", "t", "slow"), "{}", slow, lambda _: True))
    await asyncio.sleep(0)
    for i in range(3):
        await cache.run(("a", "t", f"k{i}"), "{}", lambda: asyncio.sleep(0, "x"), lambda _: True)
    assert ("a", "t", "slow") in cache.entries  # the running call was not dropped
    gate.set()
    assert await first == "slow"


def test_used_state_expiry_reads_the_claim() -> None:
    state = _state.seal(b"s" * 32, target="t", digest="d", answers={}, ttl=30)
    claimed = _state.expiry(state)
    assert claimed is not None and abs(claimed - (time.time() + 30)) < 2
    assert (
        _state.expiry("nope") is None
        and _state.expiry("a.b") is None
        and _state.expiry(json.dumps(1)) is None
    )
