"""The example app bridges the two example peers (examples/legal_review, an A2A agent; examples/supplier_catalog, an
MCP server), each running in its own process, when ``LEGAL_REVIEW_URL`` and ``SUPPLIER_CATALOG_URL`` name them. A
bridged capability is called through MCP (the official ``mcp`` client) and A2A (the ``a2a-sdk`` client). A peer
that is down never breaks the app's own capabilities or pages."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import httpx2
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState
from google.protobuf import struct_pb2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentmw.safety.framing import unescape
from tests.bridges.conftest import legal_review_peer, supplier_catalog_peer  # noqa: F401  (fixtures: the peers)
from tests.bridges.peers.process import PeerProcess
from tests.conftest import free_port
from tests.example_process import example_process

DEMO = {"authorization": "Bearer demo-token"}


def mcp_client(url: str, mode: str = "2026-07-28") -> Client:
    http = httpx2.AsyncClient(headers=DEMO, timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, cache=None)


def text(words: str, task_id: str = "", **metadata: str) -> Message:
    message = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=words)], task_id=task_id
    )
    if metadata:
        message.metadata.update(metadata)
    return message


async def test_the_example_serves_both_peers_over_mcp_and_a2a(
    legal_review_peer: PeerProcess,  # noqa: F811
    supplier_catalog_peer: PeerProcess,  # noqa: F811
    tmp_path,
) -> None:
    env = {"LEGAL_REVIEW_URL": legal_review_peer.url, "SUPPLIER_CATALOG_URL": supplier_catalog_peer.url}
    with example_process(tmp_path / "example", env) as url:
        # --- MCP: the supplier's tool, and the legal review's question answered on the same remote task
        async with mcp_client(url) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {
                "review_purchase",
                "legal.await_task",
                "search_supplier_items",
                "get_supplier_item",
                "search_assets",
                "submit_purchase_request",
            } <= tools
            found = await client.call_tool("search_supplier_items", {"query": "monitor"})
            assert found.is_error is False
            assert [i["sku"] for i in found.structured_content["items"]] == ["MON-27"]
            missing = await client.call_tool("get_supplier_item", {"sku": "NOPE-1"})
            assert missing.is_error is True  # the peer's isError stays a failure
            terms = await client.read_resource("supplier://terms")
            assert "Volume discount" in unescape(terms.contents[0].text)
            asked = await client.call_tool("review_purchase", {"text": "20 company phones, total 15980"})
            assert asked.is_error is False  # a question, not an error
            handle = next(json.loads(c.text) for c in asked.content if c.text.startswith("{"))
            assert handle["status"] == "input-required"
            assert "Which jurisdiction governs this purchase?" in unescape(
                " ".join(c.text for c in asked.content)
            )
            done = await client.call_tool(
                "legal.await_task", {"task_id": handle["taskId"], "answer": "Germany"}
            )
            assert done.is_error is False
            review = unescape(" ".join(c.text for c in done.content))
            assert "2 issue(s) under European Union rules" in review and "GDPR" in review
        # --- A2A: the legal review skill (asks, then answers) and the supplier's tools grouped as one skill
        async with httpx.AsyncClient(timeout=60, headers=DEMO) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            assert {"review_purchase", "supplier_catalog", "procurement_assistant"} <= {
                s.id for s in card.skills
            }
            a2a = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)

            async def send(message: Message):
                return [e async for e in a2a.send_message(SendMessageRequest(message=message))][-1].task

            asked = await send(
                text("A SaaS subscription for customer data, total 4000", skill="review_purchase")
            )
            assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert "Which jurisdiction" in unescape(asked.status.message.parts[0].text)
            done = await send(text("UK", task_id=asked.id))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED, done
            parts = [p for a in done.artifacts for p in a.parts]
            assert any("United Kingdom" in unescape(p.text) for p in parts if p.text)
            data = struct_pb2.Value()
            data.struct_value.update({"tool": "get_supplier_item", "arguments": {"sku": "LPT-14"}})
            item = await send(_data_message(data, "supplier_catalog"))
            assert item.status.state == TaskState.TASK_STATE_COMPLETED, item
            [part] = item.artifacts[0].parts  # the peer's structured result stays data: a data part
            assert part.WhichOneof("content") == "data" and not part.text
            assert part.data.struct_value["supplier"] == "Northwind Devices"


def _data_message(data: struct_pb2.Value, skill: str) -> Message:
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(data=data)])
    message.metadata.update({"skill": skill})
    return message


async def test_a_dead_peer_never_breaks_the_apps_own_capabilities_or_pages(tmp_path) -> None:
    dead = {
        "LEGAL_REVIEW_URL": f"http://127.0.0.1:{free_port()}",  # nothing listens on either
        "SUPPLIER_CATALOG_URL": f"http://127.0.0.1:{free_port()}/mcp",
    }
    with example_process(tmp_path / "example", dead) as url:
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            assert (await http.get("/")).status_code == 200
            assert (await http.get("/health")).json() == {"status": "ok"}
            card = (await http.get("/.well-known/agent-card.json")).json()
            assert "review_purchase" not in {s["id"] for s in card["skills"]}
            assert "procurement_assistant" in {s["id"] for s in card["skills"]}
        async with mcp_client(url) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "search_assets" in tools and "review_purchase" not in tools
            found = await client.call_tool("search_assets", {"query": "laptop"})
            assert found.is_error is False and len(found.structured_content["result"]) == 2
        assert time.monotonic() - started < 15  # no request waited on a peer's timeout
