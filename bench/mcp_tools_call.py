"""``tools/call`` throughput: agentmw and FastMCP beside a bare Starlette floor, in one run.

Every target is driven in-process through its ASGI interface (no sockets, no client library), so the
numbers are each server's own cost per request; ratios to the floor are what matters. Run it with
``python bench/mcp_tools_call.py`` (``--quick`` for a short run); it prints a Markdown table.

agentmw keeps handshake-era sessions in its state (memory here). ``--store URL`` (repeatable:
``sqlite://bench.db``, ``redis://127.0.0.1:6379/0``) adds two session rows per store: the usual one,
where the replica serves a session it saw less than ``SessionStore.cache_seconds`` ago from its cache, and
one with that cache off, where every call reads the session record (a balancer that never sends a session
to the same replica twice in a row).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

from _driver import Driver, best_rate, import_time, lifespan
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ACCEPT = (b"accept", b"application/json, text/event-stream")
JSON_CT = (b"content-type", b"application/json")


async def add(a: int, b: int) -> int:
    return a + b


# --- the floor: the same JSON-RPC work, by hand, in a plain Starlette route -------------------------


async def floor_endpoint(request: Request) -> JSONResponse:
    body = await request.json()
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0" or body.get("method") != "tools/call":
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "bad"}}, 400)
    params = body.get("params") or {}
    args = params.get("arguments") or {}
    if (
        params.get("name") != "add"
        or not isinstance(args.get("a"), int)
        or not isinstance(args.get("b"), int)
    ):
        return JSONResponse(
            {"jsonrpc": "2.0", "id": body.get("id"), "error": {"code": -32602, "message": "bad"}}
        )
    value = await add(args["a"], args["b"])
    structured = {"result": value}
    return JSONResponse(
        {
            "jsonrpc": "2.0",
            "id": body["id"],
            "result": {
                "content": [{"type": "text", "text": json.dumps(structured)}],
                "structuredContent": structured,
                "isError": False,
            },
        }
    )


def floor_app() -> Any:
    return Starlette(routes=[Route("/mcp", floor_endpoint, methods=["POST"])])


def agentmw_app(store: str = "memory://", cache: bool = True) -> Any:
    from agentmw import Agent, AgentMiddleware

    agent = Agent("bench", store=store)
    agent.tool(add)
    if not cache:
        agent.mcp.sessions.cache_seconds = 0.0  # every call reads the session record
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    app.state.agent = agent
    return app


def store_rows(store: str) -> list[tuple[str, Callable[[], Any], str]]:
    """The session rows of one ``--store``: with this replica's session cache, and with it off."""
    scheme = store.split(":", 1)[0]
    if scheme == "redis" and "prefix=" not in store:
        store += ("&" if "?" in store else "?") + f"prefix=bench{uuid.uuid4().hex[:8]}"
    return [
        (f"agentmw, {LEGACY} (session, {scheme})", lambda: agentmw_app(store), LEGACY),
        (
            f"agentmw, {LEGACY} (session, {scheme}, a read per call)",
            lambda: agentmw_app(store, cache=False),
            LEGACY,
        ),
    ]


def fastmcp_app() -> Any:
    from fastmcp import FastMCP

    server = FastMCP("bench")
    server.tool(add)
    return server.http_app(path="/mcp", json_response=True)


def call_body(i: int, modern: bool) -> bytes:
    params: dict[str, Any] = {"name": "add", "arguments": {"a": i, "b": 2}}
    if modern:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}).encode()


async def prepare(driver: Driver, era: str) -> list[tuple[bytes, bytes]]:
    """Headers for calls in ``era``: a handshake (and session) first where the era has one."""
    if era == "floor":
        return [JSON_CT, ACCEPT]
    if era == MODERN:
        return [
            JSON_CT,
            ACCEPT,
            (b"mcp-protocol-version", MODERN.encode()),
            (b"mcp-method", b"tools/call"),
            (b"mcp-name", b"add"),
        ]
    init = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        }
    ).encode()
    status, headers, _ = await driver.post(init, [JSON_CT, ACCEPT])
    assert status == 200, status
    session = [(b"mcp-session-id", headers["mcp-session-id"].encode())] if "mcp-session-id" in headers else []
    base = [JSON_CT, ACCEPT, (b"mcp-protocol-version", LEGACY.encode()), *session]
    await driver.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', base)
    return base


async def measure(name: str, app_factory: Callable[[], Any], era: str, n: int, rounds: int) -> float:
    app = app_factory()
    async with AsyncExitStack() as stack:
        await lifespan(stack, app)
        agent = getattr(getattr(app, "state", None), "agent", None)
        if agent is not None:
            stack.push_async_callback(lambda: agent.state.close())  # its connections and threads
        driver = Driver(app)
        headers = await prepare(driver, era)
        modern = era == MODERN
        status, _, body = await driver.post(call_body(1, modern), headers)
        reply = json.loads(body.split(b"data: ")[-1]) if body.startswith(b"event") else json.loads(body)
        assert status == 200 and reply["result"]["structuredContent"] == {"result": 3}, (
            name,
            era,
            status,
            body,
        )
        bodies = [call_body(i, modern) for i in range(n)]
        return await best_rate(driver, [bodies] * rounds, headers)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--store",
        action="append",
        default=[],
        help="also measure handshake-era sessions in this store (a URL; repeatable)",
    )
    args = parser.parse_args()
    n, rounds = (2000, 2) if args.quick else (20000, 3)
    targets = [
        ("bare Starlette floor", floor_app, "floor"),
        ("agentmw, 2025-11-25 (session)", agentmw_app, LEGACY),
        ("agentmw, 2026-07-28 (stateless)", agentmw_app, MODERN),
        ("FastMCP 4.1.6, 2025-11-25 (session)", fastmcp_app, LEGACY),
        ("FastMCP 4.1.6, 2026-07-28 (stateless)", fastmcp_app, MODERN),
    ]
    for store in args.store:
        targets += store_rows(store)
    results = []
    for name, factory, era in targets:
        try:
            rps = await measure(name, factory, era, n if "FastMCP" not in name else max(n // 10, 500), rounds)
        except Exception as exc:  # noqa: BLE001  # a peer that cannot serve an era is reported, not hidden
            results.append((name, None, f"{type(exc).__name__}: {exc}"[:120]))
            continue
        results.append((name, rps, ""))
    floor = results[0][1]
    print(f"`tools/call` requests per second, in-process ASGI, {n} calls, best of {rounds} rounds\n")
    print("| server | req/s | ratio to floor |")
    print("|---|---:|---:|")
    for name, rps, note in results:
        if rps is None:
            print(f"| {name} | — | did not run: {note} |")
        else:
            print(f"| {name} | {rps:,.0f} | {rps / floor:.2f}× |")
    agentmw_ms, fastapi_ms = import_time("agentmw"), import_time("fastapi")
    print(
        f"\n`import agentmw`: {agentmw_ms:.0f} ms; `import fastapi`: {fastapi_ms:.0f} ms "
        f"(median of fresh interpreters, less a bare interpreter's start)"
    )


if __name__ == "__main__":
    asyncio.run(main())
