"""Sync and async tools over a real socket: ``tools/call`` through uvicorn, beside a bare Starlette floor.

Two uvicorn processes serve on loopback: the floor (a plain Starlette route doing the JSON-RPC work of
``tools/call`` by hand, calling ``async def add``) and agentmw (``AgentMiddleware``, with the same ``add``
as an ``async def`` tool and as a plain ``def`` tool, ``add_sync``). This process is the client: a few
kept-alive HTTP/1.1 connections on raw asyncio streams (no client library, so the client costs far less
than a server), each sending its next call as soon as the last one is answered.

The rows are: the floor; agentmw's async and sync tool in the handshake era (``2025-11-25``, one session);
and both in the stateless era (``2026-07-28``, routing headers and the ``_meta`` envelope). The machine is
shared, so the rows are measured in interleaved rounds (every row once per round, in turn) and each
row's figure is its median round; the ratio is to the floor's median round. The server's CPU time per call
(from ``/proc``, median round) is printed beside it, with the floor's CPU per call over the row's: it moves
less with the neighbours' load than wall time does (a busy machine squeezes every wall-time ratio toward 1).

Run ``python bench/mcp_sync_call.py`` (``--rounds``, ``--calls`` per row and round, ``--connections``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODERN = "2026-07-28"
LEGACY = "2025-11-25"


# --- the two servers (imported by uvicorn in its own process) -----------------------------------------


async def add(a: int, b: int) -> int:
    return a + b


def add_sync(a: int, b: int) -> int:
    return a + b


def floor_app() -> Any:
    """A plain Starlette route doing the same JSON-RPC work by hand (as bench/mcp_tools_call.py's floor)."""
    from mcp_tools_call import floor_app as build

    return build()


def agentmw_app() -> Any:
    from starlette.applications import Starlette

    from agentmw import Agent, AgentMiddleware

    agent = Agent("bench")
    agent.tool(add)
    agent.tool(add_sync)
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


# --- the client -----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(factory: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            f"mcp_sync_call:{factory}",
            "--factory",
            "--app-dir",
            str(HERE),
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        cwd=HERE,
        env={**os.environ, "PYTHONPATH": str(HERE.parent / "src")},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"uvicorn {factory} did not start")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


class Connection:
    """One kept-alive HTTP/1.1 connection; POSTs a body and reads the response (Content-Length framed)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes) -> None:
        self.reader, self.writer, self.head = reader, writer, head

    @classmethod
    async def open(cls, port: int, path: str, headers: dict[str, str]) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        lines = [
            f"POST {path} HTTP/1.1",
            f"host: 127.0.0.1:{port}",
            "content-type: application/json",
            "accept: application/json, text/event-stream",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        return cls(reader, writer, ("\r\n".join(lines) + "\r\ncontent-length: ").encode())

    async def post(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        self.writer.write(self.head + str(len(body)).encode() + b"\r\n\r\n" + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = raw.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            if line:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        return int(status_line.split()[1]), headers, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


def call_body(i: int, tool: str, modern: bool) -> bytes:
    params: dict[str, Any] = {"name": tool, "arguments": {"a": i, "b": 2}}
    if modern:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    return json.dumps(
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}, separators=(",", ":")
    ).encode()


async def handshake(port: int) -> dict[str, str]:
    """initialize + initialized: the session every handshake-era connection then uses."""
    connection = await Connection.open(port, "/mcp", {})
    info = {"name": "bench", "version": "0"}
    init = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": info},
        }
    ).encode()
    status, headers, _ = await connection.post(init)
    assert status == 200, status
    connection.close()
    session = {"mcp-protocol-version": LEGACY, "mcp-session-id": headers["mcp-session-id"]}
    connection = await Connection.open(port, "/mcp", session)
    status, _, _ = await connection.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert status == 202, status
    connection.close()
    return session


class Row:
    def __init__(self, name: str, port: int, pid: int, path: str, tool: str, era: str) -> None:
        self.name, self.port, self.pid, self.path, self.tool, self.era = name, port, pid, path, tool, era
        self.headers: dict[str, str] = {}
        self.rates: list[float] = []
        self.cpu_us: list[float] = []

    async def prepare(self) -> None:
        if self.era == LEGACY:
            self.headers = await handshake(self.port)
        elif self.era == MODERN:
            self.headers = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": self.tool}
        connection = await Connection.open(self.port, self.path, self.headers)
        status, _, body = await connection.post(call_body(1, self.tool, self.era == MODERN))
        connection.close()
        reply = json.loads(body)
        assert status == 200, (self.name, status, body)
        assert reply["result"]["structuredContent"] == {"result": 3}, (self.name, body)

    async def round(self, calls: int, connections: int) -> None:
        modern = self.era == MODERN
        bodies = [call_body(i, self.tool, modern) for i in range(calls)]
        opened = [await Connection.open(self.port, self.path, self.headers) for _ in range(connections)]
        for connection in opened:  # warm each connection (and the server's per-connection state)
            await connection.post(bodies[0])
        queue = iter(bodies)

        async def drive(connection: Connection) -> None:
            for body in queue:
                status, _, _ = await connection.post(body)
                if status != 200:
                    raise RuntimeError(f"{self.name}: HTTP {status}")

        cpu = cpu_seconds(self.pid)
        start = time.perf_counter()
        await asyncio.gather(*(drive(c) for c in opened))
        elapsed = time.perf_counter() - start
        self.cpu_us.append((cpu_seconds(self.pid) - cpu) / calls * 1e6)
        self.rates.append(calls / elapsed)
        for connection in opened:
            connection.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3000, help="calls per row and round")
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    floor, floor_port = start_server("floor_app")
    agentmw, agentmw_port = start_server("agentmw_app")
    try:
        rows = [Row("bare Starlette floor", floor_port, floor.pid, "/mcp", "add", "floor")]
        for era, label in ((LEGACY, "session"), (MODERN, "stateless")):
            for tool, kind in (("add", "async def"), ("add_sync", "def")):
                rows.append(
                    Row(
                        f"agentmw, {era} ({label}), `{kind}` tool",
                        agentmw_port,
                        agentmw.pid,
                        "/mcp",
                        tool,
                        era,
                    )
                )
        for row in rows:
            await row.prepare()
            await row.round(min(args.calls, 500), args.connections)  # warm-up, not counted
            row.rates.clear()
            row.cpu_us.clear()
        for _ in range(args.rounds):
            for row in rows:
                await row.round(args.calls, args.connections)
    finally:
        for process in (floor, agentmw):
            process.terminate()
            process.wait(10)
    base = statistics.median(rows[0].rates)
    print(
        f"`tools/call` over loopback with uvicorn ({args.connections} kept-alive connections), "
        f"{args.calls} calls per row and round, median of {args.rounds} interleaved rounds\n"
    )
    print("| server | req/s | ratio to floor | rounds' ratios (min–max) | server CPU µs/call | CPU ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    floor_rates, floor_cpu = rows[0].rates, statistics.median(rows[0].cpu_us)
    for row in rows:
        per_round = [r / f for r, f in zip(row.rates, floor_rates, strict=True)]
        median, cpu = statistics.median(row.rates), statistics.median(row.cpu_us)
        spread = f"{min(per_round):.2f}–{max(per_round):.2f}"
        print(
            f"| {row.name} | {median:,.0f} | **{median / base:.2f}×** | {spread} | {cpu:.0f} | "
            f"{floor_cpu / cpu:.2f}× |"
        )


if __name__ == "__main__":
    asyncio.run(main())
