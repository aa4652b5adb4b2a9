"""An MCP peer whose connection fails mid-call, bridged into an agent (issue 24, items 8, 9, 11, 13).

The peer is the official ``mcp`` 2.3.0 server in its own process (tests/bridges/peers/mcp_peer.py, with the
tools these tests follow); between the bridge and it runs a real HTTP proxy on its own socket
(tests/bridges/cutting_proxy.py) that cuts a response stream after its first events, the way a network drops a
connection, or is not there at all (a dead peer). The peer itself says what ran (``/_test/calls``: each run's
request id, each cancellation). What the agent's callers see is read on its MCP face.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentmw import Agent
from agentmw.bridges import HANDSHAKE_REVISION, STATELESS_REVISION, Breaker, Egress, McpPeer
from agentmw.safety.framing import unescape
from agentmw.testing import McpTestClient
from tests.bridges.conftest import MCP_APP, _peer
from tests.bridges.cutting_proxy import CuttingProxy
from tests.bridges.peers.process import PeerProcess
from tests.conftest import serve
from tests.helpers.servers import free_port, serving
from tests.test_agui_wire import run_body
from tests.waiting import eventually

LOOPBACK = Egress(allow_networks=["127.0.0.0/8"])
PERMANENT = "repeating the same call will not help"


@pytest.fixture(scope="module")
def peer_2026(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    env = {"PEER_MCP_REVISION": STATELESS_REVISION, "PEER_MCP_CALLS": "1"}
    yield from _peer(tmp_path_factory, MCP_APP, "mcp-cuts-2026", env, "/mcp")


@pytest.fixture(scope="module")
def peer_2025(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    env = {"PEER_MCP_REVISION": HANDSHAKE_REVISION, "PEER_MCP_CALLS": "1"}
    yield from _peer(tmp_path_factory, MCP_APP, "mcp-cuts-2025", env, "/mcp")


@pytest.fixture(scope="module")
def resumable_2025(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerProcess]:
    """The 2025-11-25 peer whose event streams carry ids and can be resumed (``Last-Event-ID``)."""
    env = {"PEER_MCP_REVISION": HANDSHAKE_REVISION, "PEER_MCP_CALLS": "1", "PEER_MCP_EVENTS": "1"}
    yield from _peer(tmp_path_factory, MCP_APP, "mcp-cuts-2025-resumable", env, "/mcp")


@contextlib.contextmanager
def proxied(peer: PeerProcess, *, after: int = 2, cuts: int = 0) -> Iterator[tuple[CuttingProxy, str]]:
    """The cutting proxy in front of ``peer``, armed to cut ``cuts`` tool calls; yields it and the peer's MCP
    URL through it."""
    proxy = CuttingProxy(peer.base, after=after)
    proxy.arm(cuts)
    with serving(proxy) as (base, _):
        yield proxy, f"{base}/mcp"


def calls(peer: PeerProcess) -> dict[str, Any]:
    return httpx.get(f"{peer.base}/_test/calls", timeout=10).json()


def runs_of(peer: PeerProcess, tool: str) -> list[str]:
    return [request_id for name, request_id in calls(peer)["runs"] if name == tool]


_OPENED: list[McpPeer] = []


async def close_peers() -> None:
    """Close the bridges' kept connections and HTTP clients (a proxy with a session's GET stream still open
    through it would wait for it as it stops)."""
    while _OPENED:
        await _OPENED.pop().aclose()


@pytest.fixture(autouse=True)
async def _close_peers() -> Any:
    yield
    await close_peers()


def bridged(url: str, revision: str, **options: Any) -> Agent:
    agent = Agent("front", store="memory://")
    peer = McpPeer(url, revision=revision, name="remote", allow=LOOPBACK, **options)
    _OPENED.append(peer)
    agent.bridge(peer)
    return agent


def text_of(result: dict[str, Any]) -> str:
    return unescape("".join(b.get("text", "") for b in result["content"] if b["type"] == "text"))


async def call_with_progress(
    mcp: McpTestClient, tool: str, arguments: dict[str, Any]
) -> tuple[dict[str, Any], list[float]]:
    seen: list[dict[str, Any]] = []
    result = await mcp.request(
        "tools/call",
        {"name": tool, "arguments": arguments, "_meta": {"progressToken": "t"}},
        on_notification=seen.append,
    )
    ticks = [n["params"]["progress"] for n in seen if n.get("method") == "notifications/progress"]
    return result, ticks


async def test_a_cut_read_only_call_is_reissued_with_a_fresh_id(peer_2026: PeerProcess) -> None:
    with proxied(peer_2026, cuts=1) as (proxy, url):
        agent = bridged(url, STATELESS_REVISION, retries=1)
        before = runs_of(peer_2026, "lookup")
        async with McpTestClient(agent.asgi()) as mcp:
            result, ticks = await call_with_progress(mcp, "lookup", {"key": "sku-1", "steps": 4})
        assert proxy.cut == 1  # the stream really was cut
        assert result["isError"] is False and "found sku-1" in text_of(result)
        ran = runs_of(peer_2026, "lookup")[len(before) :]
        assert len(ran) == 2 and len(set(ran)) == 2  # run twice, under two request ids
        # the first run's ticks 1 and 2, then the re-issued run's ticks after them: each once, in order
        assert ticks == [1, 2, 3, 4]


async def test_a_cut_side_effecting_call_may_have_run_and_is_not_repeated(peer_2026: PeerProcess) -> None:
    with proxied(peer_2026, cuts=1) as (proxy, url):
        agent = bridged(url, STATELESS_REVISION, retries=1)
        before = runs_of(peer_2026, "charge")
        async with McpTestClient(agent.asgi()) as mcp:
            result = await mcp.call_tool("charge", {"amount": 5, "steps": 4})
            assert proxy.cut == 1
            assert result["isError"] is True
            assert "may have run" in text_of(result) and "not repeated" in text_of(result)
            assert result["_meta"]["agentmw/retryable"] is True  # a transport failure, not the peer's verdict
            assert PERMANENT not in text_of(result)
            assert (
                runs_of(peer_2026, "charge")[len(before) :]
                and len(runs_of(peer_2026, "charge")) == len(before) + 1
            )
            # the next call goes through the same bridge: the cut connection was not kept
            again = await mcp.call_tool("charge", {"amount": 6, "steps": 1})
        assert again["isError"] is False and "charged 6" in text_of(again)


async def test_without_retries_a_cut_read_only_call_is_retryable_not_permanent(
    peer_2026: PeerProcess,
) -> None:
    with proxied(peer_2026, cuts=1) as (proxy, url):
        agent = bridged(url, STATELESS_REVISION)
        before = runs_of(peer_2026, "lookup")
        async with McpTestClient(agent.asgi()) as mcp:
            result = await mcp.call_tool("lookup", {"key": "k", "steps": 4})
        assert proxy.cut == 1 and result["isError"] is True
        assert "was cut" in text_of(result) and PERMANENT not in text_of(result)
        assert "Retry after" in text_of(result)
        assert len(runs_of(peer_2026, "lookup")) == len(before) + 1


async def test_the_peers_own_minus_32000_is_its_answer_not_a_cut(peer_2026: PeerProcess) -> None:
    # the same code and words as the client's own error for a cut, sent by the peer: told apart by who made it
    agent = bridged(peer_2026.url, STATELESS_REVISION, retries=2)
    before = runs_of(peer_2026, "refuse")
    async with McpTestClient(agent.asgi()) as mcp:
        result = await mcp.call_tool("refuse", {})
    assert result["isError"] is True and "failed (-32000)" in text_of(result)
    assert "may have run" not in text_of(result) and "was cut" not in text_of(result)
    assert len(runs_of(peer_2026, "refuse")) == len(before) + 1  # an answer: not sent again


async def test_a_dead_peer_is_retryable_opens_the_breaker_and_closes_it_when_back(
    peer_2026: PeerProcess,
) -> None:
    now = [0.0]
    breaker = Breaker(min_calls=3, failure_rate=0.6, open_seconds=30, clock=lambda: now[0])
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    agent = bridged(url, STATELESS_REVISION, breaker=breaker)
    async with McpTestClient(agent.asgi()) as mcp:
        with serving(CuttingProxy(peer_2026.base), port=port):
            up = await mcp.call_tool("echo", {"text": "up"})
            assert up["isError"] is False
        # the proxy is gone: nothing listens on the peer's port any more
        for _ in range(2):
            down = await mcp.call_tool("echo", {"text": "down"})
            assert down["isError"] is True and PERMANENT not in text_of(down)
            assert "could not be reached" in text_of(down)
        assert breaker.state == "open"
        refused = await mcp.call_tool("echo", {"text": "still down"})
        assert refused["isError"] is True and PERMANENT not in text_of(refused)
        with serving(CuttingProxy(peer_2026.base), port=port):
            now[0] += 31  # the breaker lets one trial call through
            back = await mcp.call_tool("echo", {"text": "back"})
            assert back["isError"] is False and "back" in text_of(back)
            assert breaker.state == "closed"


async def test_handshake_era_repeated_cuts_show_each_tick_once_in_order(peer_2025: PeerProcess) -> None:
    with proxied(peer_2025, cuts=2) as (proxy, url):
        agent = bridged(url, HANDSHAKE_REVISION, retries=2)
        before = runs_of(peer_2025, "lookup")
        async with McpTestClient(agent.asgi()) as mcp:
            result, ticks = await call_with_progress(mcp, "lookup", {"key": "k", "steps": 4})
        await close_peers()
        assert proxy.cut == 2
        assert result["isError"] is False and "found k" in text_of(result)
        # run three times, each on a session of its own (request ids count per session in this era)
        assert len(runs_of(peer_2025, "lookup")[len(before) :]) == 3
        assert ticks == [1, 2, 3, 4]


CANCEL_BOUND = 5.0  # seconds: the bridge waits at most 2 s for the cancellation to go out


@pytest.fixture(params=[HANDSHAKE_REVISION, STATELESS_REVISION])
def held(
    request: pytest.FixtureRequest, peer_2025: PeerProcess, peer_2026: PeerProcess
) -> tuple[Agent, PeerProcess]:
    """An agent bridging the peer's ``hold`` tool, at each revision; and the peer."""
    peer = peer_2025 if request.param == HANDSHAKE_REVISION else peer_2026
    return bridged(peer.url, request.param, tools=["hold"]), peer


async def started_hold(peer: PeerProcess, before: list[str]) -> str:
    """The request id of the ``hold`` call the bridge started on the peer."""
    return await eventually(
        lambda: (runs_of(peer, "hold")[len(before) :] or [None])[0], "the peer to start hold", timeout=20
    )


async def cancelled_on_the_peer(peer: PeerProcess, request_id: str) -> None:
    await eventually(
        lambda: request_id in calls(peer)["cancelled"],
        f"the peer to see request {request_id} cancelled",
        timeout=CANCEL_BOUND,
    )


@pytest.mark.parametrize("mode", ["legacy", STATELESS_REVISION])
async def test_an_mcp_caller_abandoning_the_call_cancels_it_on_the_peer(
    held: tuple[Agent, PeerProcess], mode: str
) -> None:
    """The official client abandons its call to the agent (``notifications/cancelled`` in the handshake era,
    its call stream closed at 2026-07-28): the agent's invocation is cancelled, and the peer's call with it."""
    agent, peer = held
    before = runs_of(peer, "hold")
    with serve(agent.asgi()) as url:
        http = httpx2.AsyncClient(timeout=30)
        client = Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode, cache=None)
        async with http, client:
            results: list[Any] = []
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    results.append(await client.call_tool("hold", {}))

                group.start_soon(call)
                request_id = await started_hold(peer, before)
                group.cancel_scope.cancel()
            assert results == []
            await cancelled_on_the_peer(peer, request_id)
            assert (await client.list_tools()).tools  # the agent serves on


async def test_cancel_task_on_the_agent_cancels_the_peers_call(held: tuple[Agent, PeerProcess]) -> None:
    agent, peer = held
    before = runs_of(peer, "hold")
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m-hold",
                "role": "ROLE_USER",
                "parts": [{"data": {}}],
                "metadata": {"skill": "hold"},
            },
            "configuration": {"returnImmediately": True},
        },
    }
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=agent.asgi()), base_url="http://127.0.0.1", timeout=30
    ) as http:
        task = (await http.post("/a2a", json=send, headers={"A2A-Version": "1.0"})).json()["result"]["task"]
        request_id = await started_hold(peer, before)
        cancel = {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task["id"]}}
        started = time.monotonic()
        canceled = (await http.post("/a2a", json=cancel, headers={"A2A-Version": "1.0"})).json()["result"]
        took = time.monotonic() - started
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"  # the caller: nothing more will happen
        assert took < CANCEL_BOUND, f"the cancel was held {took:.1f} s"
        await cancelled_on_the_peer(peer, request_id)
        get = {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task["id"]}}
        local = (await http.post("/a2a", json=get, headers={"A2A-Version": "1.0"})).json()["result"]
    assert local["status"]["state"] == "TASK_STATE_CANCELED"


async def test_an_agui_disconnect_cancels_the_peers_call(held: tuple[Agent, PeerProcess]) -> None:
    agent, peer = held
    before = runs_of(peer, "hold")
    body = run_body("t-hold", "r-hold", props={"arguments": {}})
    body["messages"] = []
    with serve(agent.asgi()) as url:
        async with (
            httpx.AsyncClient(base_url=url, timeout=30) as http,
            http.stream("POST", "/agui/hold", json=body) as response,
        ):
            assert response.status_code == 200
            request_id = await started_hold(peer, before)
        await cancelled_on_the_peer(peer, request_id)


async def test_a_result_larger_than_one_event_needs_max_event_bytes(peer_2025: PeerProcess) -> None:
    size = 1_500_000
    async with McpTestClient(bridged(peer_2025.url, HANDSHAKE_REVISION).asgi()) as mcp:
        refused = await mcp.call_tool("big", {"size": size})
    assert refused["isError"] is True and "max_event_bytes" in text_of(refused)
    wide = bridged(peer_2025.url, HANDSHAKE_REVISION, max_event_bytes=4 * 1024 * 1024, budget_chars=2 * size)
    async with McpTestClient(wide.asgi()) as mcp:
        result = await mcp.call_tool("big", {"size": size})
    assert result["isError"] is False and "x" * size in text_of(result)


def test_max_event_bytes_is_checked() -> None:
    with pytest.raises(ValueError, match="max_event_bytes"):
        McpPeer("http://127.0.0.1:1/mcp", revision=STATELESS_REVISION, max_event_bytes=0)


async def test_handshake_era_resumed_from_a_stale_event_id_shows_each_tick_once(
    resumable_2025: PeerProcess,
) -> None:
    # the peer's events carry ids: a cut POST is resumed with GET and Last-Event-ID; that stream is cut as well,
    # and the mcp client resumes again from the id it resumed from first, so the peer replays ticks it already sent
    peer_2025 = resumable_2025
    with proxied(peer_2025) as (proxy, url):
        proxy.arm(2, resumptions=True)
        agent = bridged(url, HANDSHAKE_REVISION)
        before = runs_of(peer_2025, "lookup")
        async with McpTestClient(agent.asgi()) as mcp:
            result, ticks = await call_with_progress(mcp, "lookup", {"key": "k", "steps": 6})
        await close_peers()
        assert proxy.cut == 2
        assert result["isError"] is False and "found k" in text_of(result)
        assert len(runs_of(peer_2025, "lookup")[len(before) :]) == 1  # resumed, never run again
        assert ticks == [1, 2, 3, 4, 5, 6]
