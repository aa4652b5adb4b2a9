"""The largest request bodies the MCP, A2A and AG-UI faces accept, and how long each holds the event loop.

For each shape of body that multiplies (parts, messages, content parts, tool calls, state and metadata values,
tools, context entries), the bench builds the largest body the default limits accept
(``Limits(max_body_bytes=, max_body_values=, max_body_depth=)``,
``AguiSettings(max_messages=, max_state_bytes=, max_values=)``, ``A2ASettings(max_parts=)``, docs/limits.md),
and a few that they refuse. Each is sent in-process through the ASGI interface while a probe task ticks every
millisecond: its longest gap is how long the loop could not serve anything else (a ``/health`` behind it would
have waited as long). Rows are the median and the worst of the rounds, after one warm-up round.

Run ``python bench/body_limits.py`` (``--rounds 3`` for a short run); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("AGENTMW_STORE", "memory://")
MODERN = "2026-07-28"
MCP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": MODERN,
    "mcp-method": "tools/call",
    "mcp-name": "count",
}


def build() -> tuple[Any, Any]:
    from starlette.applications import Starlette

    from agentmw import Agent, AgentMiddleware

    agent = Agent("bench-bodies", store="memory://")

    @agent.skill
    async def echo(text: str = "") -> str:
        """Echo text back.

        Summary:
            Repeats what it is told.
        """
        return text[:10]

    @agent.tool
    async def count(rows: list[Any]) -> int:
        """Count the rows."""
        return len(rows)

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


def a2a(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "@ID@", "role": "ROLE_USER", **message}},
    }


def mcp(arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "count",
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }


def agui(**fields: Any) -> dict[str, Any]:
    return {
        "threadId": "@ID@",
        "runId": "@ID@",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": "u", "role": "user", "content": "hi"}],
        **fields,
    }


def user_messages(n: int, content: Callable[[int], Any]) -> list[dict[str, Any]]:
    return [{"id": f"u{i}", "role": "user", "content": content(i)} for i in range(n)]


def assistant_turns(n: int) -> list[dict[str, Any]]:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [{"id": f"a{i}", "role": "assistant", "content": "x", "toolCalls": [call, call]} for i in range(n)]


# name -> (face, body for a count n, the most n any limit but the values budget allows)
SHAPES: dict[str, tuple[str, Callable[[int], dict[str, Any]], int]] = {
    "MCP: tools/call argument values": ("mcp", lambda n: mcp({"rows": list(range(n))}), 1 << 30),
    "MCP: tools/call argument objects": ("mcp", lambda n: mcp({"rows": [{"a": 1, "b": "x"}] * n}), 1 << 30),
    "A2A: text parts": ("a2a", lambda n: a2a({"parts": [{"text": "x"}] * n}), 1_000),
    "A2A: 1,000 parts of 1.9 KiB": (
        "a2a",
        lambda n: a2a({"parts": [{"text": "x" * 1_900}] * min(n, 1_000)}),
        1_000,
    ),
    "A2A: metadata values": (
        "a2a",
        lambda n: a2a({"parts": [{"text": "x"}], "metadata": {"x": list(range(n))}}),
        1 << 30,
    ),
    "A2A: data part objects": (
        "a2a",
        lambda n: a2a({"parts": [{"data": {"rows": [{"a": 1, "b": "x"}] * n}}]}),
        1 << 30,
    ),
    "AG-UI: messages": ("agui", lambda n: agui(messages=user_messages(n, lambda i: f"m{i}")), 250),
    "AG-UI: messages of 4 content parts": (
        "agui",
        lambda n: agui(messages=user_messages(n, lambda i: [{"type": "text", "text": "hi"}] * 4)),
        250,
    ),
    "AG-UI: assistant turns with 2 tool calls": ("agui", lambda n: agui(messages=assistant_turns(n)), 250),
    "AG-UI: state values": ("agui", lambda n: agui(state={"x": list(range(n))}), 1 << 30),
    "AG-UI: state objects": ("agui", lambda n: agui(state={"rows": [{"a": 1, "b": "x"}] * n}), 1 << 30),
    "AG-UI: state of one 250 KiB string": ("agui", lambda n: agui(state={"x": "y" * 250_000}), 1),
    "AG-UI: forwardedProps values": ("agui", lambda n: agui(forwardedProps={"x": list(range(n))}), 1 << 30),
    "AG-UI: context entries": (
        "agui",
        lambda n: agui(context=[{"description": "d", "value": "v"}] * n),
        1 << 30,
    ),
    "AG-UI: tools": (
        "agui",
        lambda n: agui(tools=[{"name": f"t{i}", "description": "", "parameters": {}} for i in range(n)]),
        1 << 30,
    ),
}
REFUSED: dict[str, tuple[str, bytes]] = {
    "A2A: 300,000 parts (issue 22)": (
        "a2a",
        json.dumps(a2a({"parts": [{"text": ""}] * 300_000}), separators=(",", ":")).encode(),
    ),
    "AG-UI: 90,000 messages (issue 22)": (
        "agui",
        json.dumps(agui(messages=user_messages(90_000, lambda i: "")), separators=(",", ":")).encode(),
    ),
    "AG-UI: 4 MiB of nested empty arrays": (
        "agui",
        b'{"threadId":"@ID@","runId":"@ID@","state":{"x":['
        + b",".join([b"[]"] * 1_300_000)
        + b']},"messages":[]}',
    ),
    "MCP: arguments nested 5,000 levels": (
        "mcp",
        json.dumps(mcp({"rows": "@D@"})).encode().replace(b'"@D@"', b"[" * 5_000 + b"]" * 5_000),
    ),
    "A2A: metadata nested 5,000 levels": (
        "a2a",
        json.dumps(a2a({"parts": [{"text": "x"}], "metadata": "@D@"}))
        .encode()
        .replace(b'"@D@"', b'{"a":' * 5_000 + b"1" + b"}" * 5_000),
    ),
}


def encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def face_app(agent: Any, face: str) -> Any:
    return {"mcp": agent.mcp, "a2a": agent.a2a_app, "agui": agent.agui_app}[face]


def largest(agent: Any, face: str, make: Callable[[int], dict[str, Any]], most: int) -> tuple[int, bytes]:
    """The largest n whose body the face's body shape accepts (and at most ``most``)."""
    from agentmw._shape import ShapeError, check_shape

    served = face_app(agent, face)  # the face behind its edge: the shape and the byte limit it applies
    shape, limit = served.body_shape, served.body_limit

    def fits(n: int) -> bool:
        raw = encode(make(n))
        try:
            check_shape(raw, shape)
        except ShapeError:
            return False
        return len(raw) <= limit

    low, high = 1, min(most, 1 << 20)
    if fits(high):
        return high, encode(make(high))
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low, encode(make(low))


async def probe_gap(stop: asyncio.Event) -> float:
    """The longest the loop went without running this task, while ``stop`` is unset."""
    worst, last = 0.0, time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        worst, last = max(worst, now - last), now
    return worst


async def measure(app: Any, face: str, raw: bytes, rounds: int) -> tuple[float, float, float, str]:
    import httpx

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    totals: list[float] = []
    gaps: list[float] = []
    verdict = ""
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=120) as http:
        for index in range(rounds + 1):
            body = raw.replace(b"@ID@", f"bench-{index}-{time.time_ns()}".encode())
            stop = asyncio.Event()
            gap = asyncio.ensure_future(probe_gap(stop))
            await asyncio.sleep(0.002)
            started = time.perf_counter()
            if face == "mcp":
                response = await http.post("/mcp", content=body, headers=MCP_HEADERS)
                answer = response.json()
                verdict = "ran" if "result" in answer else f"{answer['error']['code']}"
            elif face == "a2a":
                response = await http.post(
                    "/a2a", content=body, headers={"a2a-version": "1.0", "content-type": "application/json"}
                )
                answer = response.json()
                verdict = "ran" if "result" in answer else f"{answer['error']['code']}"
            else:
                response = await http.post(
                    "/agui/echo", content=body, headers={"content-type": "application/json"}
                )
                verdict = "ran" if response.status_code == 200 else str(response.status_code)
            elapsed = time.perf_counter() - started
            stop.set()
            worst_gap = await gap
            if index:  # the first round warms the validators up
                totals.append(elapsed)
                gaps.append(worst_gap)
    return statistics.median(totals), max(totals), max(gaps), verdict


async def main(rounds: int) -> None:
    agent, app = build()
    print(
        f"defaults: {face_app(agent, 'mcp').body_shape}, AG-UI {face_app(agent, 'agui').body_shape}, "
        f"max_body_bytes={face_app(agent, 'mcp').body_limit}, AG-UI max_messages={agent.agui.max_messages}, "
        f"max_state_bytes={agent.agui.max_state_bytes}, max_parts={agent.a2a.max_parts}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n"
    )
    print("| body | count | bytes | answer | median ms | worst ms | longest loop stall ms |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for name, (face, make, most) in SHAPES.items():
        count, raw = largest(agent, face, make, most)
        median, worst, gap, verdict = await measure(app, face, raw, rounds)
        print(
            f"| {name} | {count:,} | {len(raw):,} | {verdict} | {median * 1e3:.1f} | {worst * 1e3:.1f} | "
            f"{gap * 1e3:.1f} |"
        )
    for name, (face, raw) in REFUSED.items():
        median, worst, gap, verdict = await measure(app, face, raw, rounds)
        print(
            f"| {name} | | {len(raw):,} | {verdict} | {median * 1e3:.1f} | {worst * 1e3:.1f} | {gap * 1e3:.1f} |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    asyncio.run(main(parser.parse_args().rounds))
