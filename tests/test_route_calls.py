"""An agent's call of a host route goes through the app (``agentmw._dispatch``): the mechanics a differential
over answers cannot see: middleware order, ``request.state`` and context variables, ``yield`` cleanups and
background tasks run once, exception handlers, redirects, streams, path segments, the gate's pre-check, and
serving without ``AgentMiddleware``."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse, StreamingResponse
from pydantic import BaseModel

from agentmw import Agent, AgentMiddleware, tool
from agentmw.safety import human_gate
from agentmw.testing import McpTestClient
from tests.waiting import eventually

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


class Teapot(Exception):
    pass


def tenant_app(*, agent_first: bool) -> tuple[FastAPI, Agent]:
    """A route that works over HTTP only because the app's middleware set ``request.state.tenant`` and a
    request-id context variable; ``agent_first``: AgentMiddleware is added before that middleware (innermost)."""
    app = FastAPI()

    @app.get("/tenant")
    @tool(read_only=True)
    async def whose(request: Request) -> dict[str, str]:
        return {"tenant": request.state.tenant, "request_id": REQUEST_ID.get()}

    agent = Agent("tenants", include=[app], store="memory://")

    async def set_tenant(request: Request, call_next: Any) -> Any:
        request.state.tenant = request.headers.get("x-tenant", "acme")
        token = REQUEST_ID.set("req-" + request.headers.get("x-tenant", "acme"))
        try:
            return await call_next(request)
        finally:
            REQUEST_ID.reset(token)

    if agent_first:
        app.add_middleware(AgentMiddleware, agent=agent)
        app.middleware("http")(set_tenant)
    else:
        app.middleware("http")(set_tenant)
        app.add_middleware(AgentMiddleware, agent=agent)
    return app, agent


async def test_middleware_state_and_context_variables_reach_the_route_in_either_order() -> None:
    for agent_first in (True, False):
        app, _ = tenant_app(agent_first=agent_first)
        async with McpTestClient(app, headers={"x-tenant": "globex"}) as client:
            result = await client.call_tool("whose", {})
        assert result["isError"] is False, (agent_first, result)
        assert result["structuredContent"] == {"tenant": "globex", "request_id": "req-globex"}, agent_first


async def session(request: Request) -> AsyncIterator[str]:
    try:
        yield "db"
    finally:
        request.app.state.seen["cleanup"].append("closed")


def lifecycle_app() -> tuple[FastAPI, dict[str, list[str]]]:
    app = FastAPI()
    seen: dict[str, list[str]] = {"cleanup": [], "background": []}
    release = asyncio.Event()
    app.state.release = release

    app.state.seen = seen

    async def later(note: str) -> None:
        await release.wait()
        seen["background"].append(note)

    @app.post("/notes")
    @tool
    async def add_note(
        text: str, tasks: BackgroundTasks, db: Annotated[str, Depends(session)]
    ) -> dict[str, str]:
        if text == "boom":
            raise HTTPException(409, "a note says boom already")
        tasks.add_task(later, text)
        return {"saved": text, "in": db}

    @app.exception_handler(Teapot)
    async def teapot(request: Request, exc: Teapot) -> JSONResponse:
        return JSONResponse({"detail": "I am a teapot"}, status_code=418)

    @app.get("/teapot")
    @tool(read_only=True)
    async def brew() -> str:
        raise Teapot()

    @app.get("/busy")
    @tool(read_only=True)
    async def busy() -> str:
        raise HTTPException(503, "try later", headers={"Retry-After": "7"})

    @app.get("/moved")
    @tool(read_only=True)
    async def moved() -> RedirectResponse:
        return RedirectResponse("/elsewhere")

    @app.get("/stream")
    @tool(read_only=True)
    async def stream() -> StreamingResponse:
        async def chunks() -> AsyncIterator[str]:
            for word in ("one ", "two ", "three"):
                yield word

        return StreamingResponse(chunks(), media_type="text/plain")

    @app.get("/files/{name}")
    @tool(read_only=True)
    async def file_named(name: str) -> dict[str, str]:
        return {"name": name}

    agent = Agent("lifecycle", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    return app, seen


async def test_yield_cleanup_runs_once_and_background_tasks_run_once_after_the_result() -> None:
    app, seen = lifecycle_app()
    async with McpTestClient(app) as client:
        result = await client.call_tool("add_note", {"text": "hello"})
        assert result["structuredContent"] == {"saved": "hello", "in": "db"}
        assert seen["background"] == []  # the result came before the background work
        app.state.release.set()
        await eventually(lambda: seen["background"], "the background task to run", timeout=1)
        assert seen["background"] == ["hello"]
        assert seen["cleanup"] == ["closed"]
        refused = await client.call_tool("add_note", {"text": "boom"})
    assert refused["isError"] is True and "a note says boom already" in refused["content"][0]["text"]
    assert seen["cleanup"] == ["closed", "closed"]  # once more, for the call that failed
    assert seen["background"] == ["hello"]


async def test_exception_handlers_retry_after_redirects_and_streams_as_http_has_them() -> None:
    app, _ = lifecycle_app()
    async with McpTestClient(app) as client:
        teapot = await client.call_tool("brew", {})
        busy = await client.call_tool("busy", {})
        moved = await client.call_tool("moved", {})
        streamed = await client.call_tool("stream", {})
    assert teapot["isError"] is True and "HTTP 418: I am a teapot" in teapot["content"][0]["text"]
    assert busy["isError"] is True and "Retry after 7 seconds" in busy["content"][0]["text"]
    assert moved["isError"] is True and "redirect (307) to /elsewhere" in moved["content"][0]["text"]
    assert streamed["isError"] is False and streamed["content"] == [{"type": "text", "text": "one two three"}]


async def test_a_path_parameter_is_one_segment() -> None:
    app, _ = lifecycle_app()
    async with McpTestClient(app) as client:
        fine = await client.call_tool("file_named", {"name": "report.txt"})
        sneaky = await client.call_tool("file_named", {"name": "../moved"})
    assert fine["structuredContent"] == {"name": "report.txt"}
    assert sneaky["isError"] is True and "must be one path segment" in sneaky["content"][0]["text"]


def require_key(x_api_key: Annotated[str | None, Header()] = None) -> None:
    if x_api_key != "k":
        raise HTTPException(401, "Not authenticated", headers={"WWW-Authenticate": "ApiKey"})


guarded = APIRouter(prefix="/guarded", dependencies=[Depends(require_key)])


class Order(BaseModel):
    sku: str


@guarded.post("/orders")
@tool
@human_gate(side_effects="Places an order")
async def place_order(order: Order) -> dict[str, str]:
    return {"placed": order.sku}


@guarded.get("/secret")
@tool(read_only=True)
async def secret() -> dict[str, str]:
    return {"secret": "42"}


async def post_call(client: McpTestClient, name: str, arguments: dict[str, Any]) -> Any:
    """A raw ``tools/call``: the HTTP response, whatever its status."""
    params = client.envelope({"name": name, "arguments": arguments})
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    return await client.post(body, client.headers_for("tools/call", params))


async def test_a_handler_included_as_a_function_and_served_by_agent_router_keeps_its_routers_dependency() -> (
    None
):
    app = FastAPI()
    app.include_router(guarded)
    agent = Agent(
        "router", include=[secret], store="memory://"
    )  # a function: its route is found at the first call
    app.include_router(agent.router())
    async with McpTestClient(app) as anonymous:
        refused = await post_call(anonymous, "secret", {})
    assert refused.status_code == 401 and refused.headers.get("www-authenticate") == "ApiKey"
    async with McpTestClient(app, headers={"x-api-key": "k"}) as client:
        served = await client.call_tool("secret", {})
    assert served["structuredContent"] == {"secret": "42"}


async def test_a_gated_route_refuses_an_anonymous_caller_before_anyone_is_asked() -> None:
    app = FastAPI()
    app.include_router(guarded)
    agent = Agent("gated", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    async with McpTestClient(app) as anonymous:
        refused = await post_call(anonymous, "place_order", {"order": {"sku": "A"}})
    assert refused.status_code == 401, refused.text
    assert await agent.approvals.count() == 0  # nobody was asked to approve what the app refuses


async def test_a_path_value_that_looks_like_a_placeholder_stays_its_own_value() -> None:
    app = FastAPI()

    @app.get("/pairs/{first}/{second}")
    @tool(read_only=True)
    async def pair(first: str, second: str) -> dict[str, str]:
        return {"first": first, "second": second}

    agent = Agent("pairs", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    async with McpTestClient(app) as client:
        result = await client.call_tool("pair", {"first": "{second}", "second": "b"})
    assert result["structuredContent"] == {"first": "{second}", "second": "b"}
