"""A FastAPI route served to agents: the same route over plain HTTP, and as an MCP ``tools/call``, in one run.

The route has what real routes have: a ``response_model`` on a handler annotated ``-> Any``, a router with
``dependencies=[...]``, and a header dependency. An agent's call goes through the app in-process (``_dispatch.py``),
so its cost is the HTTP request's plus the MCP envelope; the table gives both as a ratio to the plain HTTP call.

``python bench/route_call.py`` (``--quick`` for a short run); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Annotated, Any

from _driver import Driver
from fastapi import APIRouter, Depends, FastAPI, Header
from pydantic import BaseModel

from agentmw import Agent, AgentMiddleware, tool

MODERN = "2026-07-28"


class UserPublic(BaseModel):
    id: int
    email: str


def current_user(authorization: Annotated[str, Header()]) -> dict[str, Any]:
    return {"id": 1, "email": "ada@example.com", "hashed_password": "x", "token": authorization}


def app_with_agent() -> FastAPI:
    app = FastAPI()
    users = APIRouter(prefix="/users", dependencies=[Depends(current_user)])

    @users.get("/{user_id}", response_model=UserPublic)
    @tool(read_only=True)
    async def read_user(user_id: int, user: Annotated[dict[str, Any], Depends(current_user)]) -> Any:
        return {**user, "id": user_id}

    app.include_router(users)
    agent = Agent("bench", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


async def post(
    app: Any, method: str, path: str, body: bytes, headers: list[tuple[bytes, bytes]]
) -> tuple[int, bytes]:
    status, _, answer = await Driver(app).request(method, path, body, headers)
    return status, answer


AUTH = (b"authorization", b"Bearer t")
MCP_HEADERS = [
    AUTH,
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", MODERN.encode()),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"read_user"),
]


def call_body(i: int) -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {
                "name": "read_user",
                "arguments": {"user_id": i},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
    ).encode()


async def rate(n: int, rounds: int, one: Any) -> float:
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        for i in range(n):
            await one(i)
        best = max(best, n / (time.perf_counter() - start))
    return best


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n, rounds = (1000, 2) if args.quick else (10000, 3)
    app = app_with_agent()

    status, body = await post(app, "GET", "/users/7", b"", [AUTH])
    assert status == 200 and json.loads(body) == {"id": 7, "email": "ada@example.com"}, (status, body)
    status, body = await post(app, "POST", "/mcp", call_body(7), MCP_HEADERS)
    reply = json.loads(body)
    assert status == 200 and reply["result"]["structuredContent"] == {"id": 7, "email": "ada@example.com"}, (
        body
    )

    async def http(i: int) -> None:
        await post(app, "GET", f"/users/{i}", b"", [AUTH])

    async def mcp(i: int) -> None:
        await post(app, "POST", "/mcp", call_body(i), MCP_HEADERS)

    http_rps = await rate(n, rounds, http)
    mcp_rps = await rate(n, rounds, mcp)
    print(
        f"A FastAPI route (response_model, router and parameter dependencies), in-process ASGI, {n} calls, "
        f"best of {rounds} rounds\n"
    )
    print("| call | req/s | ratio to plain HTTP |")
    print("|---|---:|---:|")
    print(f"| plain HTTP `GET /users/{{id}}` | {http_rps:,.0f} | 1.00× |")
    print(f"| MCP 2026-07-28 `tools/call` of the same route | {mcp_rps:,.0f} | {mcp_rps / http_rps:.2f}× |")


if __name__ == "__main__":
    asyncio.run(main())
