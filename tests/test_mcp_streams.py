"""Server-to-client streams: the handshake-era GET stream and 2026 ``subscriptions/listen``, over a real socket."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest

from agentmw import Agent
from agentmw.settings import Limits, Timing
from agentmw.testing import McpError, McpTestClient
from tests import wire_app
from tests.conftest import serve
from tests.helpers.mcp_raw import open_session
from tests.test_mcp_wire import META, modern_headers


@pytest.fixture(scope="module")
def url():
    with serve(wire_app.app) as base:
        yield base


async def read_events(lines, count: int, timeout: float = 3.0) -> list[dict]:
    """The next ``count`` SSE data messages from ``lines`` (one ``aiter_lines()`` iterator per response)."""
    events: list[dict] = []
    with anyio.fail_after(timeout):
        async for line in lines:
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
                if len(events) == count:
                    break
    return events


async def test_get_stream_carries_list_changes_and_subscribed_updates(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        headers = await open_session(client)
        subscribe = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "resources/subscribe",
            "params": {"uri": "wire://status"},
        }
        assert (await client.post("/mcp", headers=headers, json=subscribe)).json()["result"] == {}
        stream_headers = {"accept": "text/event-stream", "mcp-session-id": headers["mcp-session-id"]}
        async with client.stream("GET", "/mcp", headers=stream_headers) as stream:
            assert stream.status_code == 200
            second = await client.get("/mcp", headers=stream_headers)
            assert second.status_code == 409
            wire_app.agent.resource_updated("wire://other")  # not subscribed: must not arrive
            wire_app.agent.add("tool", lambda: "tmp", name="temporary")
            try:  # the shared agent gets its tools back even when the stream fails
                wire_app.agent.resource_updated("wire://status")
                events = await read_events(stream.aiter_lines(), 2)
            finally:
                wire_app.agent.remove("tool", "temporary")
        assert [e["method"] for e in events] == [
            "notifications/tools/list_changed",
            "notifications/resources/updated",
        ]
        assert events[1]["params"] == {"uri": "wire://status"}


async def test_subscriptions_listen_acknowledges_and_filters(url: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": "sub-1",
        "method": "subscriptions/listen",
        "params": {
            "_meta": META,
            "notifications": {"promptsListChanged": True, "resourceSubscriptions": ["wire://status"]},
        },
    }
    async with (
        httpx.AsyncClient(base_url=url, timeout=10) as client,
        client.stream("POST", "/mcp", headers=modern_headers("subscriptions/listen"), json=body) as stream,
    ):
        assert stream.headers["content-type"] == "text/event-stream"
        lines = stream.aiter_lines()
        [ack] = await read_events(lines, 1)
        wire_app.agent.add("tool", lambda: "tmp", name="temporary2")  # tools were not asked for
        try:  # the shared agent gets its tools and prompts back even when the stream fails
            wire_app.agent.add("prompt", lambda: "p", name="temporary_prompt")
            try:
                wire_app.agent.resource_updated("wire://status")
                events = await read_events(lines, 2)
            finally:
                wire_app.agent.remove("prompt", "temporary_prompt")
        finally:
            wire_app.agent.remove("tool", "temporary2")
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["notifications"] == {
        "promptsListChanged": True,
        "resourceSubscriptions": ["wire://status"],
    }
    assert ack["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"}
    assert [e["method"] for e in events] == [
        "notifications/prompts/list_changed",
        "notifications/resources/updated",
    ]
    assert all(e["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub-1" for e in events)


async def test_listen_needs_a_notifications_object() -> None:
    async with McpTestClient(wire_app.app) as mcp:
        with pytest.raises(McpError) as info:
            await mcp.request("subscriptions/listen", {})
        assert info.value.code == -32602 and info.value.status == 400


async def test_prompt_and_completion_errors() -> None:
    async with McpTestClient(wire_app.app, era="2025-11-25") as mcp:
        with pytest.raises(McpError) as info:
            await mcp.request("prompts/get", {"name": "greet", "arguments": {}})
        assert info.value.code == -32602 and "name" in info.value.message
        assert (await mcp.request("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}}))[
            "messages"
        ] == [{"role": "user", "content": {"type": "text", "text": "Hello Ada"}}]
        empty = await mcp.request(
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "A"}},
        )
        assert empty == {"completion": {"values": [], "total": 0, "hasMore": False}}


async def test_session_cap_and_idle_expiry() -> None:
    agent = Agent("tiny", limits=Limits(max_sessions=1), timing=Timing(session_idle_seconds=0.05))
    async with McpTestClient(agent.asgi(), era="2025-11-25") as first:
        with pytest.raises(McpError) as info:
            async with McpTestClient(agent.asgi(), era="2025-11-25"):
                pass
        assert info.value.status == 503
        await anyio.sleep(0.1)
        async with McpTestClient(agent.asgi(), era="2025-11-25") as second:  # the idle one was evicted
            assert second.session_id != first.session_id
        with pytest.raises(McpError) as gone:
            await first.request("ping")
        assert gone.value.status == 404
        first.session_id = None
