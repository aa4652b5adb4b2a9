"""Host-route passthrough: what ``AgentMiddleware`` costs a request that is not for the agent.

The same Starlette app serves ``GET /ping``: bare, and with ``AgentMiddleware`` in front (an agent with one
tool); then both again with the app's own ``CORSMiddleware`` (below ``AgentMiddleware``, which adopts it for the
agent's paths). Each request is driven in-process through the ASGI interface, so the figure is the app's own
cost; the rows are measured in interleaved rounds, each row's figure is its best round, and the ratio compares
each ``AgentMiddleware`` row with the bare app beside it.

Run ``python bench/passthrough.py`` (``--quick`` for a short run); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any


def host_app(*, agent: bool, cors: bool = False) -> Any:
    from starlette.applications import Starlette
    from starlette.middleware.cors import CORSMiddleware
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from agentmw import Agent, AgentMiddleware

    async def ping(request: Any) -> PlainTextResponse:
        return PlainTextResponse("pong")

    app = Starlette(routes=[Route("/ping", ping)])
    if cors:
        app.add_middleware(CORSMiddleware, allow_origins=["http://app.example"])
    if agent:
        served = Agent("bench", store="memory://")

        @served.tool
        async def add(a: int, b: int) -> int:
            return a + b

        app.add_middleware(AgentMiddleware, agent=served)
    return app


_SCOPE = {
    "type": "http",
    "asgi": {"version": "3.0"},
    "http_version": "1.1",
    "method": "GET",
    "scheme": "http",
    "path": "/ping",
    "raw_path": b"/ping",
    "root_path": "",
    "query_string": b"",
    "headers": [(b"host", b"127.0.0.1:8000"), (b"accept", b"*/*")],
    "client": ("127.0.0.1", 50000),
    "server": ("127.0.0.1", 8000),
}


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def rate(app: Any, n: int) -> float:
    """GET /ping ``n`` times, one after the other; requests per second."""
    answers: list[Any] = [None, None]

    async def sent(message: dict[str, Any]) -> None:
        answers[message["type"] == "http.response.body"] = message

    start = time.perf_counter()
    for _ in range(n):
        await app({**_SCOPE, "state": {}}, _receive, sent)
    elapsed = time.perf_counter() - start
    assert answers[0]["status"] == 200 and answers[1]["body"] == b"pong", answers
    return n / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n, rounds = (3000, 5) if args.quick else (20000, 7)
    pairs = {
        "no CORS": (host_app(agent=False), host_app(agent=True)),
        "CORSMiddleware": (host_app(agent=False, cors=True), host_app(agent=True, cors=True)),
    }
    best = {(group, which): 0.0 for group in pairs for which in (0, 1)}
    for group, apps in pairs.items():
        for app in apps:
            await rate(app, 200)  # warm up: the middleware stack is built on the first request
    for _ in range(rounds):
        for group, apps in pairs.items():
            for which, app in enumerate(apps):
                best[group, which] = max(best[group, which], await rate(app, n))
    print("| app | bare req/s | with AgentMiddleware req/s | ratio |\n|---|---:|---:|---:|")
    for group in pairs:
        bare, with_agent = best[group, 0], best[group, 1]
        print(f"| Starlette, {group} | {bare:,.0f} | {with_agent:,.0f} | {with_agent / bare:.2f}x |")


if __name__ == "__main__":
    asyncio.run(main())
