"""Real peers for the bridge tests, each in its own ``uvicorn`` process on a free loopback port.

The fixture contract (the bridge tests are written against exactly this):

- ``a2a_peer``: an A2A 1.0 agent on a2a-sdk 1.3.0's server classes (tests/bridges/peers/a2a_peer.py says how it
  picks a skill and what each skill does). ``.url`` is its base URL; its card is at
  ``{url}/.well-known/agent-card.json``; ``{url}/_test/counter`` counts skill executions and
  ``peer.cut_next_stream()`` (``POST {url}/_test/cut``) cuts the next streaming response after two events
  (``cut_next_stream(times=2)``: the next two).
- ``a2a_peer_wrong_version``: the same agent, whose card offers only ``protocolVersion`` ``0.2``.
- ``mcp_peer_2025`` and ``mcp_peer_2026``: the official ``mcp`` 2.3.0 server pinned to one revision each
  (tests/bridges/peers/mcp_peer.py); ``.url`` is the streamable-HTTP endpoint, ending ``/mcp``.
- ``mcp_peer_wrong_version``: the same server pinned to ``2024-11-05``.
- ``mcp_peers_10``: ten distinct MCP servers (each its own ``MCPServer``, sessions and counter) mounted in one
  process at ``/p0/mcp`` … ``/p9/mcp``.
- ``legal_review_peer`` and ``supplier_catalog_peer``: the example peers (examples/legal_review, an A2A agent,
  and examples/supplier_catalog, an MCP server at ``.url`` ending ``/mcp``), as they ship; they have no counter.
- ``side_effects(peer) -> int``: the peer's counter now; a test compares two readings, so the peers can be
  shared by the whole session.

The peers are session-scoped: started on first use, stopped (SIGTERM, then SIGKILL) at the end. Their logs are
in pytest's temporary folder (``peer.logs()``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.bridges.peers.process import PeerProcess, start_peer
from tests.helpers.a2a_raw import send_message

A2A_APP = "tests.bridges.peers.a2a_peer:create_app"
MCP_APP = "tests.bridges.peers.mcp_peer:create_app"
LEGAL_REVIEW_APP = "examples.legal_review.agent:create_app"
SUPPLIER_CATALOG_APP = "examples.supplier_catalog.server:create_app"
PEERS_10 = 10


async def ask_and_answer(http: Any, skill: str, key: str, name: str) -> dict[str, Any]:
    """Over the A2A face of an agent (``http``, an httpx client on it): run the bridged ``skill`` (the MCP peer's
    ``ask_user``), check that it asks the peer's question, answer it with ``name``; the task as it ends."""
    from agentmw.safety.framing import unescape

    send = send_message([{"data": {}}], message_id=f"ask-{key}", metadata={"skill": skill})
    task = (await http.post("/a2a", json=send, headers={"A2A-Version": "1.0"})).json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    assert "What is your name?" in unescape(task["status"]["message"]["parts"][0]["text"])
    answer = send_message(
        [{"data": {"name": name}}], message_id=f"answer-{key}", request_id=2, taskId=task["id"]
    )
    return (await http.post("/a2a", json=answer, headers={"A2A-Version": "1.0"})).json()["result"]["task"]


def side_effects(peer: PeerProcess) -> int:
    """How many side-effecting executions ``peer`` has started so far (its ``/_test/counter``)."""
    return peer.counter()["count"]


def _peer(
    tmp_path_factory: pytest.TempPathFactory,
    app: str,
    name: str,
    env: dict[str, str],
    path: str = "",
    url_env: str = "PEER_BASE_URL",
) -> Iterator[PeerProcess]:
    peer = start_peer(app, tmp_path_factory.mktemp(name), env, name=name, path=path, url_env=url_env)
    try:
        yield peer
    finally:
        peer.stop()


@pytest.fixture(scope="session")
def a2a_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    yield from _peer(tmp_path_factory, A2A_APP, "a2a-peer", {"PEER_A2A_VERSION": "1.0"})


@pytest.fixture(scope="session")
def a2a_peer_wrong_version(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    yield from _peer(tmp_path_factory, A2A_APP, "a2a-peer-0.2", {"PEER_A2A_VERSION": "0.2"})


@pytest.fixture(scope="session")
def mcp_peer_2025(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    yield from _peer(tmp_path_factory, MCP_APP, "mcp-peer-2025", {"PEER_MCP_REVISION": "2025-11-25"}, "/mcp")


@pytest.fixture(scope="session")
def mcp_peer_2026(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    yield from _peer(tmp_path_factory, MCP_APP, "mcp-peer-2026", {"PEER_MCP_REVISION": "2026-07-28"}, "/mcp")


@pytest.fixture(scope="session")
def mcp_peer_wrong_version(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    yield from _peer(tmp_path_factory, MCP_APP, "mcp-peer-2024", {"PEER_MCP_REVISION": "2024-11-05"}, "/mcp")


@pytest.fixture(scope="session")
def mcp_peers_10(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[PeerProcess]]:
    """Ten MCP servers in one process (one process starts in a second; ten would cost CI ten): each mount is
    its own ``MCPServer`` with its own session manager, subscription bus and counter, so nothing is shared
    but the port. All ten serve 2025-11-25 and 2026-07-28 (the official server's default)."""
    env = {"PEER_MCP_REVISION": "both", "PEER_MCP_MOUNTS": str(PEERS_10)}
    for host in _peer(tmp_path_factory, MCP_APP, "mcp-peers-10", env):
        yield [
            PeerProcess(
                url=f"{host.base}/p{index}/mcp",
                base=f"{host.base}/p{index}",
                process=host.process,
                log=host.log,
                name=f"{host.name}[{index}]",
            )
            for index in range(PEERS_10)
        ]


@pytest.fixture(scope="session")
def legal_review_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    yield from _peer(tmp_path_factory, LEGAL_REVIEW_APP, "legal-review", {}, url_env="LEGAL_REVIEW_URL")


@pytest.fixture(scope="session")
def supplier_catalog_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    yield from _peer(tmp_path_factory, SUPPLIER_CATALOG_APP, "supplier-catalog", {}, "/mcp")
