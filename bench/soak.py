"""Soak: the example app under a mixed, partly hostile load, and how much memory it holds afterwards.

Starts ``examples.fastapi_app.main:app`` with uvicorn in a subprocess (its own SQLite file in a temporary
folder), sends ``--requests`` requests (100,000 by default) from ``--clients`` concurrent httpx clients,
then waits ``--idle`` seconds. Reports the server's resident memory (``VmRSS`` from ``/proc/<pid>/status``)
before the load, its peak during it, right after it, and after the idle wait; plus the status codes seen.

The mix cycles through, in equal shares: MCP handshake era (``initialize`` opening a new session, a tool
call on a recent session, malformed requests), MCP stateless era (tool call, ``tools/list``, malformed
requests), A2A JSON-RPC (a task that completes, a task left waiting for input, malformed requests), A2A
HTTP+JSON (a send, a lookup of an unknown task), and AG-UI (a run on a new thread that completes, a run on
a new thread left waiting for arguments, a malformed run). Every id a client chooses is new, so every
table the server keeps per id is exercised. Linux only (``/proc``).

``python bench/soak.py`` (``--requests 5000 --idle 5`` for a quick run).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
ACCEPT = "application/json, text/event-stream"
HANDSHAKE = "2025-11-25"
STATELESS = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
}
LIMIT_MB = 300


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def uid() -> str:
    return uuid.uuid4().hex


def rpc(method: str, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def a2a_message(text: str, **extra: Any) -> dict[str, Any]:
    return {"messageId": uid(), "role": "ROLE_USER", "parts": [{"text": text}], **extra}


class Load:
    """One request per call of ``send(i)``; the kind is ``i`` modulo the mix."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.sessions: collections.deque[str] = collections.deque(maxlen=16)
        self.statuses: collections.Counter[str] = collections.Counter()
        self.mix = [
            self.h_initialize,
            self.h_call,
            self.h_malformed,
            self.s_call,
            self.s_list,
            self.s_malformed,
            self.a_done,
            self.a_waiting,
            self.a_malformed,
            self.r_send,
            self.r_unknown,
            self.g_done,
            self.g_waiting,
            self.g_malformed,
        ]
        self.variants: collections.Counter[str] = collections.Counter()

    async def send(self, i: int) -> None:
        kind = self.mix[i % len(self.mix)]
        try:
            response = await kind()
            status = str(response.status_code)
            if response.headers.get("content-type", "").startswith("application/json"):
                body = response.json()
                if isinstance(body, dict) and isinstance(body.get("error"), dict):
                    status += f" (error {body['error'].get('code')})"
            elif kind.__name__.startswith("g_") and response.status_code == 200:
                status += " RUN_FINISHED" if b"RUN_FINISHED" in response.content else " no RUN_FINISHED"
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        self.statuses[f"{kind.__name__} {status}"] += 1

    def variant(self, kind: str, count: int) -> int:
        self.variants[kind] += 1
        return self.variants[kind] % count

    async def post(
        self, path: str, body: Any, headers: dict[str, str] | None = None, *, raw: bool = False
    ) -> httpx.Response:
        content = body if raw else json.dumps(body)
        return await self.client.post(
            path, content=content, headers={"content-type": "application/json", **(headers or {})}
        )

    # --- MCP, handshake era --------------------------------------------------------------------------
    async def h_initialize(self) -> httpx.Response:
        response = await self.post(
            "/mcp",
            rpc(
                "initialize",
                {
                    "protocolVersion": HANDSHAKE,
                    "capabilities": {},
                    "clientInfo": {"name": f"soak-{uid()}", "version": "0"},
                },
            ),
            {"accept": ACCEPT},
        )
        session = response.headers.get("mcp-session-id")
        if session:
            self.sessions.append(session)
        return response

    async def h_call(self) -> httpx.Response:
        if not self.sessions:
            return await self.h_initialize()
        response = await self.post(
            "/mcp",
            rpc("tools/call", {"name": "search_assets", "arguments": {"query": "laptop"}}, uid()),
            {"accept": ACCEPT, "mcp-session-id": self.sessions[-1], "mcp-protocol-version": HANDSHAKE},
        )
        return response

    async def h_malformed(self) -> httpx.Response:
        session = {"mcp-session-id": self.sessions[-1]} if self.sessions else {}
        headers = {"accept": ACCEPT, "mcp-protocol-version": HANDSHAKE, **session}
        variant = self.variant("h", 8)
        bodies: list[Any] = [
            "{nope",
            "[" + json.dumps(rpc("ping")) + "]",
            '{"jsonrpc":"2.0","id":true,"method":"x"}',
            '{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}',
            '{"jsonrpc":"2.0","id":[1],"method":"tools/list"}',
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_assets","arguments":NaN}}',
            '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
            b'{"jsonrpc":"2.0","id":"\xed\xa0\x80","method":"ping"}',
        ]
        if variant == 0:
            headers["mcp-session-id"] = uid()  # an unknown session
        return await self.post("/mcp", bodies[variant], headers, raw=True)

    # --- MCP, stateless era --------------------------------------------------------------------------
    def stateless_headers(self, method: str, name: str | None = None) -> dict[str, str]:
        headers = {"accept": ACCEPT, "mcp-protocol-version": STATELESS, "mcp-method": method}
        if name is not None:
            headers["mcp-name"] = name
        return headers

    async def s_call(self) -> httpx.Response:
        body = rpc(
            "tools/call", {"_meta": META, "name": "search_assets", "arguments": {"query": "monitor"}}, uid()
        )
        return await self.post("/mcp", body, self.stateless_headers("tools/call", "search_assets"))

    async def s_list(self) -> httpx.Response:
        return await self.post(
            "/mcp", rpc("tools/list", {"_meta": META}, uid()), self.stateless_headers("tools/list")
        )

    async def s_malformed(self) -> httpx.Response:
        variant = self.variant("s", 6)
        cases: list[tuple[Any, dict[str, str]]] = [
            ("{bad", self.stateless_headers("tools/list")),
            (json.dumps(rpc("tools/list", {})), self.stateless_headers("tools/list")),
            (json.dumps(rpc("tools/list", {"_meta": META}, None)), self.stateless_headers("tools/list")),
            (
                json.dumps(rpc("tools/call", {"_meta": META, "name": "search_assets", "arguments": {}})),
                self.stateless_headers("tools/call", "other"),
            ),
            (
                json.dumps(
                    rpc(
                        "tools/call",
                        {
                            "_meta": META,
                            "name": "read_policy",
                            "arguments": {"path": "../x"},
                            "requestState": "Zm9v.YmFy",
                        },
                    )
                ),
                self.stateless_headers("tools/call", "read_policy"),
            ),
            (
                '{"jsonrpc":"2.0","id":1e400,"method":"tools/list","params":{}}',
                self.stateless_headers("tools/list"),
            ),
        ]
        body, headers = cases[variant]
        return await self.post("/mcp", body, headers, raw=True)

    # --- A2A -----------------------------------------------------------------------------------------
    async def a_done(self) -> httpx.Response:
        message = a2a_message("laptop", metadata={"skill": "procurement_assistant", "tool": "search_assets"})
        message["parts"] = [{"data": {"query": "laptop"}}]
        return await self.post(
            "/a2a", rpc("SendMessage", {"message": message}, uid()), {"a2a-version": "1.0"}
        )

    async def a_waiting(self) -> httpx.Response:
        message = a2a_message("please approve", metadata={"skill": "approve_purchase"}, contextId=uid())
        return await self.post(
            "/a2a", rpc("SendMessage", {"message": message}, uid()), {"a2a-version": "1.0"}
        )

    async def a_malformed(self) -> httpx.Response:
        variant = self.variant("a", 8)
        bodies: list[Any] = [
            "{nope",
            json.dumps(rpc("SendMessage", {"message": a2a_message("x")}, 1.5)),
            json.dumps(rpc("SendMessage", "params as a string")),
            json.dumps(rpc("GetTask", {"id": uid()})),
            json.dumps(rpc("SendMessage", {"message": {**a2a_message("x"), "role": []}})),
            (
                '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"\\ud800",'
                '"role":"ROLE_USER","parts":[{"text":"\\ud800"}]}}}'
            ),
            json.dumps(rpc("ListTasks", {"pageSize": 0})),
            json.dumps(
                rpc("SendMessage", {"message": a2a_message("x"), "configuration": {"historyLength": 1e400}})
            ),
        ]
        return await self.post("/a2a", bodies[variant], {"a2a-version": "1.0"}, raw=True)

    async def r_send(self) -> httpx.Response:
        message = a2a_message("laptop", metadata={"skill": "procurement_assistant", "tool": "search_assets"})
        message["parts"] = [{"data": {"query": "dock"}}]
        return await self.post("/a2a/message:send", {"message": message}, {"a2a-version": "1.0"})

    async def r_unknown(self) -> httpx.Response:
        return await self.client.get(f"/a2a/tasks/{uid()}", headers={"a2a-version": "1.0"})

    # --- AG-UI ---------------------------------------------------------------------------------------
    async def g_done(self) -> httpx.Response:
        body = {
            "threadId": uid(),
            "runId": uid(),
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
            "messages": [{"id": uid(), "role": "user", "content": "Buy 100 laptops for design"}],
        }
        return await self.post("/agui/procurement_assistant", body, {"accept": "text/event-stream"})

    async def g_waiting(self) -> httpx.Response:
        body = {
            "threadId": uid(),
            "runId": uid(),
            "state": {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
            "messages": [{"id": uid(), "role": "user", "content": "approve it"}],
        }
        return await self.post("/agui/approve_purchase", body, {"accept": "text/event-stream"})

    async def g_malformed(self) -> httpx.Response:
        variant = self.variant("g", 3)
        bodies = [
            "{nope",
            json.dumps({"threadId": uid()}),
            json.dumps(
                {
                    "threadId": uid(),
                    "runId": uid(),
                    "state": {"x": float("nan")},
                    "messages": [],
                    "tools": [],
                    "context": [],
                    "forwardedProps": {},
                }
            ),
        ]
        return await self.post("/agui/procurement_assistant", bodies[variant], raw=True)


async def drive(
    base: str, total: int, clients: int, pid: int
) -> tuple[collections.Counter[str], float, float]:
    counter = itertools.count()
    peak = 0.0
    done = 0
    start = time.perf_counter()
    limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)

    async def worker() -> collections.Counter[str]:
        nonlocal done
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
            load = Load(client)
            while (i := next(counter)) < total:
                await load.send(i)
                done += 1
            return load.statuses

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, rss_mb(pid))
            print(
                f"  {done:>7,} requests, {time.perf_counter() - start:6.0f} s, RSS {rss_mb(pid):6.1f} MB",
                file=sys.stderr,
                flush=True,
            )
            await asyncio.sleep(10)

    sampler = asyncio.ensure_future(sample())
    results = await asyncio.gather(*(worker() for _ in range(clients)))
    elapsed = time.perf_counter() - start
    sampler.cancel()
    statuses: collections.Counter[str] = collections.Counter()
    for result in results:
        statuses.update(result)
    return statuses, elapsed, max(peak, rss_mb(pid))


def print_tables(rss: tuple[tuple[str, float], ...], statuses: collections.Counter[str]) -> int:
    """The RSS and status tables of a soak, in Markdown; the count of 5xx answers other than 503."""
    print("| server RSS | MB |")
    print("|---|---:|")
    for name, value in rss:
        print(f"| {name} | {value:.1f} |")
    print("\n| request kind, status | count |")
    print("|---|---:|")
    for key, count in sorted(statuses.items()):
        print(f"| {key} | {count:,} |")
    return sum(c for k, c in statuses.items() if k.split()[1].startswith("5") and k.split()[1] != "503")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds to wait after the load")
    args = parser.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        env = {**os.environ, "PROCUREMENT_DB": str(Path(tmp) / "soak.db"), "PYTHONPATH": str(ROOT)}
        server_log = stack.enter_context(open(Path(tmp) / "server.log", "wb"))  # the child writes it
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "examples.fastapi_app.main:app",
                "--port",
                str(port),
                "--log-level",
                "critical",
                "--no-access-log",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=server_log,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    print((Path(tmp) / "server.log").read_text(), file=sys.stderr)
                    raise SystemExit("the example app did not start")
                time.sleep(0.2)
            before = rss_mb(server.pid)
            statuses, elapsed, peak = asyncio.run(drive(base, args.requests, args.clients, server.pid))
            after = rss_mb(server.pid)
            time.sleep(args.idle)
            idle = rss_mb(server.pid)
            alive = server.poll() is None
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
        log = (Path(tmp) / "server.log").read_text(errors="replace")
    tracebacks = log.count("Traceback")
    print(
        f"Soak of the example app: {args.requests:,} requests from {args.clients} clients in {elapsed:.0f} s "
        f"({args.requests / elapsed:,.0f} req/s), then {args.idle:g} s idle\n"
    )
    server_errors = print_tables(
        (
            ("before the load", before),
            ("peak during the load", peak),
            ("after the load", after),
            (f"after {args.idle:g} s idle", idle),
        ),
        statuses,
    )
    full = sum(c for k, c in statuses.items() if k.split()[1] == "503")
    print(
        f"\n5xx answers other than 503: {server_errors}; 503 (session table full, by design): {full}; "
        f"tracebacks in the server log: {tracebacks}; server alive: {alive}"
    )
    ok = max(peak, after, idle) < LIMIT_MB and alive
    print(
        f"{'PASS' if ok else 'FAIL'}: the example stays under {LIMIT_MB} MB"
        if ok
        else f"FAIL: the example went over {LIMIT_MB} MB"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
