"""Tables kept per client id are bounded in bytes as well as count; parked work holds no in-flight slot;
anonymous callers are never listed each other's tasks (docs/limits.md, docs/auth.md; issue 22, items 1 and 6).

Through the faces with real requests on an in-process ASGI client, and the table class directly.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context
from agentmw._bounded import BoundedTable
from agentmw.safety import Budgets
from agentmw.settings import Limits
from tests.waiting import eventually

A2A = {"a2a-version": "1.0"}


def http(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000", timeout=10
    )


@contextlib.asynccontextmanager
async def serving(**settings: Any) -> AsyncIterator[tuple[Agent, Starlette]]:
    """The agent and its app; the tasks still parked at the end are closed, as a shutdown closes them."""
    agent, app = build(**settings)
    try:
        yield agent, app
    finally:
        await agent.a2a_app.ops.tasks.close()


def build(**settings: Any) -> tuple[Agent, Starlette]:
    agent = Agent("budgets", store="memory://", **settings)

    @agent.skill
    async def echo(text: str) -> str:
        """Echo the text."""
        return text

    @agent.skill
    async def ask(text: str, ctx: Context) -> str:
        """Ask a question and wait for the answer."""
        answer = await ctx.ask("Proceed?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return f"answered {answer.content}"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}


def message(text: str, skill: str, **extra: Any) -> dict[str, Any]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "metadata": {"skill": skill},
        **extra,
    }


async def send(client: httpx.AsyncClient, text: str, skill: str, **headers: str) -> dict[str, Any]:
    response = await client.post(
        "/a2a", headers={**A2A, **headers}, json=rpc("SendMessage", {"message": message(text, skill)})
    )
    assert response.status_code == 200, response.text
    return response.json()


def agui_body(state: dict[str, Any] | None = None, text: str = "hi") -> dict[str, Any]:
    return {
        "threadId": f"t-{uuid.uuid4().hex}",
        "runId": f"r-{uuid.uuid4().hex}",
        "state": state or {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": uuid.uuid4().hex, "role": "user", "content": text}],
    }


# --- the table -------------------------------------------------------------------------------------------


def test_a_table_drops_its_oldest_unpinned_entries_past_its_byte_budget() -> None:
    table: BoundedTable[str, dict[str, Any]] = BoundedTable(
        100, 60.0, pinned=lambda value: value["busy"], max_bytes=1000, size=lambda _key, value: value["size"]
    )
    table["busy"] = {"size": 400, "busy": True}
    for name in "abc":
        table[name] = {"size": 300, "busy": False}
    assert (
        list(table) == ["b", "c", "busy"] and table.bytes == 1000
    )  # "a" went; the pinned one stays (newest)
    table["c"]["size"] = 700
    table.resize("c")  # grown: the oldest settled entry goes to make room
    assert list(table) == ["c", "busy"] and table.bytes == 1100
    table.pop("c")
    assert table.bytes == 400


# --- AG-UI -----------------------------------------------------------------------------------------------


async def test_agui_threads_and_runs_are_bounded_in_bytes() -> None:
    budgets = Budgets(agui_threads_bytes=300_000, agui_runs_bytes=600_000)
    agent, app = build(budgets=budgets)
    state = {f"k{i}": "v" * 1000 for i in range(100)}  # about 100 kB in the input, twice in a run's frames
    async with http(app) as client:
        for _ in range(20):
            response = await client.post("/agui/echo", json=agui_body(state))
            assert response.status_code == 200 and "RUN_FINISHED" in response.text
    endpoint = agent.agui_app
    threads, runs = endpoint.lifecycle.threads, endpoint.lifecycle.runs
    assert 0 < len(threads) <= 3 and threads.bytes <= 300_000, (len(threads), threads.bytes)
    assert 0 < len(runs) <= 3 and runs.bytes <= 600_000, (len(runs), runs.bytes)


async def test_agui_run_input_over_its_cap_is_refused_with_413_and_frees_its_run_id() -> None:
    agent, app = build(budgets=Budgets(agui_input_bytes=50_000))
    body = agui_body({"big": "x" * 60_000})
    async with http(app) as client:
        response = await client.post("/agui/echo", json=body)
        assert response.status_code == 413, response.text
        assert "limit" in response.text
        small = {**body, "state": {}}  # the same run id, now small: it was never claimed
        response = await client.post("/agui/echo", json=small)
        assert response.status_code == 200 and "RUN_FINISHED" in response.text
    assert len(agent.agui_app.lifecycle.runs) == 1


async def test_agui_run_buffer_is_bounded_in_bytes() -> None:
    agent, app = build(budgets=Budgets(agui_run_buffer_bytes=4_000))
    async with http(app) as client:
        body = agui_body(text="y" * 3_000)
        response = await client.post("/agui/echo", json=body)
        assert response.status_code == 200 and "RUN_FINISHED" in response.text
    run = agent.agui_app.lifecycle.runs.get(body["runId"])
    assert run is not None and run.buffered <= 4_000 and len(run.buffer) >= 1


# --- A2A -------------------------------------------------------------------------------------------------


async def test_a2a_message_over_the_task_cap_is_refused_with_invalid_params() -> None:
    agent, app = build(budgets=Budgets(a2a_task_bytes=10_000))
    async with http(app) as client:
        answer = await send(client, "z" * 20_000, "echo")
        assert answer["error"]["code"] == -32602 and "10,000" in answer["error"]["message"], answer
        assert (await send(client, "small", "echo"))["result"]["task"]["status"][
            "state"
        ] == "TASK_STATE_COMPLETED"
    assert len(agent.a2a_app.ops.tasks.live) == 0


async def test_a2a_parked_task_handles_are_bounded_in_bytes() -> None:
    budgets = Budgets(a2a_tasks_bytes=50_000, a2a_task_bytes=40_000)
    async with serving(budgets=budgets) as (agent, app), http(app) as client:
        for _ in range(6):  # each parks on its question holding about 20 kB of messages
            answer = await send(client, "w" * 20_000, "ask")
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", answer
        live = agent.a2a_app.ops.tasks.live
        # parked tasks are pinned: they all stay and count (the budget drops only settled ones) ...
        assert len(live) == 6 and live.bytes >= 6 * 20_000
        assert (
            agent.in_flight.waiting == 6 and agent.in_flight.parked_bytes >= 6 * 20_000
        )  # ... parked_bytes caps them
    assert (
        agent.in_flight.waiting == 0 and agent.in_flight.parked_bytes == 0
    )  # closed: nothing waits any more


async def test_parked_calls_past_their_byte_budget_fail_as_retryable() -> None:
    budgets = Budgets(parked_bytes=50_000, a2a_task_bytes=40_000)
    async with serving(budgets=budgets) as (agent, app), http(app) as client:
        states = [
            (await send(client, "w" * 20_000, "ask"))["result"]["task"]["status"]["state"] for _ in range(4)
        ]
        assert agent.in_flight.waiting == 2
    assert states[:2] == ["TASK_STATE_INPUT_REQUIRED"] * 2, states
    assert states[2:] == ["TASK_STATE_FAILED"] * 2, states


async def test_parked_tasks_hold_no_in_flight_slot() -> None:
    async with serving(limits=Limits(max_in_flight=2)) as (agent, app), http(app) as client:
        for _ in range(5):  # more parked tasks than the agent has slots
            answer = await send(client, "go", "ask")
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", answer
        assert agent.in_flight.total == 0 and agent.in_flight.waiting == 5
        live = await send(client, "still served", "echo")  # a live call is not locked out
        assert live["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", live
        response = await client.post("/agui/ask", json=agui_body())  # nor on AG-UI, which parks too
        assert response.status_code == 200 and "interrupt" in response.text
        assert agent.in_flight.total == 0 and agent.in_flight.waiting == 6


async def test_parked_calls_have_their_own_cap() -> None:
    async with serving(budgets=Budgets(max_parked=2)) as (_agent, app), http(app) as client:
        states = [(await send(client, "go", "ask"))["result"]["task"]["status"]["state"] for _ in range(3)]
    assert states == ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_FAILED"]


async def test_an_answer_takes_the_slot_again_and_gives_it_back() -> None:
    async with serving(limits=Limits(max_in_flight=1)) as (agent, app), http(app) as client:
        task = (await send(client, "go", "ask"))["result"]["task"]
        assert agent.in_flight.total == 0
        follow_up = {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "taskId": task["id"],
            "parts": [{"data": {"ok": True}}],
        }
        response = await client.post("/a2a", headers=A2A, json=rpc("SendMessage", {"message": follow_up}))
        assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", response.text
        await eventually(
            lambda: agent.in_flight.total == 0 and agent.in_flight.waiting == 0,
            lambda: (
                f"every slot to be given back: {agent.in_flight.total} held, {agent.in_flight.waiting} waiting"
            ),
            timeout=0.5,
        )
        assert (
            agent.in_flight.total == 0
            and agent.in_flight.waiting == 0
            and agent.in_flight.per_capability["ask"] == 0
        )


# --- anonymous callers -----------------------------------------------------------------------------------


async def test_anonymous_callers_are_listed_no_tasks_but_reach_their_own_by_id() -> None:
    async with serving() as (_agent, app), http(app) as client:
        task = (await send(client, "go", "ask"))["result"]["task"]  # parked: it waits for whoever has its id
        listed = await client.post("/a2a", headers=A2A, json=rpc("ListTasks", {}))
        assert listed.status_code == 200 and listed.json()["result"]["tasks"] == [], listed.text
        assert listed.json()["result"]["totalSize"] == 0
        rest = await client.get("/a2a/tasks", headers=A2A)
        assert rest.status_code == 200 and rest.json()["tasks"] == [], rest.text
        got = await client.post("/a2a", headers=A2A, json=rpc("GetTask", {"id": task["id"]}))
        assert got.json()["result"]["id"] == task["id"]  # its own unguessable id reaches it
        assert len(task["id"]) >= 32


async def test_a_caller_with_a_credential_still_lists_its_own_tasks() -> None:
    async with serving() as (_agent, app), http(app) as client:
        task = (await send(client, "go", "ask", authorization="Bearer alice"))["result"]["task"]
        listed = await client.post(
            "/a2a", headers={**A2A, "authorization": "Bearer alice"}, json=rpc("ListTasks", {})
        )
        assert [t["id"] for t in listed.json()["result"]["tasks"]] == [task["id"]], listed.text
        other = await client.post(
            "/a2a", headers={**A2A, "authorization": "Bearer bob"}, json=rpc("ListTasks", {})
        )
        assert other.json()["result"]["tasks"] == []


# --- MCP -------------------------------------------------------------------------------------------------


async def test_mcp_initialize_over_the_session_cap_is_refused_with_invalid_params() -> None:
    agent, app = build(budgets=Budgets(session_bytes=4_000, sessions_bytes=10_000))
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def initialize(title: str) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1", "title": title},
            },
        }

    async with http(app) as client:
        response = await client.post("/mcp", headers=headers, json=initialize("t" * 5_000))
        assert response.status_code == 200 and response.json()["error"]["code"] == -32602, response.text
        assert response.json()["id"] == 7 and "mcp-session-id" not in response.headers
        for _ in range(10):  # about 3 kB each: the table keeps what fits in 10 kB
            response = await client.post("/mcp", headers=headers, json=initialize("t" * 3_000))
            assert response.status_code == 200 and "result" in response.json(), response.text
    sessions = agent.mcp.sessions.sessions
    assert len(sessions) <= 3 and sessions.bytes <= 10_000, (len(sessions), sessions.bytes)
