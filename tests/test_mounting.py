"""Middleware, router and mount: each serves MCP, passes everything else through, and needs no lifespan."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from agentmw import Agent, AgentMiddleware
from agentmw.testing import McpTestClient


def make_agent() -> Agent:
    agent = Agent("mounted")

    @agent.tool
    async def hello(name: str) -> str:
        return f"hello {name}"

    return agent


def host_app() -> FastAPI:
    app = FastAPI()

    @app.get("/ping")
    def ping() -> dict[str, str]:
        return {"pong": "yes"}

    return app


def with_middleware() -> tuple[object, str]:
    app = host_app()
    app.add_middleware(AgentMiddleware, agent=make_agent())
    return app, "/mcp"


def with_router() -> tuple[object, str]:
    app = host_app()
    app.include_router(make_agent().router())
    return app, "/mcp"


def with_mount() -> tuple[object, str]:
    app = host_app()
    app.mount("/agent", make_agent().asgi())
    return app, "/agent/mcp"


def starlette_routes() -> tuple[object, str]:
    return Starlette(
        routes=[Route("/ping", lambda r: PlainTextResponse("pong")), *make_agent().routes()]
    ), "/mcp"


@pytest.mark.parametrize("build", [with_middleware, with_router, with_mount, starlette_routes])
@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_each_way_of_mounting_serves_both_eras(build, era: str) -> None:
    app, path = build()
    async with McpTestClient(app, path=path, era=era) as mcp:
        result = await mcp.call_tool("hello", {"name": "ada"})
        assert result["content"] == [{"type": "text", "text": "hello ada"}]


@pytest.mark.parametrize("build", [with_middleware, with_router, with_mount])
def test_host_routes_untouched_and_no_lifespan_needed(build) -> None:
    app, path = build()
    with TestClient(
        app, base_url="http://localhost"
    ) as client:  # runs the host's own lifespan; agentmw adds none
        assert client.get("/ping").json() == {"pong": "yes"}
        assert client.get("/missing").status_code == 404
        response = client.post(
            path,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"accept": "application/json, text/event-stream"},
        )
        assert response.status_code == 400  # reached agentmw: no session
    client = TestClient(app)  # and without the lifespan ever running
    assert client.get("/ping").json() == {"pong": "yes"}
