"""Store faults are retryable errors on every face, within a bounded time, and the same process recovers by itself
(issue 25, must-have 2).

A real redis-server of this module's own (so pausing, stopping and filling it disturbs no other test) paused with
``SIGSTOP``, stopped and started again on its port, and filled (``maxmemory`` with ``noeviction``); a real SQLite
file locked by another connection (``BEGIN EXCLUSIVE``), made read-only and full. Each face is asked over HTTP
(``httpx.ASGITransport``, and the official MCP client over a socket) and its exact answer checked: the status,
``Retry-After``, the JSON-RPC code and the request's id, and the retryable mark. Then the fault ends and the same
app answers normally.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentmw import Agent, AgentMiddleware, Context, skill, tool
from agentmw.errors import StoreUnavailable
from agentmw.state import SQLiteState, State
from agentmw.testing import McpError, McpTestClient
from tests.conftest import free_port, require_tool
from tests.state.conftest import SETUP
from tests.waiting import eventually, wait_until

STATELESS = "2026-07-28"
BOUND = (
    6.0  # seconds within which a fault must be answered (Redis: 2 s socket timeouts; SQLite: busy_timeout)
)
BASE = "http://127.0.0.1:8000"


# --- a redis-server of this module's own --------------------------------------------------------------------


class RedisServer:
    """One redis-server process on a fixed port, which a test may pause, stop, start again and fill."""

    def __init__(self, folder: Path) -> None:
        self.binary = require_tool("redis-server", shutil.which("redis-server"), SETUP)
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._ping, "redis-server to start", timeout=10, interval=0.02)

    def _ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *args: str) -> bytes:
        """One command on a connection of its own (RESP), its reply's first line."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            parts = [f"*{len(args)}\r\n".encode()]
            for arg in args:
                parts.append(f"${len(arg.encode())}\r\n{arg}\r\n".encode())
            sock.sendall(b"".join(parts))
            return sock.recv(4096).split(b"\r\n")[0]

    def pause(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --- the app: one of each kind of request path ------------------------------------------------------------------

agents: dict[str, Agent] = {}


@tool
async def remember(ctx: Context, note: str) -> str:
    """Keep a note in the agent's own store (a capability that writes the store itself).

    Args:
        note: what to keep.
    """
    await agents["current"].state.put("notes", uuid.uuid4().hex, {"note": note}, expected_version=None)
    return f"kept {note}"


@skill
async def echo(ctx: Context, text: str = "hi") -> str:
    """Answer with the text.

    Args:
        text: what to say back.
    """
    return f"echo: {text}"


def build(store: State) -> Any:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    agent = Agent("faults", store=store, include=[remember, echo])
    agents["current"] = agent
    return agent, Starlette(middleware=[Middleware(AgentMiddleware, agent=agent)])


def http(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE, timeout=30)


JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def mcp_initialize(client: httpx.AsyncClient) -> httpx.Response:
    """The handshake era's initialize: it writes the session (a store write outside any capability)."""
    body = {
        "jsonrpc": "2.0",
        "id": 71,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    return await client.post("/mcp", json=body, headers=JSON)


async def a2a_get_task(client: httpx.AsyncClient) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": "get-1", "method": "GetTask", "params": {"id": "no-such-task"}}
    return await client.post("/a2a", json=body, headers={**JSON, "a2a-version": "1.0"})


async def a2a_rest_get_task(client: httpx.AsyncClient) -> httpx.Response:
    return await client.get("/a2a/tasks/no-such-task", headers={"a2a-version": "1.0"})


async def agui_run(client: httpx.AsyncClient) -> httpx.Response:
    run = {
        "threadId": f"th-{uuid.uuid4().hex[:8]}",
        "runId": f"run-{uuid.uuid4().hex[:8]}",
        "messages": [],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {"arguments": {"text": "hi"}},
    }
    return await client.post("/agui/echo", json=run, headers={"accept": "text/event-stream"})


async def timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = await call
    return result, time.monotonic() - started


def assert_retry_after(response: httpx.Response) -> None:
    assert response.headers.get("retry-after") == "1", response.headers


def assert_mcp_unavailable(response: httpx.Response, request_id: Any) -> None:
    assert response.status_code == 503, response.text
    assert_retry_after(response)
    body = response.json()
    assert body["id"] == request_id
    assert body["error"]["code"] == -32603
    assert body["error"]["data"] == {"retryable": True, "retryAfter": 1.0}
    assert "store is unavailable" in body["error"]["message"]


def assert_a2a_unavailable(response: httpx.Response, request_id: Any) -> None:
    assert response.status_code == 200, response.text  # JSON-RPC errors are 200 (the SDK reads no other)
    assert_retry_after(response)
    body = response.json()
    assert body["id"] == request_id and body["error"]["code"] == -32603
    info, retry = body["error"]["data"]
    assert info["reason"] == "STORE_UNAVAILABLE" and info["metadata"] == {
        "retryable": "true",
        "retryAfterSeconds": "1",
    }
    assert retry == {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}


def assert_rest_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert_retry_after(response)
    error = response.json()["error"]
    assert error["code"] == 503 and error["status"] == "UNAVAILABLE"
    assert error["details"][0]["reason"] == "STORE_UNAVAILABLE"


def assert_agui_retryable(response: httpx.Response) -> None:
    """503 before the stream started, or a run that started and ended with a retryable RUN_ERROR."""
    if response.status_code == 503:
        assert_agui_unavailable(response)
        return
    assert response.status_code == 200, response.text
    assert '"type":"RUN_ERROR"' in response.text and '"code":"RETRYABLE"' in response.text, response.text
    assert "store is unavailable" in response.text


def assert_agui_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert_retry_after(response)
    assert "store is unavailable" in response.json()["detail"]


async def assert_tool_retryable(app: Any) -> None:
    async with McpTestClient(app, era=STATELESS) as client:
        result, took = await timed(client.call_tool("remember", {"note": "n"}))
    assert took < BOUND
    assert result["isError"] is True
    assert result["_meta"]["agentmw/retryable"] is True and result["_meta"]["agentmw/retryAfter"] == 1.0
    assert "store is unavailable" in result["content"][0]["text"]


async def assert_serves(app: Any) -> None:
    """Every probe answered as it is with a healthy store: the same process recovered."""
    async with http(app) as client:
        init = await mcp_initialize(client)
        assert init.status_code == 200 and init.json()["id"] == 71 and "result" in init.json()
        get = await a2a_get_task(client)
        assert get.json()["error"]["code"] == -32001 and get.json()["id"] == "get-1"
        rest = await a2a_rest_get_task(client)
        assert rest.status_code == 404
        run = await agui_run(client)
        assert run.status_code == 200 and '"RUN_FINISHED"' in run.text
    async with McpTestClient(app, era=STATELESS) as mcp:
        done = await mcp.call_tool("remember", {"note": "after"})
    assert done["isError"] is False and done["content"][0]["text"] == "kept after"


@pytest.fixture
async def on_redis(redis_server: RedisServer) -> AsyncIterator[tuple[RedisServer, Any]]:
    from agentmw.state.redis import RedisState

    store = RedisState(redis_server.url, prefix=f"f{uuid.uuid4().hex[:8]}")
    _, app = build(store)
    await assert_serves(app)  # warm: connections pooled, scripts loaded, the secret made
    try:
        yield redis_server, app
    finally:
        await store.close()


# --- Redis ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["paused", "stopped"])
async def test_every_face_answers_retryable_while_redis_is_paused_or_down(
    on_redis: tuple[RedisServer, Any], fault: str
) -> None:
    server, app = on_redis
    if fault == "paused":
        server.pause()
    else:
        server.stop()
    try:
        async with http(app) as client:
            init, took = await timed(mcp_initialize(client))
            assert took < BOUND
            assert_mcp_unavailable(init, 71)
            get, took = await timed(a2a_get_task(client))
            assert took < BOUND
            assert_a2a_unavailable(get, "get-1")
            rest, took = await timed(a2a_rest_get_task(client))
            assert took < BOUND
            assert_rest_unavailable(rest)
            run, took = await timed(agui_run(client))
            assert took < BOUND
            assert_agui_unavailable(run)
        await assert_tool_retryable(app)
    finally:
        if fault == "paused":
            server.resume()
        else:
            server.start()  # on the same port, with nothing in it (no persistence)
    await eventually(lambda: _serves(app), "the same app to serve again", timeout=15)


async def _serves(app: Any) -> bool:
    try:
        await assert_serves(app)
    except (AssertionError, McpError):
        return False
    return True


async def test_a_full_redis_refuses_writes_as_retryable_and_recovers(
    on_redis: tuple[RedisServer, Any],
) -> None:
    server, app = on_redis
    assert server.command("CONFIG", "SET", "maxmemory-policy", "noeviction") == b"+OK"
    assert server.command("CONFIG", "SET", "maxmemory", "1") == b"+OK"
    try:
        async with http(app) as client:
            assert_mcp_unavailable(await mcp_initialize(client), 71)  # the session's write
            assert_agui_unavailable(await agui_run(client))  # the run id's claim
            get = await a2a_get_task(client)  # a read still works: an ordinary answer
            assert get.json()["error"]["code"] == -32001
        await assert_tool_retryable(app)
    finally:
        assert server.command("CONFIG", "SET", "maxmemory", "0") == b"+OK"
    await assert_serves(app)


async def test_the_official_mcp_client_gets_an_error_not_a_hang(redis_server: RedisServer) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    from agentmw.state.redis import RedisState
    from tests.conftest import serve

    store = RedisState(redis_server.url, prefix=f"f{uuid.uuid4().hex[:8]}")
    _, app = build(store)
    with serve(app) as url:
        redis_server.pause()
        try:
            started = time.monotonic()
            error: MCPError | None = None
            try:
                http_client = httpx2.AsyncClient(timeout=30)
                async with Client(
                    streamable_http_client(f"{url}/mcp", http_client=http_client), mode="legacy", cache=None
                ):
                    pass
            except BaseException as exc:  # noqa: BLE001  (the client's task group may wrap it)
                todo: list[BaseException] = [exc]
                while todo and error is None:
                    current = todo.pop()
                    if isinstance(current, MCPError):
                        error = current
                    elif isinstance(current, BaseExceptionGroup):
                        todo.extend(current.exceptions)
            assert error is not None, "the official client did not fail with an MCP error"
            # initialize waits on the session's bus subscription (3 s) and its write (2 s): bounded, not a hang
            assert time.monotonic() - started < 2 * BOUND
            assert error.error.code == -32603 and "store is unavailable" in error.error.message
            assert error.error.data == {"retryable": True, "retryAfter": 1.0}
        finally:
            redis_server.resume()
        async with Client(
            streamable_http_client(f"{url}/mcp", http_client=httpx2.AsyncClient(timeout=30)),
            mode="legacy",
            cache=None,
        ) as client:
            result = await client.call_tool("remember", {"note": "back"})
            assert not result.is_error
    # the store lived on the server's event loop, which is gone: its connections went with it


# --- SQLite -----------------------------------------------------------------------------------------------------


@pytest.fixture
async def on_sqlite(tmp_path: Path) -> AsyncIterator[tuple[SQLiteState, Any, Path]]:
    path = tmp_path / "state.db"
    store = SQLiteState(path, busy_timeout=0.5)
    _, app = build(store)
    await assert_serves(app)
    try:
        yield store, app, path
    finally:
        await store.close()


async def assert_writes_refused(app: Any) -> None:
    async with http(app) as client:
        init, took = await timed(mcp_initialize(client))
        assert took < BOUND
        assert_mcp_unavailable(init, 71)
        assert_agui_retryable(await agui_run(client))
    await assert_tool_retryable(app)


async def test_a_locked_sqlite_file_is_retryable_then_recovers(
    on_sqlite: tuple[SQLiteState, Any, Path],
) -> None:
    _, app, path = on_sqlite
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process's long write transaction
    try:
        await assert_writes_refused(app)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    await assert_serves(app)


async def test_a_read_only_sqlite_store_is_retryable_then_recovers(
    on_sqlite: tuple[SQLiteState, Any, Path],
) -> None:
    store, app, _ = on_sqlite
    # the store's own connections made read-only (tests may run as root, for whom a file's mode stops nothing)
    connections = [db for db in (store._db, store._ldb) if db is not None]
    for db in connections:
        db.execute("PRAGMA query_only=1")
    try:
        await assert_writes_refused(app)
    finally:
        for db in connections:
            db.execute("PRAGMA query_only=0")
    await assert_serves(app)


async def test_a_full_sqlite_store_is_retryable_then_recovers(
    on_sqlite: tuple[SQLiteState, Any, Path],
) -> None:
    store, app, _ = on_sqlite
    connections = [db for db in (store._db, store._ldb) if db is not None]
    pages = connections[0].execute("PRAGMA page_count").fetchone()[0]
    for db in connections:  # the file may not grow by one page: SQLITE_FULL, "database or disk is full"
        db.execute(f"PRAGMA max_page_count={pages}")
    # fill what is left of the last pages, so every next write needs a new one
    for size in (2000, 200, 20, 1):
        with pytest.raises(StoreUnavailable, match="full"):
            for i in range(10_000):
                await store.put("filler", f"f{size}-{i}", {"pad": "x" * size}, expected_version=None)
    try:
        await assert_writes_refused(app)
    finally:
        for db in connections:
            db.execute("PRAGMA max_page_count=4294967294")
    await assert_serves(app)


# --- the requestState secret after a store wipe ----------------------------------------------------------------


@tool
async def confirm(ctx: Context, item: str) -> str:
    """Ask the caller to confirm, then answer.

    Args:
        item: what to confirm.
    """
    answer = await ctx.confirm(f"Really {item}?")
    return f"{item}: {'yes' if answer else 'no'}"


async def test_replicas_re_agree_on_the_request_state_secret_after_a_flushall(
    redis_server: RedisServer,
) -> None:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    from agentmw.state.redis import RedisState

    prefix = f"s{uuid.uuid4().hex[:8]}"
    made: list[Agent] = []

    def replica() -> Any:
        agent = Agent("secret", store=RedisState(redis_server.url, prefix=prefix), include=[confirm])
        made.append(agent)
        return Starlette(middleware=[Middleware(AgentMiddleware, agent=agent)])

    async def first_round(app: Any, item: str) -> dict[str, Any]:
        async with McpTestClient(app, era=STATELESS, capabilities={"elicitation": {}}) as client:
            first = await client.call_tool("confirm", {"item": item})
        assert first["resultType"] == "input_required", first
        [key] = first["inputRequests"]
        return {
            "name": "confirm",
            "arguments": {"item": item},
            "inputResponses": {key: {"action": "accept", "content": {"approved": True}}},
            "requestState": first["requestState"],
        }

    async def retry(app: Any, params: dict[str, Any]) -> Any:
        async with McpTestClient(app, era=STATELESS, capabilities={"elicitation": {}}) as client:
            return await client.request("tools/call", params)

    a, b = replica(), replica()
    before = await first_round(a, "one")  # A makes the secret; B checks with it
    assert (await retry(b, before))["content"][0]["text"] == "one: yes"
    old = await first_round(b, "old")  # signed before the wipe, retried after it
    assert redis_server.command("FLUSHALL") == b"+OK"
    c = replica()  # started after the wipe: it finds no secret and makes another
    fresh = await first_round(c, "two")
    assert (await retry(a, fresh))[
        "isError"
    ] is False  # A failed its check, read the store again, and adopted it
    # A signs with the store's secret now: the replica started after the wipe checks it
    after = await first_round(a, "three")
    assert (await retry(c, after))["isError"] is False
    after_b = await first_round(b, "four")
    assert (await retry(c, after_b))["isError"] is False
    # what was signed before the wipe still checks on a replica that held that secret
    assert (await retry(a, old))["isError"] is False
    secrets = {agent.secret for agent in made}
    assert len(secrets) == 1
    for agent in made:
        await agent.state.close()
