"""An MCP peer's connections are kept between calls (docs/bridges.md, "Connections"), against the real peers in
their own processes: at 2025-11-25 a pool of sessions, each serving one call at a time; at 2026-07-28 one client
every call shares. Nothing a peer sends for one call reaches another: progress, questions and answers."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from agentmw import Agent
from agentmw.bridges import HANDSHAKE_REVISION, MCP_REVISIONS, STATELESS_REVISION, Egress, McpPeer
from agentmw.safety.framing import unescape
from agentmw.testing import McpError, McpTestClient
from tests.bridges.conftest import ask_and_answer, side_effects
from tests.waiting import eventually

LOOPBACK = Egress(allow_networks=["127.0.0.0/8"])


def sessions(peer: Any) -> int:
    return peer.counter()["sessions"]


def bridged(url: str, revision: str, **options: Any) -> tuple[Agent, McpPeer]:
    agent = Agent("front", store="memory://")
    peer = agent.bridge(McpPeer(url, revision=revision, name="catalog", allow=LOOPBACK, **options))
    return agent, peer


@pytest.fixture(params=MCP_REVISIONS)
def remote(request: pytest.FixtureRequest) -> tuple[Any, str]:
    fixture = {HANDSHAKE_REVISION: "mcp_peer_2025", STATELESS_REVISION: "mcp_peer_2026"}[request.param]
    return request.getfixturevalue(fixture), request.param


async def test_a_session_is_kept_and_serves_call_after_call(mcp_peer_2025) -> None:
    agent, peer = bridged(mcp_peer_2025.url, HANDSHAKE_REVISION)
    await agent.start_bridges()
    opened, ran = sessions(mcp_peer_2025), side_effects(mcp_peer_2025)
    async with McpTestClient(agent.asgi()) as mcp:
        for index in range(10):
            echoed = await mcp.call_tool("echo", {"text": f"call {index}"})
            assert unescape(echoed["content"][0]["text"]).count(f"call {index}") == 1
    assert sessions(mcp_peer_2025) == opened  # the start's session served all ten: no handshake per call
    assert side_effects(mcp_peer_2025) == ran + 10
    assert peer.connections.open_count == 1
    await peer.aclose()
    assert peer.connections.open_count == 0


async def test_without_a_pool_every_call_opens_its_own_session(mcp_peer_2025) -> None:
    agent, peer = bridged(mcp_peer_2025.url, HANDSHAKE_REVISION, pool_size=0)
    await agent.start_bridges()
    opened = sessions(mcp_peer_2025)
    async with McpTestClient(agent.asgi()) as mcp:
        for _ in range(3):
            assert (await mcp.call_tool("echo", {"text": "x"}))["isError"] is False
    assert sessions(mcp_peer_2025) == opened + 3
    await eventually(lambda: peer.connections.open_count == 0, "every call's session to close")
    assert peer.connections.open_count == 0


async def test_calls_at_once_keep_their_progress_apart(remote) -> None:
    """Calls at the same time: a session each at 2025-11-25 (at most pool_size kept after), the one shared
    client at 2026-07-28; every call sees exactly its own progress notifications."""
    process, revision = remote
    agent, peer = bridged(process.url, revision, pool_size=2)
    await agent.start_bridges()
    opened = sessions(process)

    async def one(index: int) -> list[dict]:
        notes: list[dict] = []
        async with McpTestClient(agent.asgi()) as mcp:
            result = await mcp.request(
                "tools/call",
                {
                    "name": "progress",
                    "arguments": {"steps": index + 2},
                    "_meta": {"progressToken": f"t{index}"},
                },
                on_notification=notes.append,
            )
        assert result["isError"] is False
        return [n["params"] for n in notes if n.get("method") == "notifications/progress"]

    calls = 6
    seen = await asyncio.gather(*(one(index) for index in range(calls)))
    for index, progress in enumerate(seen):
        assert {p["progressToken"] for p in progress} == {f"t{index}"}
        assert [p["progress"] for p in progress] == list(
            range(1, index + 3)
        )  # all of its own, none of others'
        assert [p["total"] for p in progress] == [index + 2] * (index + 2)
    kept = 2 if revision == HANDSHAKE_REVISION else 1
    await eventually(lambda: peer.connections.open_count <= kept, "the connections past the pool to close")
    if revision == HANDSHAKE_REVISION:
        assert opened < sessions(process) <= opened + calls - 1  # one call at a time per session: more opened
        assert peer.connections.open_count <= 2  # the rest were closed: at most pool_size kept
    else:
        assert sessions(process) == opened == 0  # stateless: no sessions at all
        assert peer.connections.open_count == 1  # one client served the six at once
    await peer.aclose()


async def test_questions_at_once_each_reach_their_own_caller(remote) -> None:
    """Eight callers at once (A2A), each asked the peer's question and answering with its own name: each answer
    reaches the call that asked, over kept connections (one shared client at 2026-07-28)."""
    process, revision = remote
    agent, peer = bridged(process.url, revision)

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1", timeout=30
    ) as http:
        for round_ in range(2):  # twice: the second round runs on the connections the first one left
            done = await asyncio.gather(
                *(
                    ask_and_answer(http, "ask_user", f"{round_}-{index}", f"caller-{index}")
                    for index in range(8)
                )
            )
            for index, task in enumerate(done):
                assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
                assert (
                    unescape(task["artifacts"][0]["parts"][0]["text"]).split("\n")[2]
                    == f"hello caller-{index}"
                )
    if revision == STATELESS_REVISION:
        assert peer.connections.open_count == 1
    await peer.aclose()


async def test_a_session_that_saw_an_error_is_not_reused(mcp_peer_2025) -> None:
    agent, peer = bridged(mcp_peer_2025.url, HANDSHAKE_REVISION)
    await agent.start_bridges()
    opened = sessions(mcp_peer_2025)
    async with McpTestClient(agent.asgi()) as mcp:
        with pytest.raises(McpError):  # the peer's error for an unknown item
            await mcp.request("resources/read", {"uri": "catalog://items/NOPE"})
        assert (await mcp.call_tool("echo", {"text": "after"}))["isError"] is False
    assert (
        sessions(mcp_peer_2025) == opened + 1
    )  # the session that failed was closed; the next call opened one
    await peer.aclose()


async def test_a_session_the_peer_forgot_is_replaced_without_running_the_call_twice(mcp_peer_2025) -> None:
    agent, peer = bridged(mcp_peer_2025.url, HANDSHAKE_REVISION)
    await agent.start_bridges()
    ids: list[str] = []

    async def remember(response: Any) -> None:
        if "mcp-session-id" in response.headers:
            ids.append(response.headers["mcp-session-id"])

    async with McpTestClient(agent.asgi()) as mcp:
        peer._http_client().event_hooks["response"].append(remember)
        assert (await mcp.call_tool("echo", {"text": "first"}))["isError"] is False
        # the peer forgets the kept session (as after an expiry or a restart)
        async with httpx.AsyncClient() as http:
            gone = await http.delete(
                mcp_peer_2025.url,
                headers={"mcp-session-id": ids[-1], "mcp-protocol-version": HANDSHAKE_REVISION},
            )
        assert gone.status_code in (200, 204)
        opened, ran = sessions(mcp_peer_2025), side_effects(mcp_peer_2025)
        again = await mcp.call_tool("echo", {"text": "second"})
    assert again["isError"] is False and "second" in unescape(again["content"][0]["text"])
    assert side_effects(mcp_peer_2025) == ran + 1 and sessions(mcp_peer_2025) == opened + 1
    await peer.aclose()


async def test_idle_connections_expire(remote) -> None:
    process, revision = remote
    agent, peer = bridged(process.url, revision, pool_idle_seconds=0.3)
    async with McpTestClient(agent.asgi()) as mcp:
        assert (await mcp.call_tool("echo", {"text": "x"}))["isError"] is False
    assert peer.connections.open_count == 1
    await eventually(lambda: peer.connections.open_count == 0, "the idle connection to expire", timeout=1.0)
    assert peer.connections.open_count == 0  # closed on its own: nothing left running


def test_pool_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="pool_size"):
        McpPeer("http://127.0.0.1:1/mcp", revision=HANDSHAKE_REVISION, pool_size=-1)
