"""A bridge's own overhead: the latency of a bridged call minus the latency of the same call made directly.

Two real peers run in their own ``uvicorn`` processes (the bridge tests' peers: an a2a-sdk 1.3.0 agent and the
official ``mcp`` 2.3.0 server). For each, sequential calls of its ``echo`` are timed two ways:

- **direct**: the client a program would use without agentmw, over a kept-alive connection: A2A ``SendMessage``
  with httpx (JSON-RPC, blocking); MCP ``tools/call`` with one long-lived official ``mcp`` client;
- **bridged**: ``tools/call`` of the bridged ``echo`` on an agentmw agent, driven in-process (no socket between
  the caller and agentmw), so the difference is everything the bridge adds: the MCP face, the pipeline,
  identity and egress, the translation and framing. MCP peers are timed twice: with the connections the bridge
  keeps (the default: one shared client at 2026-07-28, a pool of sessions at 2025-11-25), and with
  ``pool_size=0``, where every call opens a connection of its own (a handshake per call at 2025-11-25).

Run ``python bench/bridge_overhead.py`` (``--calls N``, default 300). Prints a Markdown table of p50 and p99 in
milliseconds and the overhead (bridged minus direct) at each.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

A2A_APP = "tests.bridges.peers.a2a_peer:create_app"
MCP_APP = "tests.bridges.peers.mcp_peer:create_app"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(call: Callable[[], Awaitable[Any]], calls: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        await call()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def a2a_rows(url: str, calls: int) -> tuple[list[float], list[float]]:
    import httpx

    from agentmw import Agent
    from agentmw.bridges import A2A_VERSION, A2APeer, Egress
    from agentmw.testing import McpTestClient

    async with httpx.AsyncClient(timeout=30) as http:
        card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
        endpoint = card["supportedInterfaces"][0]["url"]

        async def direct() -> None:
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": uuid.uuid4().hex,
                        "role": "ROLE_USER",
                        "parts": [{"text": "hello"}],
                        "metadata": {"skill": "echo"},
                    }
                },
            }
            answer = (await http.post(endpoint, json=body, headers={"A2A-Version": "1.0"})).json()
            assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        direct_samples = await timed(direct, calls)
    agent = Agent("bench", store="memory://")
    agent.bridge(
        A2APeer(
            url,
            version=A2A_VERSION,
            name="legal",
            skills=["echo"],
            allow=Egress(allow_networks=["127.0.0.0/8"]),
        )
    )
    async with McpTestClient(agent.asgi()) as mcp:

        async def bridged() -> None:
            assert (await mcp.call_tool("echo", {"text": "hello"}))["isError"] is False

        bridged_samples = await timed(bridged, calls)
    return direct_samples, bridged_samples


async def mcp_rows(url: str, revision: str, calls: int, pool_size: int) -> tuple[list[float], list[float]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from agentmw import Agent
    from agentmw.bridges import Egress, McpPeer
    from agentmw.testing import McpTestClient

    mode = "legacy" if revision == "2025-11-25" else revision
    async with Client(
        streamable_http_client(url, http_client=httpx2.AsyncClient(timeout=30)), mode=mode, cache=None
    ) as client:

        async def direct() -> None:
            assert (await client.call_tool("echo", {"text": "hello"})).is_error is False

        direct_samples = await timed(direct, calls)
    agent = Agent("bench", store="memory://")
    peer = agent.bridge(
        McpPeer(
            url,
            revision=revision,
            name="catalog",
            tools=["echo"],
            skills=False,
            resources=False,
            prompts=False,
            allow=Egress(allow_networks=["127.0.0.0/8"]),
            pool_size=pool_size,
        )
    )
    async with McpTestClient(agent.asgi()) as mcp:

        async def bridged() -> None:
            assert (await mcp.call_tool("echo", {"text": "hello"}))["isError"] is False

        bridged_samples = await timed(bridged, calls)
    await peer.aclose()
    return direct_samples, bridged_samples


def row(name: str, direct: list[float], bridged: list[float]) -> str:
    d50, d99 = percentile(direct, 0.5), percentile(direct, 0.99)
    b50, b99 = percentile(bridged, 0.5), percentile(bridged, 0.99)
    return (
        f"| {name} | {d50:.2f} | {d99:.2f} | {b50:.2f} | {b99:.2f} | **{b50 - d50:.2f}** | **{b99 - d99:.2f}** | "
        f"{statistics.fmean(bridged) - statistics.fmean(direct):.2f} |"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    from tests.bridges.peers.process import start_peer

    with tempfile.TemporaryDirectory() as folder:
        a2a = start_peer(A2A_APP, Path(folder) / "a2a", {"PEER_A2A_VERSION": "1.0"}, name="a2a")
        mcp_peer = start_peer(
            MCP_APP, Path(folder) / "mcp", {"PEER_MCP_REVISION": "both"}, name="mcp", path="/mcp"
        )
        try:
            rows = [row("A2A peer, `echo` (streamed by the bridge)", *await a2a_rows(a2a.url, args.calls))]
            for revision in ("2026-07-28", "2025-11-25"):
                for pool_size, how in ((4, "kept connections"), (0, "a connection per call, `pool_size=0`")):
                    rows.append(
                        row(
                            f"MCP peer {revision}, `echo`, {how}",
                            *await mcp_rows(mcp_peer.url, revision, args.calls, pool_size),
                        )
                    )
        finally:
            a2a.stop()
            mcp_peer.stop()
    print(f"{args.calls} sequential calls each, milliseconds\n")
    print(
        "| peer | direct p50 | direct p99 | bridged p50 | bridged p99 | overhead p50 | overhead p99 | overhead mean |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
