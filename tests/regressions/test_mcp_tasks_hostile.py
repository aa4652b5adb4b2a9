"""A hostile review of MCP tasks (docs/mcp.md, "Tasks"): malformed task requests get the protocol's error (never
-32603 with a traceback), another caller's task is answered exactly like an unknown one, cancels race completion
and each other, answers given twice or in the wrong shape are ignored, ``tasks/result`` ends when the server
stops, and no asyncio task is left pending when the event loop ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

import pytest
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context
from agentmw.testing import A2ATestClient, McpError, McpTestClient
from tests import test_mcp_tasks
from tests.test_mcp_tasks import RAN, TAKES_TASKS, poll, terminal
from tests.waiting import eventually, stays

LEGACY = "2025-11-25"
made = test_mcp_tasks.made  # the fixture: agents built on a store, closed after the test


async def _error(mcp: McpTestClient, method: str, params: dict[str, Any]) -> McpError:
    with pytest.raises(McpError) as raised:
        await mcp.request(method, params)
    return raised.value


# --- malformed requests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ["2026-07-28", LEGACY])
async def test_an_empty_or_huge_task_id_is_an_unknown_task_not_an_internal_error(
    made, era: str, caplog
) -> None:
    _, app = made("memory://")
    methods = ("tasks/get", "tasks/cancel") + (("tasks/update",) if era != LEGACY else ("tasks/result",))
    async with McpTestClient(app, era=era, capabilities=TAKES_TASKS if era != LEGACY else {}) as mcp:
        unknown = await _error(mcp, "tasks/get", {"taskId": str(uuid.uuid4())})
        with caplog.at_level(logging.ERROR, logger="agentmw"):
            for task_id in ("", "x" * 5000):
                for method in methods:
                    params: dict[str, Any] = {"taskId": task_id}
                    if method == "tasks/update":
                        params["inputResponses"] = {}
                    error = await _error(mcp, method, params)
                    assert (error.code, error.message) == (unknown.code, unknown.message), (
                        method,
                        len(task_id),
                    )
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], (
        "a client's bad id logged as our bug"
    )


async def test_a_huge_list_cursor_is_invalid_params(made) -> None:
    _, app = made("memory://")
    async with McpTestClient(app, era=LEGACY) as mcp:
        for cursor in ("1" * 5000, 7, "-1", "abc", "\u00b2", "1.5"):
            error = await _error(mcp, "tasks/list", {"cursor": cursor})
            assert error.code == -32602, cursor


async def test_a_2025_task_param_that_is_not_an_object_is_invalid_params(made) -> None:
    _, app = made("memory://")
    async with McpTestClient(app, era=LEGACY) as mcp:
        for task in ("yes", 5, ["ttl"]):
            error = await _error(
                mcp, "tools/call", {"name": "crunch", "arguments": {"seconds": 0}, "task": task}
            )
            assert error.code == -32602, task
        # null is "no task": the plain call
        plain = await mcp.request("tools/call", {"name": "crunch", "arguments": {"seconds": 0}, "task": None})
        assert plain["content"][0]["text"] == "crunched "


async def test_odd_ttls_are_overridden_by_the_servers_own(made) -> None:
    _, app = made("memory://")
    async with McpTestClient(app, era=LEGACY) as mcp:
        for ttl in (-1, 0, 10**30, 1.5, "soon"):
            task = (
                await mcp.request(
                    "tools/call", {"name": "crunch", "arguments": {"seconds": 0}, "task": {"ttl": ttl}}
                )
            )["task"]
            assert isinstance(task["ttl"], int) and task["ttl"] > 0 and task["pollInterval"] > 0


# --- another caller's task ----------------------------------------------------------------------------------


async def test_another_callers_task_is_answered_exactly_like_an_unknown_one(made) -> None:
    _, app = made("memory://")
    async with (
        McpTestClient(app, capabilities=TAKES_TASKS, headers={"authorization": "Bearer alice"}) as alice,
        McpTestClient(app, capabilities=TAKES_TASKS, headers={"authorization": "Bearer mallory"}) as mallory,
    ):
        created = await alice.call_tool("wire", {"amount": 9})
        owned = created["taskId"]
        await poll(alice, owned, lambda t: t["status"] == "input_required")
        unknown = str(uuid.uuid4())
        for method, extra in (
            ("tasks/get", {}),
            ("tasks/cancel", {}),
            ("tasks/update", {"inputResponses": {"to": {"action": "accept", "content": {"to": "mallory"}}}}),
        ):
            theirs = await _error(mallory, method, {"taskId": owned, **extra})
            nobodys = await _error(mallory, method, {"taskId": unknown, **extra})
            assert (theirs.status, theirs.code, theirs.message) == (
                nobodys.status,
                nobodys.code,
                nobodys.message,
            )
            assert theirs.data == {"taskId": owned} and nobodys.data == {"taskId": unknown}
        still = await alice.request("tasks/get", {"taskId": owned})
        assert still["status"] == "input_required" and set(still["inputRequests"]) == {"to", "ok"}
        await alice.request("tasks/cancel", {"taskId": owned})
    async with (
        McpTestClient(app, era=LEGACY, headers={"authorization": "Bearer alice"}) as alice,
        McpTestClient(app, era=LEGACY, headers={"authorization": "Bearer mallory"}) as mallory,
    ):
        task = (
            await alice.request("tools/call", {"name": "crunch", "arguments": {"seconds": 0.05}, "task": {}})
        )["task"]
        for method in ("tasks/get", "tasks/cancel", "tasks/result"):
            theirs = await _error(mallory, method, {"taskId": task["taskId"]})
            nobodys = await _error(mallory, method, {"taskId": str(uuid.uuid4())})
            assert (theirs.status, theirs.code, theirs.message) == (
                nobodys.status,
                nobodys.code,
                nobodys.message,
            )
        assert (await mallory.request("tasks/list"))["tasks"] == []


# --- answers and cancels ------------------------------------------------------------------------------------


async def test_wrong_shaped_and_repeated_answers_are_ignored(made) -> None:
    _, app = made("memory://")
    async with McpTestClient(app, capabilities=TAKES_TASKS) as mcp:
        task_id = (await mcp.call_tool("wire", {"amount": 4}))["taskId"]
        await poll(mcp, task_id, lambda t: t["status"] == "input_required")
        await mcp.request("tasks/update", {"taskId": task_id, "inputResponses": {"to": "bob", "ok": 5}})
        await mcp.request("tasks/update", {"taskId": task_id, "inputResponses": {"to": {"action": "maybe"}}})
        parked = await mcp.request("tasks/get", {"taskId": task_id})
        assert parked["status"] == "input_required" and set(parked["inputRequests"]) == {"to", "ok"}
        for responses in ([], "x", None):
            error = await _error(mcp, "tasks/update", {"taskId": task_id, "inputResponses": responses})
            assert error.code == -32602
        answers = {
            "to": {"action": "accept", "content": {"to": "bob"}},
            "ok": {"action": "accept", "content": {"ok": True}},
        }
        await mcp.request("tasks/update", {"taskId": task_id, "inputResponses": answers})
        await mcp.request(
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {"to": {"action": "accept", "content": {"to": "eve"}}, "ok": answers["ok"]},
            },
        )  # a second answer
        done = await poll(mcp, task_id, terminal)
        assert done["result"]["content"][0]["text"] == "sent 4 to bob"
        await mcp.request("tasks/update", {"taskId": task_id, "inputResponses": answers})  # after the end
    assert RAN.count("transfer 4 to bob") == 1 and "transfer 4 to eve" not in RAN


async def test_concurrent_cancels_and_cancels_racing_completion(made) -> None:
    _, app = made("memory://")
    async with McpTestClient(app, capabilities=TAKES_TASKS) as mcp, McpTestClient(app, era=LEGACY) as legacy:
        label = uuid.uuid4().hex[:6]
        task_id = (await mcp.call_tool("crunch", {"seconds": 30, "label": label}))["taskId"]
        await eventually(lambda: f"{label}:start" in RAN, "the task to start")
        acks = await asyncio.gather(*(mcp.request("tasks/cancel", {"taskId": task_id}) for _ in range(5)))
        assert all(ack["resultType"] == "complete" for ack in acks)
        assert (await poll(mcp, task_id, terminal))["status"] == "cancelled"
        assert RAN.count(f"{label}:cancelled") == 1
        for delay in (0.0, 0.005, 0.01, 0.02):
            racing = (await mcp.call_tool("crunch", {"seconds": 0.01, "label": "race"}))["taskId"]
            await asyncio.sleep(delay)
            await mcp.request("tasks/cancel", {"taskId": racing})
            final = await poll(mcp, racing, terminal)
            assert final["status"] in ("completed", "cancelled")
            if final["status"] == "completed":  # the end stands: never a result and a cancel at once
                assert final["result"]["content"][0]["text"] == "crunched race"
        task = (
            await legacy.request("tools/call", {"name": "crunch", "arguments": {"seconds": 30}, "task": {}})
        )["task"]
        results = await asyncio.gather(
            *(legacy.request("tasks/cancel", {"taskId": task["taskId"]}) for _ in range(3)),
            return_exceptions=True,
        )
        cancelled = [r for r in results if isinstance(r, dict)]
        refused = [r for r in results if isinstance(r, McpError)]
        assert cancelled and all(r["status"] == "cancelled" for r in cancelled)
        assert all(r.code == -32602 for r in refused) and len(cancelled) + len(refused) == 3


# --- bounded waits ------------------------------------------------------------------------------------------


async def test_tasks_result_ends_when_the_server_shuts_down(made, monkeypatch) -> None:
    from sse_starlette.sse import AppStatus

    _, app = made("memory://")
    async with McpTestClient(app, era=LEGACY) as mcp:
        task = (
            await mcp.request("tools/call", {"name": "crunch", "arguments": {"seconds": 60}, "task": {}})
        )["task"]
        waiting = asyncio.ensure_future(mcp.request("tasks/result", {"taskId": task["taskId"]}))
        await stays(lambda: not waiting.done(), "tasks/result waits for the running task", seconds=0.3)
        assert not waiting.done()
        monkeypatch.setattr(AppStatus, "should_exit", True)
        with pytest.raises(McpError) as stopped:
            await asyncio.wait_for(waiting, 5.0)
        assert stopped.value.code == -32603 and "shutting down" in stopped.value.message
        monkeypatch.setattr(AppStatus, "should_exit", False)
        assert (await mcp.request("tasks/get", {"taskId": task["taskId"]}))["status"] == "working"
        await mcp.request("tasks/cancel", {"taskId": task["taskId"]})


# --- nothing left pending when the loop ends ------------------------------------------------------------------


def _asking_agent() -> tuple[Agent, Starlette]:
    agent = Agent("asks", "0.1", store="memory://")

    @agent.tool(task="optional")
    @agent.skill
    async def onboard(ctx: Context) -> str:
        """Asks a name.

        Summary:
            Asks for a name, then greets.
        """
        answer = await ctx.ask("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"hello {(answer.content or {}).get('name')}"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


def test_no_task_is_left_pending_when_the_event_loop_ends() -> None:
    """Nothing closes an agent's task registries when its loop ends (asyncio.run, a test's loop, `agentmw
    call`): cancelling the parked tasks there must not start a task writer the loop never runs."""
    started: list[asyncio.Task[Any]] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        started.append(task)
        return task

    async def park_everywhere() -> None:
        asyncio.get_running_loop().set_task_factory(factory)
        _, app = _asking_agent()
        async with A2ATestClient(app) as a2a:
            task = await a2a.send(data={}, skill="onboard")
            assert task["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        async with McpTestClient(app, capabilities=TAKES_TASKS) as mcp:
            created = await mcp.call_tool("onboard")
            await poll(mcp, created["taskId"], lambda t: t["status"] == "input_required")

    runner = asyncio.Runner()
    try:
        runner.run(park_everywhere())
    finally:
        runner.close()
    left = sorted(t.get_name() for t in started if not t.done())
    assert left == [], f"tasks left pending when the loop ended: {left}"


def test_the_cli_call_of_a_parking_skill_leaves_nothing_pending(tmp_path) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "parking.py").write_text(
        "from tests.regressions.test_mcp_tasks_hostile import _asking_agent\nagent, app = _asking_agent()\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)]),
        "AGENTMW_STORE": "memory://",
    }
    done = subprocess.run(
        [sys.executable, "-m", "agentmw.cli", "call", "parking:app", "onboard", "{}", "--protocol", "a2a"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert "Task was destroyed" not in done.stderr, done.stderr
