"""Drive an ASGI app in-process, the way a server would, so benchmarks measure the app and nothing else."""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from typing import Any


class Driver:
    def __init__(self, app: Any, path: str = "/mcp") -> None:
        self.app = app
        self.path = path

    async def post(
        self, body: bytes, headers: list[tuple[bytes, bytes]]
    ) -> tuple[int, dict[str, str], bytes]:
        return await self.request("POST", self.path, body, headers)

    async def request(
        self, method: str, path: str, body: bytes, headers: list[tuple[bytes, bytes]]
    ) -> tuple[int, dict[str, str], bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"127.0.0.1:8000"), *headers],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        done = asyncio.Event()
        sent = False
        status = 0
        response_headers: dict[str, str] = {}
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                response_headers.update({k.decode(): v.decode() for k, v in message.get("headers", [])})
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    done.set()

        await self.app(scope, receive, send)
        return status, response_headers, b"".join(chunks)


async def lifespan(stack: AsyncExitStack, app: Any) -> None:
    context = getattr(getattr(app, "router", None), "lifespan_context", None)
    if context is not None:
        await stack.enter_async_context(context(app))


def import_time(module: str, repeats: int = 7) -> float:
    """Median wall time, in ms, of a fresh interpreter importing ``module`` (minus a bare interpreter)."""

    def run(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    bare = statistics.median(run("pass") for _ in range(repeats))
    return (statistics.median(run(f"import {module}") for _ in range(repeats)) - bare) * 1000


async def best_rate(driver: Driver, batches: list[list[bytes]], headers: list[tuple[bytes, bytes]]) -> float:
    """Requests per second of the fastest batch, each batch posted in order."""
    best = 0.0
    for bodies in batches:
        start = time.perf_counter()
        for body in bodies:
            await driver.post(body, headers)
        best = max(best, len(bodies) / (time.perf_counter() - start))
    return best
