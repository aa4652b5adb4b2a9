"""A bridged call continues the caller's trace into the peer: MCP (``_meta`` and ``traceparent``) and A2A.

The peer is a real agentmw agent with telemetry in its own uvicorn process (tests/observability/peer.py); it
writes its spans to a file, so the test sees both sides of the call in one trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

from agentmw import Agent
from agentmw.bridges import A2A_VERSION, STATELESS_REVISION, A2APeer, Egress, McpPeer
from agentmw.testing import McpTestClient
from tests.bridges.peers.process import PeerProcess, start_peer
from tests.observability.app import Kit
from tests.waiting import eventually

LOOPBACK = Egress(allow_networks=["127.0.0.0/8"])
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


@pytest.fixture(scope="module")
def traced_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PeerProcess, Path]]:
    folder = tmp_path_factory.mktemp("traced-peer")
    spans = folder / "spans.jsonl"
    peer = start_peer(
        "tests.observability.peer:create_app", folder, {"OBS_SPANS_FILE": str(spans)}, name="traced-peer"
    )
    try:
        yield peer, spans
    finally:
        peer.stop()


def peer_spans(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("protocol", ["mcp", "a2a"])
async def test_a_bridged_call_is_one_trace_across_both_processes(traced_peer, protocol: str) -> None:
    peer, spans_file = traced_peer
    kit = Kit()
    agent = Agent("front", store="memory://", telemetry=kit.telemetry)
    bridged: McpPeer | A2APeer
    if protocol == "mcp":
        bridged = McpPeer(f"{peer.url}/mcp", revision=STATELESS_REVISION, name="peer", allow=LOOPBACK)
        tool, arguments, remote = "shout", {"text": "hi"}, "execute_tool shout"
    else:
        bridged = A2APeer(peer.url, version=A2A_VERSION, name="peer", allow=LOOPBACK)
        tool, arguments, remote = "review", {"text": "nda"}, "invoke_agent review"
    agent.bridge(bridged)
    await agent.start_bridges()
    before = len(peer_spans(spans_file))
    async with McpTestClient(agent.asgi()) as client:
        result = await client.request(
            "tools/call", {"name": tool, "arguments": arguments, "_meta": {"traceparent": TRACEPARENT}}
        )
    assert result["isError"] is False, result
    local = kit.one(f"execute_tool {tool}")  # the bridged capability's invocation, here
    kit.one(f"tools/call {tool}")  # and the request that ran it (it ends just after its response is sent)
    assert format(local.context.trace_id, "032x") == TRACE and local.kind is SpanKind.INTERNAL

    def both_ended() -> bool:  # the peer's invocation, and its request span (which ends after the response)
        spans = peer_spans(spans_file)[before:]
        parents = {s["parent_id"] for s in spans if s["name"] == remote}
        return bool(parents) and parents <= {s["span_id"] for s in spans}

    await eventually(both_ended, "the peer's spans", timeout=10)
    theirs = peer_spans(spans_file)[before:]
    assert {s["trace_id"] for s in theirs} == {TRACE}  # one trace, across both processes
    ids = {s["span_id"]: s for s in theirs}
    [invocation] = [s for s in theirs if s["name"] == remote]
    server = ids[invocation["parent_id"]]  # the peer's request span runs its invocation
    assert server["kind"] == "SERVER" and server["name"] in (
        {"tools/call shout"} if protocol == "mcp" else {"SendMessage", "SendStreamingMessage"}
    )
    # the peer's server span hangs off a span of ours: our invocation, or the MCP SDK's client span under it
    ours = {format(s.context.span_id, "016x"): s for s in kit.finished()}
    parent = ours.get(server["parent_id"])
    assert server["parent_id"] not in ids and parent is not None, (server, list(ours))
    while parent.context.span_id != local.context.span_id:
        assert parent.parent is not None
        parent = ours[format(parent.parent.span_id, "016x")]
    # the breaker gauge: closed after the call; open once the peer failed too often (0 closed, 2 open)
    assert await breaker_states(kit) == {("peer", protocol): 0.0}
    for _ in range(bridged.breaker.min_calls):
        bridged.breaker.record(False)
    assert bridged.breaker.state == "open" and await breaker_states(kit) == {("peer", protocol): 2.0}


async def breaker_states(kit: Kit) -> dict[tuple[str, str], float]:
    """The breaker gauge as the Prometheus text (parsed by prometheus_client) and OpenTelemetry both report it;
    they must agree."""
    text = (await kit.telemetry.registry.exposition()).decode()
    shown = {
        (sample.labels["peer"], sample.labels["protocol"]): sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "agentmw_bridge_breaker_state"
        for sample in family.samples
    }
    otel = {
        (point.attributes["agentmw.bridge.peer"], point.attributes["agentmw.bridge.protocol"]): point.value
        for point in kit.metric("agentmw.bridge.breaker.state")
    }
    assert shown == otel, (shown, otel)
    return shown
