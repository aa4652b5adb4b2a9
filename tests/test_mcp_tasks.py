"""MCP tasks (docs/mcp.md, "Tasks"): both revisions on one agent, the shared task model under A2A and MCP, and
tasks across replicas and restarts on a real SQLite file and a real redis-server.

The 2026 extension is also checked by the official conformance suite (tests/conformance, its tasks-*
scenarios); these tests cover what it does not: the 2025-11-25 tasks, a skill that is an A2A task and an MCP
task, answers and cancels that land on another replica, a task parked across a restart.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Ask, Context, Rejected
from agentmw.lifecycle import TaskRecord
from agentmw.mcp.tasks import EXTENSION, render, tasks_of
from agentmw.testing import McpError, McpTestClient
from tests.helpers.a2a_raw import send_message
from tests.state.conftest import redis_url  # noqa: F401  (a fixture: a real redis-server for the session)
from tests.waiting import eventually

TAKES_TASKS = {"extensions": {EXTENSION: {}}, "elicitation": {}}
RAN: list[str] = []  # what the tools did, in order, by any replica


def _step(name: str) -> str:
    RAN.append(name)
    return name


STALLED: list[str] = []


def build(store: str, stall: bool = False) -> tuple[Agent, Starlette]:
    agent = Agent("tasks", "0.1", store=store)

    @agent.tool(task="optional")
    async def crunch(seconds: float, label: str = "") -> str:
        """Works ``seconds`` seconds."""
        RAN.append(f"{label}:start")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            RAN.append(f"{label}:cancelled")
            raise
        return f"crunched {label}"

    @agent.tool(task="required")
    async def broken(kind: str) -> str:
        """Fails: ``tool`` as a tool error, ``protocol`` as a refused request."""
        if kind == "protocol":
            raise Rejected("refused")
        raise RuntimeError("broken tool")

    @agent.tool(task="optional")
    async def wire(amount: int, ctx: Context) -> str:
        """Asks two questions at once, then transfers once."""
        answers = await ctx.inputs(
            {
                "to": Ask("To whom?", {"type": "object", "properties": {"to": {"type": "string"}}}),
                "ok": Ask("Sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}),
            }
        )
        to = (answers["to"].content or {}).get("to")
        done = await ctx.once("transfer", RAN.append, f"transfer {amount} to {to}")
        assert done is None
        return f"sent {amount} to {to}"

    @agent.tool(task="optional")
    async def steps(label: str, count: int, ctx: Context) -> list[str]:
        """Does ``count`` one-time steps; the first replica stalls after two of them."""
        done = []
        for step in range(count):
            done.append(await ctx.once(f"step-{step}", _step, f"{label}:{step}"))
            if step == 1 and stall and label not in STALLED:
                STALLED.append(label)
                await asyncio.sleep(3600)  # this replica "dies" here
        return done

    @agent.tool(task="required", ask_first=True)
    async def onboard(ctx: Context) -> str:
        """Asks a name first, then works on as a task."""
        name = (
            (
                await ctx.ask(
                    "Name?", {"type": "object", "properties": {"name": {"type": "string"}}}, key="name"
                )
            ).content
            or {}
        ).get("name")
        await ctx.continue_as_task()
        await asyncio.sleep(0.05)
        return f"welcome {name}"

    @agent.tool(task="optional")
    @agent.skill
    async def report(topic: str, ctx: Context) -> str:
        """Writes a report on a topic.

        Summary:
            Long reports, as tasks.
        """
        await ctx.progress(1, 2, "drafting")
        await asyncio.sleep(0.05)
        return f"report on {topic}"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


@pytest.fixture
async def made() -> AsyncIterator[Callable[..., tuple[Agent, Starlette]]]:
    agents: list[Agent] = []

    def make(store: str, stall: bool = False) -> tuple[Agent, Starlette]:
        agent, app = build(store, stall)
        agents.append(agent)
        return agent, app

    yield make
    for agent in agents:
        await tasks_of(agent).close()
        await agent.state.close()


async def poll(
    mcp: McpTestClient, task_id: str, until: Callable[[dict[str, Any]], bool], timeout: float = 10.0
) -> dict[str, Any]:
    seen: list[dict[str, Any]] = []

    async def look() -> bool:
        seen.append(await mcp.request("tasks/get", {"taskId": task_id}))
        return until(seen[-1])

    await eventually(look, lambda: f"task {task_id} to get there: {seen[-1]}", timeout=timeout, interval=0.02)
    return seen[-1]


def terminal(task: dict[str, Any]) -> bool:
    return task["status"] in ("completed", "failed", "cancelled")


# --- 2026-07-28: the extension --------------------------------------------------------------------------------


async def test_a_task_tool_answers_with_a_handle_then_the_result_inlined(made) -> None:
    _, app = made("memory://")
    async with McpTestClient(app, capabilities=TAKES_TASKS) as mcp:
        created = await mcp.call_tool("crunch", {"seconds": 0.2, "label": "a"})
        assert created["resultType"] == "task" and created["status"] == "working"
        assert {"result", "error", "inputRequests", "requestState", "task"}.isdisjoint(created)
        assert isinstance(created["ttlMs"], int) and created["pollIntervalMs"] > 0
        first = await mcp.request("tasks/get", {"taskId": created["taskId"]})  # durable before the handle
        assert first["taskId"] == created["taskId"] and first["resultType"] == "complete"
        done = await poll(mcp, created["taskId"], terminal)
        assert done["status"] == "completed"
        assert done["result"] == {"content": [{"type": "text", "text": "crunched a"}], "isError": False}
        # the same tool for a caller that does not take tasks: a plain result
        async with McpTestClient(app) as plain:
            result = await plain.call_tool("crunch", {"seconds": 0, "label": "b"})
            assert "taskId" not in result and result["content"][0]["text"] == "crunched b"
            with pytest.raises(McpError) as refused:
                await plain.request("tasks/get", {"taskId": created["taskId"]})
            assert refused.value.code == -32021
            with pytest.raises(McpError) as needed:
                await plain.call_tool("broken", {"kind": "tool"})
            assert needed.value.code == -32021
            assert needed.value.data == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


async def test_tool_errors_complete_and_protocol_errors_fail(made) -> None:
    _, app = made("memory://")
    async with McpTestClient(app, capabilities=TAKES_TASKS) as mcp:
        tool = await mcp.call_tool("broken", {"kind": "tool"})
        protocol = await mcp.call_tool("broken", {"kind": "protocol"})
        tool_done = await poll(mcp, tool["taskId"], terminal)
        protocol_done = await poll(mcp, protocol["taskId"], terminal)
        assert tool_done["status"] == "completed" and tool_done["result"]["isError"] is True
        assert protocol_done["status"] == "failed" and "result" not in protocol_done
        assert protocol_done["error"]["code"] == -32602 and protocol_done["error"]["message"] == "refused"


async def test_cancel_acknowledges_and_stops_the_coroutine(made) -> None:
    _, app = made("memory://")
    label = uuid.uuid4().hex[:6]
    async with McpTestClient(app, capabilities=TAKES_TASKS) as mcp:
        created = await mcp.call_tool("crunch", {"seconds": 30, "label": label})
        await eventually(lambda: f"{label}:start" in RAN, "the task to start")
        ack = await mcp.request("tasks/cancel", {"taskId": created["taskId"]})
        assert ack["resultType"] == "complete" and not {"taskId", "status", "result", "error"} & set(ack)
        done = await poll(mcp, created["taskId"], terminal)
        assert done["status"] == "cancelled" and f"{label}:cancelled" in RAN
        again = await mcp.request(
            "tasks/cancel", {"taskId": created["taskId"]}
        )  # idempotent on a terminal task
        assert again["resultType"] == "complete" and "status" not in again
        with pytest.raises(McpError) as unknown:
            await mcp.request("tasks/cancel", {"taskId": "no-such-task"})
        assert unknown.value.code == -32602


async def test_questions_park_the_task_and_may_be_answered_one_at_a_time(made) -> None:
    _, app = made("memory://")
    async with McpTestClient(app, capabilities=TAKES_TASKS) as mcp:
        created = await mcp.call_tool("wire", {"amount": 5})
        parked = await poll(mcp, created["taskId"], lambda t: t["status"] == "input_required")
        assert set(parked["inputRequests"]) == {"to", "ok"}
        assert parked["inputRequests"]["to"]["method"] == "elicitation/create"
        ack = await mcp.request(
            "tasks/update",
            {
                "taskId": created["taskId"],
                "inputResponses": {
                    "to": {"action": "accept", "content": {"to": "bob"}},
                    "unknown": {"action": "accept"},
                },
            },
        )
        assert "status" not in ack and ack["resultType"] == "complete"
        partial = await mcp.request("tasks/get", {"taskId": created["taskId"]})
        assert partial["status"] == "input_required" and set(partial["inputRequests"]) == {"ok"}
        await mcp.request(
            "tasks/update",
            {
                "taskId": created["taskId"],
                "inputResponses": {"ok": {"action": "accept", "content": {"ok": True}}},
            },
        )
        done = await poll(mcp, created["taskId"], terminal)
        assert done["result"]["content"][0]["text"] == "sent 5 to bob"


async def test_ask_first_resolves_questions_before_the_task_exists(made) -> None:
    _, app = made("memory://")
    async with McpTestClient(app, capabilities=TAKES_TASKS) as mcp:
        first = await mcp.call_tool("onboard")
        assert first["resultType"] == "input_required" and "taskId" not in first
        second = await mcp.request(
            "tools/call",
            {
                "name": "onboard",
                "arguments": {},
                "requestState": first["requestState"],
                "inputResponses": {"name": {"action": "accept", "content": {"name": "Alice"}}},
            },
        )
        assert second["resultType"] == "task" and "requestState" not in second
        done = await poll(mcp, second["taskId"], terminal)
        assert done["result"]["content"][0]["text"] == "welcome Alice"


async def test_removed_methods_and_routing_headers(made) -> None:
    _, app = made("memory://")
    async with McpTestClient(app, capabilities=TAKES_TASKS) as mcp:
        for method in ("tasks/result", "tasks/list"):
            with pytest.raises(McpError) as gone:
                await mcp.request(method, {"taskId": "x"})
            assert gone.value.code == -32601 and gone.value.status == 404
        created = await mcp.call_tool("crunch", {"seconds": 0, "label": "h"})
        with pytest.raises(McpError) as mismatch:
            await mcp.request("tasks/get", {"taskId": created["taskId"]}, mcp_name="another-task")
        assert mismatch.value.code == -32020 and mismatch.value.status == 400
        with pytest.raises(McpError) as unknown:
            await mcp.request("tasks/get", {"taskId": "tasks-nonexistent"})
        assert unknown.value.code == -32602
        tools = {t["name"]: t for t in (await mcp.request("tools/list"))["tools"]}
        assert tools["crunch"]["execution"] == {"taskSupport": "optional"} and "execution" not in tools.get(
            "greet", {}
        )


async def test_another_caller_does_not_see_the_task(made) -> None:
    _, app = made("memory://")
    async with (
        McpTestClient(app, capabilities=TAKES_TASKS, headers={"authorization": "Bearer alice"}) as alice,
        McpTestClient(app, capabilities=TAKES_TASKS, headers={"authorization": "Bearer mallory"}) as mallory,
    ):
        created = await alice.call_tool("crunch", {"seconds": 0, "label": "owned"})
        for method in ("tasks/get", "tasks/cancel"):
            with pytest.raises(McpError) as hidden:
                await mallory.request(method, {"taskId": created["taskId"]})
            assert hidden.value.code == -32602


# --- 2025-11-25: the experimental tasks ----------------------------------------------------------------------


async def test_2025_tasks_get_result_list_and_cancel(made) -> None:
    _, app = made("memory://")
    # a caller with a credential: anonymous callers are listed no tasks (docs/auth.md)
    async with McpTestClient(
        app,
        era="2025-11-25",
        capabilities={"elicitation": {}},
        headers={"authorization": "Bearer tasks-test"},
    ) as mcp:
        init_caps = (await mcp.request("tools/list"))["tools"]
        assert any(t.get("execution") == {"taskSupport": "required"} for t in init_caps)
        created = await mcp.request(
            "tools/call",
            {"name": "crunch", "arguments": {"seconds": 0.1, "label": "v1"}, "task": {"ttl": 60000}},
        )
        task = created["task"]
        assert task["status"] == "working" and isinstance(task["ttl"], int) and "ttlMs" not in task
        result = await mcp.request("tasks/result", {"taskId": task["taskId"]})  # waits until it ends
        assert result["content"][0]["text"] == "crunched v1"
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
        listed = await mcp.request("tasks/list")
        assert task["taskId"] in [t["taskId"] for t in listed["tasks"]]
        failing = (
            await mcp.request("tools/call", {"name": "broken", "arguments": {"kind": "tool"}, "task": {}})
        )["task"]
        assert (await poll(mcp, failing["taskId"], terminal))[
            "status"
        ] == "failed"  # isError is failed in 2025
        long = (
            await mcp.request(
                "tools/call", {"name": "crunch", "arguments": {"seconds": 30, "label": "v1c"}, "task": {}}
            )
        )["task"]
        cancelled = await mcp.request("tasks/cancel", {"taskId": long["taskId"]})
        assert cancelled["status"] == "cancelled" and cancelled["taskId"] == long["taskId"]
        with pytest.raises(McpError) as twice:  # a terminal task cannot be cancelled in this revision
            await mcp.request("tasks/cancel", {"taskId": long["taskId"]})
        assert twice.value.code == -32602
        with pytest.raises(McpError) as needs_task:
            await mcp.request("tools/call", {"name": "broken", "arguments": {"kind": "tool"}})
        assert needs_task.value.code == -32601
        with pytest.raises(McpError) as no_update:
            await mcp.request("tasks/update", {"taskId": task["taskId"], "inputResponses": {}})
        assert no_update.value.code == -32601


async def test_2025_tasks_result_asks_the_questions_on_its_stream(made) -> None:
    _, app = made("memory://")
    async with McpTestClient(app, era="2025-11-25", capabilities={"elicitation": {}}) as mcp:
        task = (await mcp.request("tools/call", {"name": "wire", "arguments": {"amount": 7}, "task": {}}))[
            "task"
        ]
        await poll(mcp, task["taskId"], lambda t: t["status"] == "input_required")
        answered: list[str] = []
        pending: set[asyncio.Task[Any]] = set()

        def on_message(message: dict[str, Any]) -> None:
            if message.get("method") == "elicitation/create":
                which = "to" if "whom" in message["params"]["message"] else "ok"
                content = {"to": "carol"} if which == "to" else {"ok": True}
                answered.append(which)
                pending.add(
                    asyncio.ensure_future(
                        mcp.post(
                            {
                                "jsonrpc": "2.0",
                                "id": message["id"],
                                "result": {"action": "accept", "content": content},
                            },
                            mcp.headers_for("", None),
                        )
                    )
                )

        result = await mcp.request("tasks/result", {"taskId": task["taskId"]}, on_notification=on_message)
        await asyncio.gather(*pending)
        assert sorted(answered) == ["ok", "to"]
        assert result["content"][0]["text"] == "sent 7 to carol"


# --- one task model under both faces ----------------------------------------------------------------------


async def test_the_same_skill_is_an_a2a_task_and_an_mcp_task(made, tmp_path: Path) -> None:
    agent, app = made(f"sqlite:///{tmp_path}/both.db")
    async with McpTestClient(app, capabilities=TAKES_TASKS) as mcp:
        created = await mcp.call_tool("report", {"topic": "mcp"})
        mcp_done = await poll(mcp, created["taskId"], terminal)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000"
    ) as http:
        body = send_message([{"data": {"topic": "a2a"}}], metadata={"skill": "report"})
        a2a = (await http.post("/a2a", json=body, headers={"a2a-version": "1.0"})).json()["result"]["task"]
    assert mcp_done["result"]["content"][0]["text"] == "report on mcp"
    assert a2a["status"]["state"] == "TASK_STATE_COMPLETED"
    assert a2a["artifacts"][0]["parts"][0]["text"] == "report on a2a"
    await agent.a2a_app.ops.tasks.flush()
    # one record model, one registry each, kept apart in the state: neither face sees the other's tasks
    mcp_record = await agent.state.get("mcp.tasks", created["taskId"])
    a2a_record = await agent.state.get("a2a.tasks", a2a["id"])
    assert mcp_record is not None and a2a_record is not None
    assert TaskRecord.from_dict(mcp_record.value).state == TaskRecord.from_dict(a2a_record.value).state
    assert await agent.state.get("a2a.tasks", created["taskId"]) is None


# --- replicas and restarts ------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/shared.db"
    return f"{request.getfixturevalue('redis_url')}?prefix=mcpt{uuid.uuid4().hex[:10]}"


async def test_a_task_parked_on_one_replica_is_answered_on_another(made, backend: str) -> None:
    (a, app_a), (_, app_b) = made(backend), made(backend)
    amount = uuid.uuid4().int % 1_000_000  # what this run transfers, told apart from the other runs'
    async with (
        McpTestClient(app_a, capabilities=TAKES_TASKS) as on_a,
        McpTestClient(app_b, capabilities=TAKES_TASKS) as on_b,
    ):
        created = await on_a.call_tool("wire", {"amount": amount})
        parked = await poll(on_b, created["taskId"], lambda t: t["status"] == "input_required")
        assert set(parked["inputRequests"]) == {"to", "ok"}
        await on_b.request(
            "tasks/update",
            {
                "taskId": created["taskId"],
                "inputResponses": {
                    "to": {"action": "accept", "content": {"to": "dave"}},
                    "ok": {"action": "accept", "content": {"ok": True}},
                },
            },
        )
        done = await poll(on_a, created["taskId"], terminal)
        assert (
            done["status"] == "completed" and done["result"]["content"][0]["text"] == f"sent {amount} to dave"
        )
    assert RAN.count(f"transfer {amount} to dave") == 1
    assert tasks_of(a).registry.local(created["taskId"]) is None  # A let go; B finished it


async def test_cancel_on_another_replica_stops_the_coroutine_over_the_bus(made, backend: str) -> None:
    (_, app_a), (_, app_b) = made(backend), made(backend)
    label = uuid.uuid4().hex[:6]
    async with (
        McpTestClient(app_a, capabilities=TAKES_TASKS) as on_a,
        McpTestClient(app_b, capabilities=TAKES_TASKS) as on_b,
    ):
        created = await on_a.call_tool("crunch", {"seconds": 30, "label": label})
        await eventually(lambda: f"{label}:start" in RAN, "the task to start on A")
        await poll(on_b, created["taskId"], lambda t: t["status"] == "working")
        await on_b.request("tasks/cancel", {"taskId": created["taskId"]})
        await eventually(lambda: f"{label}:cancelled" in RAN, "A's coroutine to be cancelled", timeout=10)
        done = await poll(on_b, created["taskId"], terminal)
        assert done["status"] == "cancelled"


async def test_a_dead_replicas_task_is_taken_over_and_each_step_runs_once(
    made, backend: str, monkeypatch
) -> None:
    from agentmw.mcp import tasks as tasks_module
    from agentmw.tasks import Cadence

    monkeypatch.setattr(
        tasks_module,
        "TIMING",
        Cadence(heartbeat_seconds=0.3, lease_seconds=0.6, sweep_seconds=0.1, retry_take_over_seconds=0.1),
    )
    (a, app_a), (_, app_b) = made(backend, stall=True), made(backend)
    label = f"kill-{uuid.uuid4().hex[:6]}"
    async with (
        McpTestClient(app_a, capabilities=TAKES_TASKS) as on_a,
        McpTestClient(app_b, capabilities=TAKES_TASKS) as on_b,
    ):
        created = await on_a.call_tool("steps", {"label": label, "count": 4})
        await eventually(lambda: label in STALLED, "A to do two steps and stall")
        # A dies: its coroutine stops with nothing written or released, its heartbeat and listener stop
        registry = tasks_of(a).registry
        registry.closing = True
        live = registry.live.get(created["taskId"])
        assert live is not None and live.runner is not None
        live.runner.cancel()
        for background in list(registry._background):
            background.cancel()
        done = await poll(on_b, created["taskId"], terminal, timeout=20)  # B sweeps, or reads it lost
    assert done["status"] == "completed", done
    assert [c["text"] for c in done["result"]["content"]] == [f"{label}:{n}" for n in range(4)], done[
        "result"
    ]
    assert [r for r in RAN if r.startswith(f"{label}:")] == [f"{label}:{n}" for n in range(4)], (
        "each step done once: the two A did were replayed from the journal"
    )


async def test_a_parked_task_survives_a_restart(made, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/restart.db"
    first, app = made(url)
    async with McpTestClient(app, capabilities=TAKES_TASKS) as mcp:
        created = await mcp.call_tool("wire", {"amount": 3})
        await poll(mcp, created["taskId"], lambda t: t["status"] == "input_required")
    manager = tasks_of(first)
    await manager.flush()
    manager.registry.closing = True  # a shutdown: the parked task is left for the next process
    await manager.close()
    _, again = made(url)
    async with McpTestClient(again, capabilities=TAKES_TASKS) as mcp:
        parked = await mcp.request("tasks/get", {"taskId": created["taskId"]})
        assert parked["status"] == "input_required" and set(parked["inputRequests"]) == {"to", "ok"}
        await mcp.request(
            "tasks/update",
            {
                "taskId": created["taskId"],
                "inputResponses": {
                    "to": {"action": "accept", "content": {"to": "erin"}},
                    "ok": {"action": "accept", "content": {"ok": True}},
                },
            },
        )
        done = await poll(mcp, created["taskId"], terminal)
        assert done["result"]["content"][0]["text"] == "sent 3 to erin"


# --- the shapes, without a server ------------------------------------------------------------------------------


def test_render_per_revision() -> None:
    record = TaskRecord(
        "t1",
        "",
        "alice",
        state="TASK_STATE_COMPLETED",
        created_at=0.0,
        updated_at=1.5,
        metadata={"ttlMs": 1000, "result": {"content": [], "isError": True}},
    )
    modern, legacy = render(record, True), render(record, False)
    assert modern["status"] == "completed" and modern["result"]["isError"] is True and modern["ttlMs"] == 1000
    assert legacy["status"] == "failed" and "result" not in legacy and legacy["ttl"] == 1000
    assert (
        modern["createdAt"] == "1970-01-01T00:00:00.000Z"
        and modern["lastUpdatedAt"] == "1970-01-01T00:00:01.500Z"
    )
    assert "result" not in render(record, True, detailed=False)
    parked = TaskRecord(
        "t2",
        "",
        "a",
        state="TASK_STATE_INPUT_REQUIRED",
        metadata={"inputRequests": {"k": {"method": "elicitation/create", "params": {}}}},
    )
    assert render(parked, True)["inputRequests"] == {"k": {"method": "elicitation/create", "params": {}}}
    assert json.dumps(render(parked, False))  # plain JSON
