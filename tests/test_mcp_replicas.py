"""Handshake-era MCP sessions across replicas: each replica is its own app, Agent and state instance, and
they share one store (a SQLite file; Redis when ``redis-server`` is installed), served on real sockets.

The official client goes through a fake balancer (an httpx transport that sends each request to the next
replica in turn); the exact cross-replica cases (a GET stream on A, a cancellation or an answer on B) are
driven with raw HTTP so that each request lands where the test says.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context
from tests.conftest import serve
from tests.helpers.mcp_raw import open_session
from tests.state.conftest import redis_url  # noqa: F401  (the session fixture: a real redis-server)
from tests.waiting import eventually

ACCEPT = "application/json, text/event-stream"
LEGACY = "2025-11-25"
log: list[str] = []  # appended from the replicas' threads; a list append is atomic


class Replica:
    """One replica: its own Agent (and so its own state instance) over the shared store URL."""

    def __init__(self, name: str, store: str) -> None:
        self.name = name
        agent = self.agent = Agent("replicated", store=store)

        @agent.tool
        async def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        @agent.tool
        async def where() -> str:
            """Which replica answered."""
            return name

        @agent.tool
        async def hold(ctx: Context, tag: str) -> str:
            """Wait until cancelled."""
            log.append(f"{tag}:started:{name}")
            await ctx.progress(1, 2, "holding")
            try:
                await anyio.sleep(30)
            finally:
                log.append(f"{tag}:finally:{name}")
            return "held"

        @agent.tool
        async def confirm(ctx: Context, item: str) -> str:
            """Ask the person, then answer with what they said."""
            answer = await ctx.ask(
                f"Order {item}?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}
            )
            return f"{name}:{answer.action}:{(answer.content or {}).get('ok')}"

        @agent.resource("replica://status", mime_type="text/plain")
        def status() -> str:
            """A resource clients subscribe to."""
            return "ok"

        self.app = Starlette()
        self.app.add_middleware(AgentMiddleware, agent=agent)
        self.url = ""


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    url = request.getfixturevalue("redis_url")
    return f"{url}?prefix=r{uuid.uuid4().hex[:10]}"


@pytest.fixture
def replicas(store_url: str) -> Iterator[list[Replica]]:
    made = [Replica(name, store_url) for name in ("A", "B", "C")]
    with ExitStack() as stack:
        for replica in made:
            replica.url = stack.enter_context(serve(replica.app))
        yield made


class RoundRobin(httpx2.AsyncBaseTransport):
    """A fake balancer: each request goes to the next replica, whatever it is."""

    def __init__(self, urls: list[str]) -> None:
        self.targets = [httpx2.URL(u) for u in urls]
        self.turn = 0
        self.served = [0] * len(urls)
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        index = self.turn % len(self.targets)
        self.turn += 1
        self.served[index] += 1
        target = self.targets[index]
        request.url = request.url.copy_with(scheme=target.scheme, host=target.host, port=target.port)
        request.headers["host"] = f"{target.host}:{target.port}"
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def balanced_client(replicas: list[Replica], **kwargs: Any) -> tuple[Client, RoundRobin]:
    balancer = RoundRobin([r.url for r in replicas])
    http = httpx2.AsyncClient(transport=balancer, base_url="http://balancer", timeout=30)
    client = Client(
        streamable_http_client("http://balancer/mcp", http_client=http), mode="legacy", cache=None, **kwargs
    )
    return client, balancer


# --- raw HTTP helpers -------------------------------------------------------------------------------------


async def initialize(
    client: httpx.AsyncClient, url: str, capabilities: dict[str, Any] | None = None
) -> dict[str, str]:
    return await open_session(client, url, revision=LEGACY, capabilities=capabilities, client="replicas")


def rpc(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}


def result_of(response: httpx.Response) -> dict[str, Any]:
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
    return json.loads(text)


async def sse_messages(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    async for line in lines:
        if line.startswith("data:"):
            yield json.loads(line[5:])


async def wait_logged(entry: str, timeout: float = 5.0) -> float:
    await eventually(lambda: entry in log, f"{entry!r} in the log", timeout=timeout, interval=0.002)
    return time.monotonic()


# --- the tests --------------------------------------------------------------------------------------------


async def test_official_client_through_a_round_robin_balancer(replicas: list[Replica]) -> None:
    client, balancer = balanced_client(replicas)
    answered_by: set[str] = set()
    async with client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"add", "where", "hold", "confirm"} <= tools
        for i in range(60):
            result = await client.call_tool("add", {"a": i, "b": 1})
            assert result.is_error is False and result.structured_content == {"result": i + 1}
            if i % 10 == 0:
                answered_by.add((await client.call_tool("where", {})).content[0].text)
    assert answered_by == {"A", "B", "C"}  # the one session was served by every replica
    assert min(balancer.served) >= 20


async def test_get_stream_on_a_receives_what_b_and_c_cause(replicas: list[Replica]) -> None:
    a, b, c = replicas
    async with httpx.AsyncClient(timeout=10) as client:
        headers = await initialize(client, a.url)
        subscribe = rpc(1, "resources/subscribe", {"uri": "replica://status"})
        assert result_of(await client.post(f"{c.url}/mcp", headers=headers, json=subscribe))["result"] == {}
        stream_headers = {"accept": "text/event-stream", "mcp-session-id": headers["mcp-session-id"]}
        async with client.stream("GET", f"{a.url}/mcp", headers=stream_headers) as stream:
            assert stream.status_code == 200
            second = await client.get(f"{b.url}/mcp", headers=stream_headers)  # one GET stream per session
            assert second.status_code == 409
            messages = sse_messages(stream.aiter_lines())
            b.agent.resource_updated("replica://other")  # not subscribed: must not arrive
            b.agent.add("tool", lambda: "tmp", name="temporary")
            with anyio.fail_after(5):
                first = await anext(messages)
            assert first == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
            c.agent.resource_updated("replica://status")
            with anyio.fail_after(5):
                second_message = await anext(messages)
            assert second_message["method"] == "notifications/resources/updated"
            assert second_message["params"] == {"uri": "replica://status"}
            # unsubscribed through B: C's next update no longer reaches A's stream, a list change does
            unsubscribe = rpc(2, "resources/unsubscribe", {"uri": "replica://status"})
            assert (
                result_of(await client.post(f"{b.url}/mcp", headers=headers, json=unsubscribe))["result"]
                == {}
            )
            on_a = a.agent.mcp.sessions.sessions[headers["mcp-session-id"]]
            await eventually(  # the bus carries B's change to A (SQLite polls every 50 ms)
                lambda: "replica://status" not in on_a.subscriptions, "A to learn of the unsubscribe"
            )
            c.agent.resource_updated("replica://status")
            c.agent.remove("tool", "add")
            with anyio.fail_after(5):
                third = await anext(messages)
            assert third == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


async def test_cancelled_on_b_cancels_the_call_running_on_a(replicas: list[Replica]) -> None:
    a, b, _ = replicas
    tag = f"cancel-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(timeout=10) as client:
        headers = await initialize(client, a.url)
        call = asyncio.create_task(
            client.post(
                f"{a.url}/mcp",
                headers=headers,
                json=rpc(7, "tools/call", {"name": "hold", "arguments": {"tag": tag}}),
            )
        )
        await wait_logged(f"{tag}:started:A")
        sent = time.monotonic()
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
        assert (await client.post(f"{b.url}/mcp", headers=headers, json=cancel)).status_code == 202
        latency = await wait_logged(f"{tag}:finally:A") - sent
        response = await call
        assert response.status_code == 200 and "result" not in response.text  # no answer is owed
    print(f"notifications/cancelled on B -> finally on A: {latency * 1000:.1f} ms")
    # 100 ms plus the bus (SQLite polls every 50 ms), with room for a shared machine
    assert latency < 0.5, latency


async def test_elicitation_answered_through_b_for_a_call_waiting_on_a(replicas: list[Replica]) -> None:
    a, b, _ = replicas
    async with httpx.AsyncClient(timeout=10) as client:
        headers = await initialize(client, a.url, {"elicitation": {}})
        body = rpc(3, "tools/call", {"name": "confirm", "arguments": {"item": "MON-27"}})
        async with client.stream("POST", f"{a.url}/mcp", headers=headers, json=body) as stream:
            messages = sse_messages(stream.aiter_lines())
            with anyio.fail_after(5):
                question = await anext(messages)
            assert question["method"] == "elicitation/create"
            answer = {
                "jsonrpc": "2.0",
                "id": question["id"],
                "result": {"action": "accept", "content": {"ok": True}},
            }
            assert (await client.post(f"{b.url}/mcp", headers=headers, json=answer)).status_code == 202
            with anyio.fail_after(5):
                final = await anext(messages)
        assert final["id"] == 3 and final["result"]["content"][0]["text"] == "A:accept:True"


async def test_official_client_answers_elicitation_wherever_it_lands(replicas: list[Replica]) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    client, _ = balanced_client(replicas[:2], elicitation_callback=on_elicit)
    async with client:
        for _ in range(4):
            result = await client.call_tool("confirm", {"item": "DOCK"})
            assert result.is_error is False, result.content
            assert result.content[0].text.endswith(":accept:True")
    assert asked == ["Order DOCK?"] * 4


async def test_delete_on_b_ends_the_session_on_a(replicas: list[Replica]) -> None:
    a, b, c = replicas
    async with httpx.AsyncClient(timeout=10) as client:
        headers = await initialize(client, a.url)
        add = rpc(1, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        assert (
            result_of(await client.post(f"{a.url}/mcp", headers=headers, json=add))["result"]["isError"]
            is False
        )
        assert (
            result_of(await client.post(f"{c.url}/mcp", headers=headers, json=add))["result"]["isError"]
            is False
        )
        stream_headers = {"accept": "text/event-stream", "mcp-session-id": headers["mcp-session-id"]}
        async with client.stream("GET", f"{a.url}/mcp", headers=stream_headers) as stream:
            lines = stream.aiter_lines()
            with anyio.fail_after(5):
                assert (await anext(lines)).startswith(":")  # the stream is open
            ended = time.monotonic()
            assert (await client.delete(f"{b.url}/mcp", headers=headers)).status_code == 200
            with anyio.fail_after(2):  # the bus ends A's copy and its GET stream
                async for _ in lines:
                    pass
        assert time.monotonic() - ended < 1.0
        for replica in (
            a,
            c,
            b,
        ):  # every replica's copy ends with the bus message (SQLite: each polls at 50 ms)

            async def gone(url: str = replica.url) -> bool:
                return (await client.post(f"{url}/mcp", headers=headers, json=add)).status_code == 404

            await eventually(gone, f"{replica.url} to forget the session", timeout=0.5, interval=0.01)


async def test_another_credential_is_refused_on_every_replica(replicas: list[Replica]) -> None:
    a, b, c = replicas
    async with httpx.AsyncClient(timeout=10) as client:
        headers = await initialize(client, a.url)
        ping = rpc(1, "ping")
        for replica in (a, b, c):
            assert (await client.post(f"{replica.url}/mcp", headers=headers, json=ping)).status_code == 200
            stolen = {**headers, "authorization": "Bearer someone-else"}
            assert (await client.post(f"{replica.url}/mcp", headers=stolen, json=ping)).status_code == 404


async def test_log_level_set_on_b_applies_to_a_call_on_c(replicas: list[Replica]) -> None:
    a, b, c = replicas
    async with httpx.AsyncClient(timeout=10) as client:
        headers = await initialize(client, a.url)
        assert (
            result_of(await client.post(f"{c.url}/mcp", headers=headers, json=rpc(1, "ping")))["result"] == {}
        )
        level = rpc(2, "logging/setLevel", {"level": "error"})
        assert result_of(await client.post(f"{b.url}/mcp", headers=headers, json=level))["result"] == {}
        session = c.agent.mcp.sessions.sessions[headers["mcp-session-id"]]

        async def applied() -> bool:  # the bus tells C the record changed; at the latest C reads it again
            if session.log_level == "error":
                return True
            await client.post(f"{c.url}/mcp", headers=headers, json=rpc(3, "ping"))
            return False

        await eventually(applied, "C to apply the log level", timeout=3.3, interval=0.1)
