"""AG-UI: a run of 10,000 text deltas through agentmw, against a raw ``EventEncoder`` loop, in one run.

The raw loop is what a hand-written endpoint does: pydantic events encoded one by one into a Starlette
``StreamingResponse``. Both are driven in-process through ASGI; we count events per second over the
whole run and the time to the first body byte. ``python bench/agui_text_stream.py`` (``--quick``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

DELTAS = 10_000


def raw_app() -> Any:
    from ag_ui.core import (
        RunFinishedEvent,
        RunStartedEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
    )
    from ag_ui.encoder import EventEncoder

    async def endpoint(request: Request) -> StreamingResponse:
        body = await request.json()
        encoder = EventEncoder()
        count = body["forwardedProps"]["arguments"]["count"]

        async def events():
            yield encoder.encode(
                RunStartedEvent(thread_id=body["threadId"], run_id=body["runId"], protocol_version="1.0")
            )
            yield encoder.encode(TextMessageStartEvent(message_id="m1", role="assistant"))
            for i in range(count):
                yield encoder.encode(TextMessageContentEvent(message_id="m1", delta=f"{i} "))
            yield encoder.encode(TextMessageEndEvent(message_id="m1"))
            yield encoder.encode(RunFinishedEvent(thread_id=body["threadId"], run_id=body["runId"]))

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/agui/flood", endpoint, methods=["POST"])])


def agentmw_app() -> Any:
    from agentmw import Agent, AgentMiddleware, Context

    agent = Agent("bench")

    @agent.skill
    async def flood(count: int, ctx: Context) -> None:
        for i in range(count):
            await ctx.say(f"{i} ")

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


async def one_run(app: Any, run: int) -> tuple[float, float, int]:
    body = json.dumps(
        {
            "threadId": f"t{run}",
            "runId": f"r{run}",
            "messages": [],
            "state": {},
            "forwardedProps": {"arguments": {"count": DELTAS}},
        }
    ).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/agui/flood",
        "raw_path": b"/agui/flood",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    done = asyncio.Event()
    delivered = False
    first: float | None = None
    size = 0

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal first, size
        if message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            if chunk and first is None:
                first = time.perf_counter()
            size += chunk.count(b"data: ")
            if not message.get("more_body", False):
                done.set()

    start = time.perf_counter()
    await app(scope, receive, send)
    end = time.perf_counter()
    return end - start, (first or end) - start, size


async def measure(factory: Any, rounds: int) -> tuple[float, float]:
    app = factory()
    await one_run(app, -1)  # warm up
    best_rate, best_ttfb = 0.0, float("inf")
    for run in range(rounds):
        elapsed, ttfb, events = await one_run(app, run)
        assert events >= DELTAS, events
        best_rate = max(best_rate, events / elapsed)
        best_ttfb = min(best_ttfb, ttfb)
    return best_rate, best_ttfb


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    rounds = 2 if parser.parse_args().quick else 5
    raw = await measure(raw_app, rounds)
    ours = await measure(agentmw_app, rounds)
    print(f"A run of {DELTAS:,} text deltas, in-process ASGI, best of {rounds} runs\n")
    print("| server | events/s | ratio to raw loop | time to first byte |")
    print("|---|---:|---:|---:|")
    for name, (rate, ttfb) in (("raw EventEncoder loop (StreamingResponse)", raw), ("agentmw", ours)):
        print(f"| {name} | {rate:,.0f} | {rate / raw[0]:.2f}× | {ttfb * 1000:.2f} ms |")


if __name__ == "__main__":
    asyncio.run(main())
