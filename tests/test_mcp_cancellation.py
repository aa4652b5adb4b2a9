"""Cancellation over a real socket: ``notifications/cancelled`` in the handshake era, a closed stream in 2026."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware
from agentmw.settings import Timing
from tests import wire_app
from tests.conftest import serve
from tests.helpers.mcp_raw import open_session
from tests.helpers.servers import serving
from tests.test_mcp_wire import META, modern_body, modern_headers
from tests.waiting import eventually

ACCEPT = "application/json, text/event-stream"


@pytest.fixture(scope="module")
def url():
    with serve(wire_app.app) as base:
        yield base


@pytest.fixture(autouse=True)
def fresh_log():
    """Each test waits for what it logged itself, never for an entry (or an event bound to another loop) left
    by an earlier run in this process."""
    wire_app.log.clear()
    wire_app.events.clear()


async def wait_for(entry: str, timeout: float = 2.0) -> None:
    await eventually(lambda: entry in wire_app.log, f"{entry!r} in the log", timeout=timeout)


async def test_cancelled_notification_reaches_the_coroutine(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        headers = await open_session(client)
        call = {
            "jsonrpc": "2.0",
            "id": 41,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"tag": "n1"}},
        }
        async with anyio.create_task_group() as group:
            responses: list[httpx.Response] = []

            async def run_call() -> None:
                responses.append(await client.post("/mcp", headers=headers, json=call))

            group.start_soon(run_call)
            await wait_for("n1:started")
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}}
            assert (await client.post("/mcp", headers=headers, json=cancel)).status_code == 202
            await wait_for("n1:cancelled", timeout=0.5)
        assert "n1:finished" not in wire_app.log
        assert responses[0].status_code == 200
        assert '"id":41' not in responses[0].text, "a cancelled request is owed no response"


async def test_handshake_disconnect_does_not_cancel() -> None:
    wire_app.events["n2"] = anyio.Event()
    with serving(wire_app.app) as (url, server):
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            headers = await open_session(client)
        call = {
            "jsonrpc": "2.0",
            "id": 42,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"tag": "n2"}, "_meta": {"progressToken": 1}},
        }
        async with (
            httpx.AsyncClient(base_url=url, timeout=10) as client,
            client.stream("POST", "/mcp", headers=headers, json=call) as response,
        ):
            async for _ in response.aiter_raw():
                break  # the progress event arrived; now drop the connection
        await wait_for("n2:started")
        # The server has seen the connection go (uvicorn forgets it in connection_lost, where it also wakes any
        # reader of the request) ...
        await eventually(lambda: not server.server_state.connections, "the server to drop the connection")
        # ... and has served two more requests since, so whatever that wake-up would do has been done.
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            for n in (1, 2):
                ping = await client.post(
                    "/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 900 + n, "method": "ping"}
                )
                assert ping.status_code == 200
        assert "n2:cancelled" not in wire_app.log
        wire_app.events["n2"].set()
        await wait_for("n2:finished")


async def test_stateless_closed_stream_cancels_the_call(url: str) -> None:
    body = json.loads(modern_body("tools/call", {"name": "slow", "arguments": {"tag": "n3"}}))
    body["params"]["_meta"] = {**META, "progressToken": "t"}
    async with (
        httpx.AsyncClient(base_url=url, timeout=10) as client,
        client.stream("POST", "/mcp", headers=modern_headers("tools/call", "slow"), json=body) as response,
    ):
        assert response.headers["content-type"] == "text/event-stream"
        async for chunk in response.aiter_raw():
            assert b"notifications/progress" in chunk
            break
    await wait_for("n3:cancelled", timeout=1.0)
    assert "n3:finished" not in wire_app.log


async def test_a_silent_stateless_call_gets_keepalives() -> None:
    agent = Agent("keepalive", timing=Timing(keepalive_seconds=0.05))
    agent.add("tool", wire_app.slow)
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    wire_app.events["n4"] = anyio.Event()
    body = json.loads(modern_body("tools/call", {"name": "slow", "arguments": {"tag": "n4"}}))
    seen = b""
    with serve(app) as url:
        async with (
            httpx.AsyncClient(base_url=url, timeout=10) as client,
            client.stream(
                "POST", "/mcp", headers=modern_headers("tools/call", "slow"), json=body
            ) as response,
        ):
            assert response.headers["content-type"] == "text/event-stream"
            async for chunk in response.aiter_raw():
                seen += chunk
                if seen.count(b": ping") >= 2:
                    wire_app.events["n4"].set()
                if b'"result"' in seen:
                    break
    assert b"released" in seen
