"""A bridged MCP server's app-only tools (MCP Apps visibility without ``"model"``) are not served by agentmw: they
are the buttons of the peer's own card, which agentmw does not render, and its callers' models must not press
them. The peer is the official SDK's ``MCPServer`` with its ``Apps`` extension, in its own process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentmw import Agent
from agentmw.bridges import McpPeer
from agentmw.egress import Egress
from tests.conftest import free_port


@pytest.fixture(scope="module")
def apps_peer() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("apps_peer.py")), str(port)])
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("the SDK peer did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
async def test_a_peers_app_only_tool_is_not_served(apps_peer: str, revision: str) -> None:
    agent = Agent("front", store="memory://")
    agent.bridge(McpPeer(apps_peer, revision=revision, name="shop", allow=Egress(allow_private=True)))
    await agent.start_bridges()
    names = set(agent.tools)
    assert any(name.endswith("show_card") for name in names), names  # the model's tool is bridged
    assert not any(name.endswith("buy_now") for name in names), names
    await agent.aclose()
