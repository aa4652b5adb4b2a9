"""A remote MCP server (the official ``mcp`` 2.3.0 server, its own process) bridged into an agent, in both
revisions: its tools, resource and prompt become capabilities, served here over MCP and A2A."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentmw import Agent
from agentmw.bridges import HANDSHAKE_REVISION, MCP_REVISIONS, STATELESS_REVISION, Egress, McpPeer
from agentmw.safety.framing import unescape
from agentmw.testing import McpError, McpTestClient
from tests.bridges.conftest import side_effects
from tests.helpers.a2a_raw import send_message

LOOPBACK = Egress(allow_networks=["127.0.0.0/8"])


def bridged(url: str, revision: str, **options: Any) -> Agent:
    agent = Agent("front", store="memory://")
    agent.bridge(McpPeer(url, revision=revision, name="catalog", allow=LOOPBACK, **options))
    return agent


def text_of(result: dict) -> str:
    return "".join(block.get("text", "") for block in result["content"] if block["type"] == "text")


@pytest.fixture(params=MCP_REVISIONS)
def peer(request: pytest.FixtureRequest) -> tuple[Any, str]:
    fixture = {HANDSHAKE_REVISION: "mcp_peer_2025", STATELESS_REVISION: "mcp_peer_2026"}[request.param]
    return request.getfixturevalue(fixture), request.param


def test_the_revisions_are_constants() -> None:
    assert MCP_REVISIONS == ("2025-11-25", "2026-07-28")
    with pytest.raises(ValueError, match="pins one of"):
        McpPeer("http://127.0.0.1:1/mcp", revision="latest")


async def test_tools_resources_and_prompts_become_capabilities(peer) -> None:
    process, revision = peer
    agent = bridged(process.url, revision)
    await agent.start_bridges()
    assert {"echo", "add", "boom", "progress", "ask_user", "inject"} <= set(agent.tools)
    assert {"echo", "add", "boom", "progress", "ask_user", "inject"} <= set(
        agent.skills
    )  # served as skills too
    assert "catalog://items" in agent.resources and "summarize" in agent.prompts
    assert "catalog://items/{sku}" in agent.templates  # a remote template is a local template
    assert agent.tools["add"].output_schema["properties"]["sum"]["type"] == "integer"


async def test_calls_map_results_errors_and_progress(peer) -> None:
    process, revision = peer
    agent = bridged(process.url, revision)
    before = side_effects(process)
    progress: list[dict] = []
    async with McpTestClient(agent.asgi()) as mcp:
        added = await mcp.call_tool("add", {"a": 2, "b": 40})
        echoed = await mcp.call_tool("echo", {"text": "hello"})
        boom = await mcp.call_tool("boom", {})
        steps = await mcp.request(
            "tools/call",
            {"name": "progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "p1"}},
            on_notification=progress.append,
        )
        read = await mcp.request("resources/read", {"uri": "catalog://items"})
        prompt = await mcp.request("prompts/get", {"name": "summarize", "arguments": {"topic": "laptops"}})
    assert added["isError"] is False and added["structuredContent"] == {
        "sum": 42
    }  # structured data stays data
    assert echoed["isError"] is False and unescape(text_of(echoed)).count("hello") == 1
    assert text_of(echoed).startswith('<untrusted-data source="MCP peer catalog tool echo"')
    assert boom["isError"] is True and "remote failure" in text_of(
        boom
    )  # isError is a failure, never a result
    assert steps["isError"] is False
    messages = [
        n["params"].get("message", "") for n in progress if n.get("method") == "notifications/progress"
    ]
    assert [m.count("step") for m in messages] == [1, 1, 1]
    assert [unescape(m).split("\n")[2] for m in messages] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    items = json.loads(read["contents"][0]["text"])  # JSON resources stay JSON: not framed
    assert [item["sku"] for item in items] == ["LPT-14", "MON-27", "ACC-DOCK"]
    assert "Summarize laptops in three sentences." in unescape(prompt["messages"][0]["content"]["text"])
    assert side_effects(process) == before + 4  # add, echo, boom, progress: each ran once


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_elicitation_is_relayed_to_the_official_client(peer, mode: str) -> None:
    """The peer's question (elicitation at 2025-11-25, input_required at 2026-07-28) reaches the caller (the
    official ``mcp`` client, in either era, over a real socket) and its answer reaches the peer."""
    import httpx2
    import mcp_types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.conftest import serve

    process, revision = peer
    agent = bridged(process.url, revision)
    asked: list[str] = []

    async def answer(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})

    with serve(agent.asgi()) as url:
        http = httpx2.AsyncClient(timeout=30)
        async with Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            mode=mode,
            cache=None,
            elicitation_callback=answer,
        ) as client:
            result = await client.call_tool("ask_user", {})
    assert result.is_error is False, result.content
    assert "hello Ada" in unescape(result.content[0].text)
    assert asked and "What is your name?" in unescape(asked[-1])


async def test_a_question_the_caller_cannot_answer_is_needs_input(mcp_peer_2025) -> None:
    agent = bridged(mcp_peer_2025.url, HANDSHAKE_REVISION)
    async with McpTestClient(agent.asgi()) as mcp:  # declares no elicitation
        result = await mcp.call_tool("ask_user", {})
    assert result["isError"] is True and "What is your name?" in unescape(text_of(result))


async def test_grouped_tools_are_one_skill_over_a2a(mcp_peer_2026) -> None:
    agent = bridged(mcp_peer_2026.url, STATELESS_REVISION, group={"arithmetic": ["add", "echo"]})
    await agent.start_bridges()
    assert "arithmetic" in agent.skills and "add" not in agent.skills and "add" in agent.tools
    assert agent.skills["arithmetic"].groups == ("add", "echo")
    import httpx

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1"
    ) as http:
        card = (await http.get("/.well-known/agent-card.json")).json()
        assert "arithmetic" in {s["id"] for s in card["skills"]}
        body = send_message(
            [{"data": {"a": 1, "b": 2}}], message_id="m1", metadata={"skill": "arithmetic", "tool": "add"}
        )
        answer = (await http.post("/a2a", json=body, headers={"A2A-Version": "1.0"})).json()
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["data"] == {"sum": 3}


async def test_resource_templates_are_bridged(peer) -> None:
    process, revision = peer
    agent = bridged(process.url, revision)
    async with McpTestClient(agent.asgi()) as mcp:
        listed = (await mcp.request("resources/templates/list"))["resourceTemplates"]
        [template] = [t for t in listed if t["uriTemplate"] == "catalog://items/{sku}"]
        assert template["mimeType"] == "application/json"
        assert "One item on offer, by its sku." in unescape(template["description"])
        assert template["description"].startswith(
            '<untrusted-data source="MCP peer catalog resource template item"'
        )
        read = await mcp.request("resources/read", {"uri": "catalog://items/MON-27"})
        with pytest.raises(McpError):  # the peer's own error for an item it does not have
            await mcp.request("resources/read", {"uri": "catalog://items/NOPE"})
    [content] = read["contents"]
    assert content["uri"] == "catalog://items/MON-27" and content["mimeType"] == "application/json"
    assert json.loads(content["text"]) == {"sku": "MON-27", "name": "27-inch monitor", "price": 449.0}


async def test_a_grouped_tool_answers_data_as_data(mcp_peer_2026) -> None:
    """The group skill itself (the tool named in its data) answers the peer's structured content as an A2A data
    part, not as framed JSON text; text stays framed."""
    agent = bridged(mcp_peer_2026.url, STATELESS_REVISION, group={"arithmetic": ["add", "echo"]})
    import httpx

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1"
    ) as http:

        async def send(data: dict) -> dict:
            body = send_message(
                [{"data": data}], message_id=f"m-{data['tool']}", metadata={"skill": "arithmetic"}
            )
            return (await http.post("/a2a", json=body, headers={"A2A-Version": "1.0"})).json()["result"][
                "task"
            ]

        added = await send({"tool": "add", "arguments": {"a": 5, "b": 6}})
        echoed = await send({"tool": "echo", "arguments": {"text": "grouped"}})
    assert added["status"]["state"] == "TASK_STATE_COMPLETED"
    assert added["artifacts"][0]["parts"] == [{"data": {"sum": 11}, "mediaType": "application/json"}]
    [part] = echoed["artifacts"][0]["parts"]
    assert part["text"].startswith('<untrusted-data source="MCP peer catalog tool echo"')
