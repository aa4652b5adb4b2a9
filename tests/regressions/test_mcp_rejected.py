"""Issue 24, item 12: a bridged peer's refusal reaches the model as a tool error, not as a JSON-RPC error.

The spec (2025-11-25, server/tools, "Error Handling") reserves protocol errors for unknown tools and malformed
requests, and wants input-validation and business-rule errors reported as ``isError`` results, which clients
hand to the model so it can correct itself; JSON-RPC errors usually stop at the client. So on the MCP face:

- a bridged capability whose peer rejected the call (A2A ``TASK_STATE_REJECTED``), or whose bridge refused to
  send it (``authorize``), answers ``isError: true`` with the bridge's text, the peer's words framed as
  untrusted data, and ``_meta["agentmw/rejected"]`` (nothing ran);
- local arguments that fail the input schema are a tool error too (they always were);
- a local function's own ``Rejected`` stays the protocol's ``-32602``, as the conformance fixture and the task
  tests expect.

Driven with the official ``mcp`` 2.3.0 client in the handshake era against the front agent on a real socket,
bridged to a real A2A peer (a2a-sdk 1.3.0, its own process) and a real MCP peer (``mcp`` 2.3.0's server).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from agentmw import Agent, Rejected
from agentmw.bridges import A2A_VERSION, A2APeer, Egress, McpPeer
from agentmw.safety.framing import unescape
from tests.bridges.conftest import a2a_peer, mcp_peer_2025, side_effects  # noqa: F401  (session fixtures)
from tests.conftest import serve

LOOPBACK = Egress(allow_networks=["127.0.0.0/8"])


def front(a2a_url: str, mcp_url: str) -> Agent:
    agent = Agent("front", store="memory://")
    agent.bridge(A2APeer(a2a_url, version=A2A_VERSION, name="legal", allow=LOOPBACK))
    agent.bridge(
        McpPeer(
            mcp_url,
            revision="2025-11-25",
            name="catalog",
            prefix="catalog.",
            allow=LOOPBACK,
            authorize=lambda identity, what: "echo" not in what,  # the bridge refuses echo: nothing is sent
        )
    )

    @agent.tool
    async def local_refusal(order: str) -> str:
        """Refuses every order (a local Rejected)."""
        raise Rejected(f"order {order} is not accepted here")

    @agent.tool
    async def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    return agent


@asynccontextmanager
async def official(agent: Agent) -> AsyncIterator[Client]:
    with serve(agent.asgi()) as url:
        async with Client(f"{url}/mcp", mode="legacy", cache=None) as client:
            yield client


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_a_remote_rejection_is_a_framed_tool_error(a2a_peer, mcp_peer_2025) -> None:  # noqa: F811
    agent = front(a2a_peer.url, mcp_peer_2025.url)
    before = side_effects(a2a_peer)
    async with official(agent) as client:
        rejected = await client.call_tool("reject", {"text": "please"})
        assert rejected.is_error is True
        text = text_of(rejected)
        assert "rejected the request" in text
        # the peer's own words, inside the frame the bridges put around untrusted text
        framed = text[text.index("<untrusted-data") :]
        assert framed.startswith('<untrusted-data source="A2A peer legal skill reject')
        assert "This agent does not take that request." in unescape(framed)
        assert (rejected.meta or {}).get("agentmw/rejected") is True
        assert side_effects(a2a_peer) == before + 1  # the peer ran the skill once, and refused

        refused = await client.call_tool("catalog.echo", {"text": "hi"})  # the bridge's own refusal
        assert refused.is_error is True and "Nothing was sent" in text_of(refused)
        assert (refused.meta or {}).get("agentmw/rejected") is True
        served = await client.call_tool("catalog.add", {"a": 2, "b": 3})  # the same peer, allowed
        assert served.is_error is False and served.structured_content == {"sum": 5}


async def test_local_validation_is_a_tool_error_and_a_local_rejected_a_protocol_error(
    a2a_peer,  # noqa: F811
    mcp_peer_2025,  # noqa: F811
) -> None:
    agent = front(a2a_peer.url, mcp_peer_2025.url)
    async with official(agent) as client:
        invalid = await client.call_tool("add", {"a": "three", "b": 1})
        assert invalid.is_error is True and text_of(invalid).startswith("Invalid arguments: a:")
        assert not (invalid.meta or {}).get("agentmw/rejected")
        with pytest.raises(MCPError) as local:
            await client.call_tool("local_refusal", {"order": "o-1"})
        assert local.value.error.code == -32602
        assert local.value.error.message == "order o-1 is not accepted here"
