"""A bridged call's remote progress and notifications reach the caller on every face: MCP progress (and log)
notifications, A2A ``WORKING`` status updates, AG-UI progress activities; each remote text framed with its
source, the peer and the skill or tool it came from."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agentmw import Agent
from agentmw.bridges import (
    A2A_VERSION,
    HANDSHAKE_REVISION,
    MCP_REVISIONS,
    STATELESS_REVISION,
    A2APeer,
    Egress,
    McpPeer,
)
from agentmw.safety.framing import unescape
from agentmw.testing import McpTestClient
from tests.bridges.peers.a2a_peer import SLOW_STEPS
from tests.test_agui_wire import frames, run_body

LOOPBACK = Egress(allow_networks=["127.0.0.0/8"])


def legal(url: str) -> Agent:
    agent = Agent("front", store="memory://")
    agent.bridge(
        A2APeer(url, version=A2A_VERSION, name="legal", allow=LOOPBACK, skills=["slow"], wait_seconds=30)
    )
    return agent


def catalog(url: str, revision: str) -> Agent:
    agent = Agent("front", store="memory://")
    agent.bridge(
        McpPeer(url, revision=revision, name="catalog", allow=LOOPBACK, resources=False, prompts=False)
    )
    return agent


async def a2a_updates(agent: Agent, skill: str, part: dict[str, Any]) -> tuple[list[str], str]:
    """The texts of the WORKING status updates of one streamed A2A call, and its final state."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {
            "message": {
                "messageId": f"m-{skill}",
                "role": "ROLE_USER",
                "parts": [part],
                "metadata": {"skill": skill},
            }
        },
    }
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1", timeout=60
    ) as http:
        response = await http.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
    results = [event["result"] for event in frames(response.text)]
    working = [
        r["statusUpdate"]["status"]
        for r in results
        if "statusUpdate" in r
        and r["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
        and "message" in r["statusUpdate"]["status"]
    ]
    last = results[-1].get("statusUpdate", results[-1].get("task", {})).get("status", {}).get("state")
    return [s["message"]["parts"][0]["text"] for s in working], last


async def agui_progress(agent: Agent, skill: str, arguments: dict[str, Any]) -> tuple[list[str], str]:
    """The progress messages of one AG-UI run, and its last event's type."""
    body = run_body(f"t-{skill}", f"r-{skill}", props={"arguments": arguments})
    body["messages"] = []
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1", timeout=60
    ) as http:
        events = frames((await http.post(f"/agui/{skill}", json=body)).text)
    said = [
        e["content"].get("message", "")
        for e in events
        if e["type"] == "ACTIVITY_SNAPSHOT" and e.get("activityType") == "progress"
    ]
    return said, events[-1]["type"]


def source(text: str) -> str:
    return text.split('"')[1]  # <untrusted-data source="..." boundary=...>


async def test_remote_a2a_status_messages_are_progress_on_every_face(a2a_peer) -> None:
    steps = [f"step {k} of {SLOW_STEPS}" for k in range(1, SLOW_STEPS + 1)]
    progress: list[dict] = []
    async with McpTestClient(legal(a2a_peer.url).asgi()) as mcp:
        result = await mcp.request(
            "tools/call",
            {"name": "slow", "arguments": {"text": "go"}, "_meta": {"progressToken": "p"}},
            on_notification=progress.append,
        )
    assert result["isError"] is False
    said = [n["params"]["message"] for n in progress if n.get("method") == "notifications/progress"]
    assert [unescape(s).split("\n")[2] for s in said] == steps
    assert {source(s) for s in said} == {"A2A peer legal skill slow status"}  # the peer and the skill

    updates, state = await a2a_updates(legal(a2a_peer.url), "slow", {"text": "go"})
    assert state == "TASK_STATE_COMPLETED"
    assert [s for s in steps if any(s in unescape(u) for u in updates)] == steps
    assert all(source(u) == "A2A peer legal skill slow status" for u in updates if u.startswith("<untrusted"))

    shown, last = await agui_progress(legal(a2a_peer.url), "slow", {"text": "go"})
    assert last == "RUN_FINISHED"
    assert [s for s in steps if any(s in unescape(m) for m in shown)] == steps
    assert {source(m) for m in shown} == {"A2A peer legal skill slow status"}


@pytest.mark.parametrize("revision", MCP_REVISIONS)
async def test_remote_mcp_progress_and_log_messages_reach_every_face(request, revision: str) -> None:
    peer = request.getfixturevalue(
        {HANDSHAKE_REVISION: "mcp_peer_2025", STATELESS_REVISION: "mcp_peer_2026"}[revision]
    )
    notes: list[dict] = []
    async with McpTestClient(catalog(peer.url, revision).asgi()) as mcp:
        result = await mcp.request(
            "tools/call",
            {
                "name": "progress",
                "arguments": {"steps": 2},
                "_meta": {"progressToken": "p", "io.modelcontextprotocol/logLevel": "info"},
            },
            on_notification=notes.append,
        )
    assert result["isError"] is False
    logs = [n["params"] for n in notes if n.get("method") == "notifications/message"]
    assert [unescape(entry["data"]).split("\n")[2] for entry in logs] == ["starting 2 steps"]
    assert source(logs[0]["data"]) == "MCP peer catalog tool progress log" and logs[0]["level"] == "info"

    # A2A and AG-UI have no log channel: the log message is a progress update there, beside the progress
    updates, state = await a2a_updates(catalog(peer.url, revision), "progress", {"data": {"steps": 2}})
    assert state == "TASK_STATE_COMPLETED", updates
    texts = [unescape(u) for u in updates]
    for expected in ("starting 2 steps", "step 1 of 2", "step 2 of 2"):
        assert sum(expected in t for t in texts) == 1, texts
    assert {source(u) for u in updates} == {
        "MCP peer catalog tool progress log",
        "MCP peer catalog tool progress progress",
    }  # the tool is "progress"

    shown, last = await agui_progress(catalog(peer.url, revision), "progress", {"steps": 2})
    assert last == "RUN_FINISHED"
    assert [unescape(s).split("\n")[2] for s in shown] == ["starting 2 steps", "step 1 of 2", "step 2 of 2"]
