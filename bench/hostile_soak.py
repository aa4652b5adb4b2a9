"""Hostile soak: the example app under large, hostile bodies, and whether its memory comes back afterwards.

Starts ``examples.fastapi_app.main:app`` with uvicorn on 127.0.0.1 (its own SQLite state in a temporary
folder), sends at most ``--requests`` requests for at most ``--seconds`` seconds from ``--clients`` concurrent
clients, then waits ``--idle`` seconds and stops the server. Every body is as large as the server accepts
(just under its 4 MiB limit) or is built to multiply inside the server, and every id is new, so each table
the server keeps per client-chosen id sees the worst case:

- A2A ``SendMessage`` of one 3.5 MiB text part (to a skill that completes, and to one that asks for input, so
  the task stays parked), and of 250,000 empty text parts;
- AG-UI runs on new threads with a 1 MiB ``state``, with 1 MiB of message text, and with 60,000 messages;
- MCP handshake-era ``initialize`` with a 1 MiB ``clientInfo``, and stateless ``tools/call`` with 1 MiB of
  arguments;
- interleaved, the small malformed requests of ``bench/soak.py``.

It samples the server's resident memory (``VmRSS``) every second during the load and reports: before, the peak
during the load, right after it, and after the idle wait; the status codes seen, and whether the server log holds
a traceback. Exit status 0 when the peak and the memory after idle stay under ``--limit-mb`` (300 MB).
Linux only (``/proc``). ``python bench/hostile_soak.py`` (``--requests 300 --idle 10`` for a quick run).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from soak import (
    ACCEPT,
    HANDSHAKE,
    META,
    ROOT,
    STATELESS,
    Load,
    a2a_message,
    free_port,
    print_tables,
    rpc,
    rss_mb,
    uid,
)

MIB = 1024 * 1024
BIG_TEXT = "x" * (3 * MIB + MIB // 2)
STATE_MIB = {f"k{i}": "v" * 1000 for i in range(1024)}  # about 1 MiB of state in 1,024 keys


class Hostile:
    """One hostile request per call of ``send(i)``, cycling through the kinds; every id is new."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.small = Load(client)
        self.statuses: collections.Counter[str] = collections.Counter()
        self.kinds = [
            self.a2a_big_text,
            self.a2a_parked_big,
            self.a2a_many_parts,
            self.agui_big_state,
            self.agui_big_text,
            self.agui_many_messages,
            self.mcp_big_initialize,
            self.mcp_big_arguments,
            self.small_malformed,
        ]

    async def send(self, i: int) -> None:
        kind = self.kinds[i % len(self.kinds)]
        try:
            response = await kind()
            status = str(response.status_code)
            if response.headers.get("content-type", "").startswith("application/json"):
                body = response.json()
                if isinstance(body, dict) and isinstance(body.get("error"), dict):
                    status += f" (error {body['error'].get('code')})"
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        self.statuses[f"{kind.__name__} {status}"] += 1

    async def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        return await self.small.post(path, body, headers)

    # --- A2A -------------------------------------------------------------------------------------------
    async def a2a_big_text(self) -> httpx.Response:
        message = a2a_message(BIG_TEXT, metadata={"skill": "procurement_assistant"})
        return await self.post(
            "/a2a", rpc("SendMessage", {"message": message}, uid()), {"a2a-version": "1.0"}
        )

    async def a2a_parked_big(self) -> httpx.Response:
        message = a2a_message(BIG_TEXT, metadata={"skill": "approve_purchase"}, contextId=uid())
        return await self.post(
            "/a2a", rpc("SendMessage", {"message": message}, uid()), {"a2a-version": "1.0"}
        )

    async def a2a_many_parts(self) -> httpx.Response:
        message = a2a_message("", metadata={"skill": "procurement_assistant"})
        message["parts"] = [{"text": ""}] * 250_000
        return await self.post(
            "/a2a", rpc("SendMessage", {"message": message}, uid()), {"a2a-version": "1.0"}
        )

    # --- AG-UI -----------------------------------------------------------------------------------------
    def run(self, messages: list[dict[str, Any]], state: Any = None) -> dict[str, Any]:
        return {
            "threadId": uid(),
            "runId": uid(),
            "state": state or {},
            "tools": [],
            "context": [],
            "forwardedProps": {},
            "messages": messages,
        }

    async def agui(self, body: dict[str, Any]) -> httpx.Response:
        return await self.post("/agui/procurement_assistant", body, {"accept": "text/event-stream"})

    async def agui_big_state(self) -> httpx.Response:
        return await self.agui(
            self.run([{"id": uid(), "role": "user", "content": "Buy 2 monitors"}], STATE_MIB)
        )

    async def agui_big_text(self) -> httpx.Response:
        return await self.agui(self.run([{"id": uid(), "role": "user", "content": "Buy " + "x" * MIB}]))

    async def agui_many_messages(self) -> httpx.Response:
        return await self.agui(
            self.run([{"id": str(n), "role": "user", "content": "hi"} for n in range(60_000)])
        )

    # --- MCP -------------------------------------------------------------------------------------------
    async def mcp_big_initialize(self) -> httpx.Response:
        info = {"name": "hostile", "version": "0", "title": "x" * MIB}
        return await self.post(
            "/mcp",
            rpc("initialize", {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": info}),
            {"accept": ACCEPT},
        )

    async def mcp_big_arguments(self) -> httpx.Response:
        body = rpc(
            "tools/call", {"_meta": META, "name": "search_assets", "arguments": {"query": "x" * MIB}}, uid()
        )
        return await self.post(
            "/mcp",
            body,
            {
                "accept": ACCEPT,
                "mcp-protocol-version": STATELESS,
                "mcp-method": "tools/call",
                "mcp-name": "search_assets",
            },
        )

    async def small_malformed(self) -> httpx.Response:
        kinds = (
            self.small.h_malformed,
            self.small.s_malformed,
            self.small.a_malformed,
            self.small.g_malformed,
        )
        return await kinds[int(uid(), 16) % len(kinds)]()


async def drive(
    base: str, total: int, seconds: float, clients: int, pid: int
) -> tuple[collections.Counter[str], int, float, float]:
    counter = itertools.count()
    stop_at = time.monotonic() + seconds
    peak = rss_mb(pid)
    done = 0
    start = time.perf_counter()

    async def worker() -> collections.Counter[str]:
        nonlocal done
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
            load = Hostile(client)
            while (i := next(counter)) < total and time.monotonic() < stop_at:
                await load.send(i)
                done += 1
            return load.statuses

    async def sample() -> None:
        nonlocal peak
        tick = 0
        while True:
            peak = max(peak, rss_mb(pid))
            if tick % 10 == 0:
                print(
                    f"  {done:>6,} requests, {time.perf_counter() - start:5.0f} s, RSS {rss_mb(pid):7.1f} MB",
                    file=sys.stderr,
                    flush=True,
                )
            tick += 1
            await asyncio.sleep(1)

    sampler = asyncio.ensure_future(sample())
    results = await asyncio.gather(*(worker() for _ in range(clients)))
    elapsed = time.perf_counter() - start
    sampler.cancel()
    statuses: collections.Counter[str] = collections.Counter()
    for result in results:
        statuses.update(result)
    return statuses, done, elapsed, max(peak, rss_mb(pid))


def wait_healthy(base: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            print(log.read_text(errors="replace"), file=sys.stderr)
            raise SystemExit("the example app did not start")
        time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2_000, help="at most this many requests")
    parser.add_argument("--seconds", type=float, default=300.0, help="at most this long under load")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds to wait after the load")
    parser.add_argument("--limit-mb", type=float, default=300.0)
    args = parser.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        env = {**os.environ, "AGENTMW_STORE": f"sqlite:///{tmp}/state.db", "PYTHONPATH": str(ROOT)}
        env.pop("OTEL_TRACES_EXPORTER", None)
        with open(log, "wb") as log_file:
            server = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "examples.fastapi_app.main:app",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--log-level",
                    "warning",
                    "--no-access-log",
                ],
                cwd=Path(tmp),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
            )
        try:
            wait_healthy(base, server, log)
            before = rss_mb(server.pid)
            statuses, done, elapsed, peak = asyncio.run(
                drive(base, args.requests, args.seconds, args.clients, server.pid)
            )
            after = rss_mb(server.pid)
            idle_peak = after
            idle_until = time.monotonic() + args.idle
            while time.monotonic() < idle_until:
                time.sleep(1)
                idle_peak = max(idle_peak, rss_mb(server.pid))
            idle = rss_mb(server.pid)
            alive = server.poll() is None
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(10)
        text = log.read_text(errors="replace")
    tracebacks = text.count("Traceback")
    if tracebacks:
        start = text.index("Traceback")
        print(
            "The server's first traceback:\n" + text[max(0, start - 300) : start + 3000] + "\n",
            file=sys.stderr,
        )
    print(
        f"Hostile soak of the example app: {done:,} requests from {args.clients} clients in {elapsed:.0f} s, "
        f"then {args.idle:g} s idle\n"
    )
    server_errors = print_tables(
        (
            ("before the load", before),
            ("peak during the load", peak),
            ("right after the load", after),
            (f"after {args.idle:g} s idle", idle),
        ),
        statuses,
    )
    print(
        f"\n5xx answers other than 503: {server_errors}; tracebacks in the server log: {tracebacks}; "
        f"server alive: {alive}"
    )
    ok = max(peak, idle_peak) < args.limit_mb and alive
    print(
        f"PASS: under {args.limit_mb:g} MB during and after"
        if ok
        else f"FAIL: peak {peak:.0f} MB, {idle:.0f} MB after idle (limit {args.limit_mb:g} MB)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
