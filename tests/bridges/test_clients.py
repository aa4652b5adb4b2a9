"""Real clients against bridged capabilities, over a real socket: the official ``mcp`` client calling a bridged A2A
skill as a tool, the ``a2a-sdk`` client calling bridged MCP tools as a skill, and the official ``@ag-ui/client``
running a bridged A2A skill whose remote question becomes an interrupt."""

from __future__ import annotations

import uuid

import httpx
import httpx2
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf import struct_pb2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentmw import Agent
from agentmw.bridges import A2A_VERSION, STATELESS_REVISION, A2APeer, Egress, McpPeer
from agentmw.safety.framing import unescape
from tests.bridges.conftest import side_effects
from tests.conftest import serve
from tests.test_agui_client import drive, harness_node

LOOPBACK = Egress(allow_networks=["127.0.0.0/8"])


def legal_agent(url: str) -> Agent:
    agent = Agent("front", store="memory://")
    agent.bridge(
        A2APeer(url, version=A2A_VERSION, name="legal", allow=LOOPBACK, skills=["echo", "ask", "files"])
    )
    return agent


async def test_official_mcp_client_calls_a_bridged_a2a_skill(a2a_peer) -> None:
    agent = legal_agent(a2a_peer.url)
    before = side_effects(a2a_peer)
    with serve(agent.asgi()) as url:
        for mode in ("legacy", "2026-07-28"):
            http = httpx2.AsyncClient(timeout=30)
            async with Client(
                streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, cache=None
            ) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert {"echo", "ask", "files", "legal.await_task"} == set(tools)
                assert "Returns the text it received." in tools["echo"].description
                result = await client.call_tool("echo", {"text": f"via {mode}"})
                assert result.is_error is False
                assert result.content[0].text.startswith('<untrusted-data source="A2A peer legal skill echo"')
                assert f"\nvia {mode}\n" in unescape(result.content[0].text)
    assert side_effects(a2a_peer) == before + 2


async def test_a2a_sdk_client_calls_bridged_mcp_tools_as_a_skill(mcp_peer_2026) -> None:
    agent = Agent("front", store="memory://")
    agent.bridge(
        McpPeer(
            mcp_peer_2026.url,
            revision=STATELESS_REVISION,
            name="catalog",
            allow=LOOPBACK,
            group={"arithmetic": ["add", "echo"]},
        )
    )
    before = side_effects(mcp_peer_2026)
    with serve(agent.asgi()) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            assert "arithmetic" in {s.id for s in card.skills}
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
            data = struct_pb2.Value()
            data.struct_value.update({"a": 20, "b": 22})
            message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(data=data)])
            message.metadata.update({"skill": "arithmetic", "tool": "add"})
            task = [e async for e in client.send_message(SendMessageRequest(message=message))][-1].task
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert task.artifacts[0].parts[0].data.struct_value["sum"] == 42
            # the group skill itself, naming the tool in its data
            data = struct_pb2.Value()
            data.struct_value.update({"tool": "echo", "arguments": {"text": "grouped"}})
            message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(data=data)])
            message.metadata.update({"skill": "arithmetic"})
            task = [e async for e in client.send_message(SendMessageRequest(message=message))][-1].task
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert "grouped" in unescape(task.artifacts[0].parts[0].text)
    assert side_effects(mcp_peer_2026) == before + 2


def test_agui_client_runs_a_bridged_skill_with_an_interrupt(a2a_peer) -> None:
    harness_node()  # skips (fails under CI) without Node and the pinned @ag-ui/client
    agent = legal_agent(a2a_peer.url)
    before = a2a_peer.counter()
    with serve(agent.asgi()) as url:  # drive(): every event checked against the AG-UI models, no warnings
        asked, answered = drive(
            url,
            "ask",
            [
                {"runId": "r-ask", "say": "review the contract"},
                {"runId": "r-answer", "resume": "resolve", "payload": {"answer": "Germany"}},
            ],
            "t-bridge",
        )
    assert "rejected" not in asked and "rejected" not in answered
    outcome = asked["events"][-1]["outcome"]
    assert outcome["type"] == "interrupt"
    [interrupt] = outcome["interrupts"]
    assert "Which jurisdiction?" in unescape(interrupt["message"])
    assert interrupt["message"].startswith('<untrusted-data source="A2A peer legal skill ask"')
    assert answered["events"][-1]["outcome"] == {"type": "success"}
    assert "Reviewed for Germany" in unescape(answered["messages"][-1]["content"])
    after = a2a_peer.counter()
    assert (
        after["count"] == before["count"] + 1 and after["resumes"] == before["resumes"] + 1
    )  # one remote task
