"""SIGTERM stops the server (issue 8, item 7), whatever a client is waiting on.

Each test serves ``tests/shutdown_app.py`` with uvicorn in a subprocess, puts one request into a waiting
state, and then either

- ``client-left``: the client closes its connection, then SIGTERM; uvicorn runs with its default graceful
  shutdown (no timeout), so a handler that never notices the disconnect keeps the process alive
  ("Waiting for background tasks to complete") and the test fails after ``EXIT_BOUND`` seconds; or
- ``client-stays``: SIGTERM while the client is still connected; uvicorn runs with
  ``--timeout-graceful-shutdown 3``. The process must exit within ``EXIT_BOUND`` seconds, every stream
  the client still holds must end (not hang), and uvicorn must not have had to cancel the request by force
  ("timeout graceful shutdown exceeded"): the stream itself has to notice the server's shutdown.

The server's log is printed with every failure. A server still running at the end of a test is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import pytest

from tests.conftest import free_port
from tests.helpers.mcp_raw import initialize, session_headers
from tests.waiting import eventually, exits

ROOT = Path(__file__).resolve().parent.parent
EXIT_BOUND = 5.0  # seconds from SIGTERM to the process's exit
GRACEFUL_TIMEOUT = 3  # uvicorn --timeout-graceful-shutdown in the client-stays variant
STREAM_BOUND = EXIT_BOUND + 1.0  # a still-connected stream must end within this after SIGTERM
SETUP_BOUND = 10.0  # to start the server and to reach the waiting state
FORCED = "timeout graceful shutdown exceeded"

ACCEPT = "application/json, text/event-stream"
HANDSHAKE = "2025-11-25"
STATELESS = "2026-07-28"
STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
}


# --- the server ------------------------------------------------------------------------------------


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError as exc:  # pragma: no cover
            return f"<no log: {exc}>"


@contextlib.asynccontextmanager
async def uvicorn_server(log_path: Path, graceful_timeout: int | None) -> AsyncIterator[Server]:
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "uvicorn",
        "tests.shutdown_app:app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "info",
    ]
    if graceful_timeout is not None:
        args += ["--timeout-graceful-shutdown", str(graceful_timeout)]
    proc = _spawn(args, log_path)
    server = Server(proc, f"http://127.0.0.1:{port}", log_path)
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=1) as probe:

            async def answers() -> bool:
                if proc.poll() is not None:
                    pytest.fail(f"uvicorn exited with {proc.returncode} before it answered\n{server.log()}")
                try:
                    return (await probe.get("/.well-known/agent-card.json")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(
                answers, lambda: f"uvicorn to answer\n{server.log()}", timeout=SETUP_BOUND, interval=0.05
            )
        yield server
    finally:
        _reap(proc)


def _spawn(args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start the server with its stdout and stderr in ``log_path`` (a file never fills up like a pipe)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log_path.open("wb") as log:
        return subprocess.Popen(
            args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Never leave a server behind: kill it if it still runs, and collect it."""
    if proc.poll() is None:
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


async def wait_for_exit(proc: subprocess.Popen[bytes], bound: float) -> float | None:
    """Seconds until ``proc`` exited, or None if it is still running after ``bound`` seconds."""
    return await exits(proc, bound)


# --- reading streams -------------------------------------------------------------------------------


@dataclass
class Stream:
    """A response the client holds open, and the line iterator the setup already started reading."""

    name: str
    response: httpx.Response
    lines: AsyncIterator[str]


@dataclass
class Waiting:
    streams: list[Stream] = field(default_factory=list)


async def read_until(lines: AsyncIterator[str], found: Callable[[str], bool], what: str) -> str:
    """Read ``lines`` until one satisfies ``found``; fails after ``SETUP_BOUND`` seconds or at the end."""
    seen: list[str] = []
    try:
        with anyio.fail_after(SETUP_BOUND):
            async for line in lines:
                seen.append(line)
                if found(line):
                    return line
    except TimeoutError:
        pytest.fail(f"no {what} within {SETUP_BOUND} s; read {seen!r}")
    pytest.fail(f"the stream ended before {what}; read {seen!r}")


def data_of(line: str) -> dict | None:
    return json.loads(line[5:]) if line.startswith("data:") else None


async def drain(stream: Stream, bound: float) -> str:
    """How a still-open stream ended: ``clean`` (last chunk received), ``cut (...)`` (the server closed the
    connection mid-body) or ``hang`` (nothing within ``bound`` seconds)."""

    async def rest() -> str:
        try:
            async for _ in stream.lines:
                pass
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            return f"cut ({type(exc).__name__}: {exc})"
        return "clean"

    try:
        return await asyncio.wait_for(rest(), bound)
    except TimeoutError:
        return "hang"


async def open_stream(
    stack: contextlib.AsyncExitStack,
    http: httpx.AsyncClient,
    name: str,
    method: str,
    url: str,
    **kwargs: object,
) -> Stream:
    response = await stack.enter_async_context(http.stream(method, url, **kwargs))  # type: ignore[arg-type]
    assert response.status_code == 200, (name, response.status_code, await response.aread())
    assert response.headers["content-type"].startswith("text/event-stream"), (name, response.headers)
    return Stream(name, response, response.aiter_lines())


# --- the waiting situations ------------------------------------------------------------------------

Setup = Callable[[httpx.AsyncClient, contextlib.AsyncExitStack], Awaitable[Waiting]]


async def a2a_subscribe_input_required(http: httpx.AsyncClient, stack: contextlib.AsyncExitStack) -> Waiting:
    """A2A ``SubscribeToTask`` on a task parked in INPUT_REQUIRED (the skill awaits ``ctx.ask``)."""
    headers = {"a2a-version": "1.0"}
    message = {
        "messageId": f"m-{uuid.uuid4()}",
        "role": "ROLE_USER",
        "parts": [{"data": {"item": "pc"}}],
        "metadata": {"skill": "approve"},
    }
    sent = await http.post(
        "/a2a",
        headers=headers,
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
    )
    task = sent.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    stream = await open_stream(
        stack,
        http,
        "a2a SubscribeToTask",
        "POST",
        "/a2a",
        headers=headers,
        json={"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task["id"]}},
    )
    first = data_of(await read_until(stream.lines, lambda line: line.startswith("data:"), "first SSE event"))
    assert first is not None and first["id"] == 2 and first["result"]["task"]["id"] == task["id"], first
    return Waiting([stream])


async def handshake_session(http: httpx.AsyncClient, capabilities: dict) -> dict[str, str]:
    init = await initialize(http, revision=HANDSHAKE, capabilities=capabilities, client="shutdown-test")
    headers = session_headers(init, revision=HANDSHAKE)
    initialized = await http.post(
        "/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    assert initialized.status_code == 202, initialized.text
    return headers


async def mcp_handshake_elicitation(http: httpx.AsyncClient, stack: contextlib.AsyncExitStack) -> Waiting:
    """A handshake-era ``tools/call`` whose tool awaits ``ctx.ask``; the client never answers the elicitation."""
    headers = await handshake_session(http, {"elicitation": {}})
    stream = await open_stream(
        stack,
        http,
        "mcp tools/call",
        "POST",
        "/mcp",
        headers=headers,
        json={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "confirm_order", "arguments": {"sku": "MON-27"}},
        },
    )
    request = data_of(
        await read_until(
            stream.lines,
            lambda line: (data_of(line) or {}).get("method") == "elicitation/create",
            "elicitation/create request",
        )
    )
    assert request is not None and "id" in request, request
    return Waiting([stream])


async def mcp_handshake_get_stream(http: httpx.AsyncClient, stack: contextlib.AsyncExitStack) -> Waiting:
    """The handshake-era GET stream of a session."""
    headers = await handshake_session(http, {})
    stream = await open_stream(
        stack,
        http,
        "mcp GET stream",
        "GET",
        "/mcp",
        headers={
            "accept": "text/event-stream",
            "mcp-session-id": headers["mcp-session-id"],
            "mcp-protocol-version": HANDSHAKE,
        },
    )
    # The response has started; the first bytes (an SSE comment or event) say the server is in its loop.
    await read_until(stream.lines, lambda line: line != "", "first line of the GET stream")
    return Waiting([stream])


async def mcp_stateless_listen(http: httpx.AsyncClient, stack: contextlib.AsyncExitStack) -> Waiting:
    """A stateless-era ``subscriptions/listen`` stream."""
    headers = {
        "accept": ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": STATELESS,
        "mcp-method": "subscriptions/listen",
    }
    stream = await open_stream(
        stack,
        http,
        "mcp subscriptions/listen",
        "POST",
        "/mcp",
        headers=headers,
        json={
            "jsonrpc": "2.0",
            "id": "sub-1",
            "method": "subscriptions/listen",
            "params": {"_meta": STATELESS_META, "notifications": {"toolsListChanged": True}},
        },
    )
    ack = data_of(
        await read_until(stream.lines, lambda line: line.startswith("data:"), "the acknowledgement")
    )
    assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged", ack
    return Waiting([stream])


def run_body(thread: str, run: str, text: str, **props: object) -> dict:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [{"id": f"u-{run}", "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": props,
    }


async def agui_interrupt(http: httpx.AsyncClient, stack: contextlib.AsyncExitStack) -> Waiting:
    """An AG-UI run that ends in an interrupt: its stream ends, the coroutine stays parked in the server."""
    run = f"r-{uuid.uuid4().hex[:8]}"
    stream = await open_stream(
        stack, http, "agui run", "POST", "/agui/approve", json=run_body("t-int", run, "pc")
    )
    finished = data_of(
        await read_until(
            stream.lines, lambda line: (data_of(line) or {}).get("type") == "RUN_FINISHED", "RUN_FINISHED"
        )
    )
    assert finished is not None and finished["outcome"]["type"] == "interrupt", finished
    async for _ in stream.lines:  # the run's stream is over; the client keeps its (idle) connection
        pass
    return Waiting([])


async def agui_live_run(http: httpx.AsyncClient, stack: contextlib.AsyncExitStack) -> Waiting:
    """An attached AG-UI run whose skill is still working: its POST stream waits for more events."""
    run = f"r-{uuid.uuid4().hex[:8]}"
    stream = await open_stream(
        stack, http, "agui live run", "POST", "/agui/wait", json=run_body("t-live", run, "x")
    )
    await read_until(
        stream.lines,
        lambda line: (data_of(line) or {}).get("type") == "ACTIVITY_SNAPSHOT",
        "ACTIVITY_SNAPSHOT",
    )
    return Waiting([stream])


async def agui_reconnect(http: httpx.AsyncClient, stack: contextlib.AsyncExitStack) -> Waiting:
    """The AG-UI reconnect stream (``GET runs/<id>/events``) following a detached run that is still working."""
    run = f"r-{uuid.uuid4().hex[:8]}"
    async with http.stream("POST", "/agui/wait", json=run_body("t-re", run, "x", detached=True)) as first:
        assert first.status_code == 200
        await read_until(
            first.aiter_lines(),
            lambda line: (data_of(line) or {}).get("type") == "ACTIVITY_SNAPSHOT",
            "ACTIVITY_SNAPSHOT",
        )
    # The first connection is gone; the detached run goes on. Come back and follow it.
    stream = await open_stream(
        stack, http, "agui reconnect", "GET", f"/agui/wait/runs/{run}/events", params={"after": 0}
    )
    await read_until(
        stream.lines,
        lambda line: (data_of(line) or {}).get("type") == "ACTIVITY_SNAPSHOT",
        "replayed ACTIVITY_SNAPSHOT",
    )
    return Waiting([stream])


SITUATIONS: dict[str, Setup] = {
    "a2a-subscribe-input-required": a2a_subscribe_input_required,
    "mcp-handshake-elicitation": mcp_handshake_elicitation,
    "mcp-handshake-get-stream": mcp_handshake_get_stream,
    "mcp-stateless-listen": mcp_stateless_listen,
    "agui-interrupt": agui_interrupt,
    "agui-live-run": agui_live_run,
    "agui-reconnect": agui_reconnect,
}


def client(url: str) -> httpx.AsyncClient:
    # The read timeout is far past every bound here: a hang is measured by the test, not cut by httpx.
    return httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(60, connect=5))


def failure(server: Server, what: str) -> str:
    return f"{what}\n--- server log ({server.log_path}) ---\n{server.log()}"


# --- the tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("situation", SITUATIONS)
async def test_sigterm_after_the_client_left(situation: str, tmp_path: Path) -> None:
    async with uvicorn_server(tmp_path / "uvicorn.log", graceful_timeout=None) as server:
        http = client(server.url)
        try:
            async with contextlib.AsyncExitStack() as stack:
                await SITUATIONS[situation](http, stack)
            # Leaving the stack closed every stream the client held open.
        finally:
            await http.aclose()  # ...and this closes every connection the client had.
        server.proc.send_signal(signal.SIGTERM)
        elapsed = await wait_for_exit(server.proc, EXIT_BOUND)
        assert elapsed is not None, failure(
            server, f"{situation}: uvicorn still runs {EXIT_BOUND} s after SIGTERM (the client had left)"
        )
        assert server.proc.returncode in (0, -signal.SIGTERM), failure(
            server, f"{situation}: uvicorn exited with {server.proc.returncode}"
        )


@pytest.mark.parametrize("situation", SITUATIONS)
async def test_sigterm_with_the_client_still_connected(situation: str, tmp_path: Path) -> None:
    async with uvicorn_server(tmp_path / "uvicorn.log", graceful_timeout=GRACEFUL_TIMEOUT) as server:
        async with client(server.url) as http, contextlib.AsyncExitStack() as stack:
            waiting = await SITUATIONS[situation](http, stack)
            server.proc.send_signal(signal.SIGTERM)
            sigterm = time.monotonic()

            async def ended(stream: Stream) -> tuple[str, str, float]:
                how = await drain(stream, STREAM_BOUND)
                return stream.name, how, time.monotonic() - sigterm

            elapsed, *streams = await asyncio.gather(
                wait_for_exit(server.proc, EXIT_BOUND), *(ended(s) for s in waiting.streams)
            )
        summary = f"{situation}: exit after {elapsed if elapsed is None else round(elapsed, 2)} s; " + (
            "streams " + ", ".join(f"{name}: {how} after {at:.2f} s" for name, how, at in streams)
            if streams
            else "no stream left open"
        )
        print(summary)  # shown with -rA: how each stream ended, also when the test passes
        hung = [name for name, how, _ in streams if how == "hang"]
        assert not hung, failure(server, f"{summary}\nstill open {STREAM_BOUND} s after SIGTERM: {hung}")
        assert elapsed is not None, failure(
            server, f"{summary}\nuvicorn still runs {EXIT_BOUND} s after SIGTERM"
        )
        assert FORCED not in server.log(), failure(
            server,
            f"{summary}\nuvicorn had to cancel the request after --timeout-graceful-shutdown "
            f"{GRACEFUL_TIMEOUT}: the stream did not notice the server's shutdown by itself",
        )
        assert server.proc.returncode in (0, -signal.SIGTERM), failure(
            server, f"{summary}\nuvicorn exited with {server.proc.returncode}"
        )
