"""A hostile client's attacks on route calls made through the host app (``agentmw._dispatch``).

Issue 21: an exposed route is never weaker for agents than over HTTP. A call that reaches another route than the
tool's own (route confusion) is a bypass too: the tool's gate, exposure and policy apply to one route while another
runs. Each test names the behaviour it requires; its docstring says what an attacker gains when it fails.
"""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

import httpx
import pytest
from fastapi import APIRouter, Cookie, Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse

from agentmw import Agent, AgentMiddleware, skill, tool
from agentmw.safety import human_gate
from agentmw.testing import A2ACallError, A2ATestClient, McpTestClient
from tests.waiting import eventually


async def post_call(client: McpTestClient, name: str, arguments: dict[str, Any]) -> httpx.Response:
    """A raw ``tools/call``: the HTTP response, whatever its status."""
    params = client.envelope({"name": name, "arguments": arguments})
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    response: httpx.Response = await client.post(body, client.headers_for("tools/call", params))
    return response


# --- route confusion: the arguments choose another route ------------------------------------------------------


def reports_app() -> tuple[FastAPI, Agent, list[str]]:
    """FastAPI's own idiom: a fixed path declared before the parameterised one (``/users/me`` before
    ``/users/{id}``). The fixed one is gated, or not exposed at all."""
    app = FastAPI()
    ran: list[str] = []

    @app.get("/reports/export")
    @tool(read_only=True)
    @human_gate(side_effects="Exports every customer's report")
    async def export_all() -> dict[str, str]:
        ran.append("export_all")
        return {"export": "EVERY CUSTOMER"}

    @app.get("/reports/{report_id}")
    @tool(read_only=True)
    async def get_report(report_id: str) -> dict[str, str]:
        ran.append("get_report")
        return {"report": report_id}

    @app.get("/files/internal/{name}")  # not exposed to agents
    async def internal_file(name: str) -> dict[str, str]:
        ran.append("internal_file")
        return {"internal": name}

    @app.get("/files/{file_path:path}")
    @tool(read_only=True)
    async def get_file(file_path: str) -> dict[str, str]:
        ran.append("get_file")
        return {"file": file_path}

    agent = Agent("reports", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    return app, agent, ran


async def test_a_path_parameter_value_never_reaches_an_earlier_route_of_the_app() -> None:
    """``get_report(report_id="export")`` is dispatched as ``GET /reports/export``, which FastAPI matches to
    ``export_all``: the attacker runs a human-gated export with no approval, through an ungated read tool. HTTP
    cannot call ``get_report`` with that value either, so the call must be refused (or reach ``get_report``)."""
    app, agent, ran = reports_app()
    async with McpTestClient(app) as client:
        result = await client.call_tool("get_report", {"report_id": "export"})
    assert "EVERY CUSTOMER" not in json.dumps(result)
    assert "export_all" not in ran, "the gated route ran through another tool"
    assert await agent.approvals.count() == 0


async def test_a_path_convertor_value_never_reaches_a_more_specific_route_that_is_not_exposed() -> None:
    """``get_file(file_path="internal/secret")`` is dispatched as ``GET /files/internal/secret``: a route the
    app never exposed to agents runs, with the output schema and policy of ``get_file``."""
    app, _, ran = reports_app()
    async with McpTestClient(app) as client:
        result = await client.call_tool("get_file", {"file_path": "internal/secret"})
    assert "internal_file" not in ran, result
    assert result.get("structuredContent") in (None, {"file": "internal/secret"}), result


async def test_a_path_segment_with_url_syntax_stays_a_value_of_its_own_route() -> None:
    """Held: ``?``, ``#``, ``%2F``, ``;`` and a unicode slash in a one-segment parameter are the parameter's value,
    never a query, a fragment or another segment; ``/``, ``.``, ``..`` and empty are refused."""
    app, _, ran = reports_app()
    async with McpTestClient(app) as client:
        for value in ("x?admin=1", "a#b", "a%2Fb", "..;", "\u2215etc", "a\r\nX-Evil: 1"):
            served = await client.call_tool("get_report", {"report_id": value})
            assert served["structuredContent"] == {"report": value}, (value, served)
        for value in ("a/b", ".", "..", ""):
            refused = await client.call_tool("get_report", {"report_id": value})
            assert refused["isError"] is True and "one path segment" in refused["content"][0]["text"], value
    assert set(ran) == {"get_report"}


@pytest.mark.filterwarnings("ignore:The `root_path` parameter is deprecated")
async def test_the_root_path_never_reroutes_a_call_to_another_route() -> None:
    """Behind a proxy (``root_path="/api"``), a route declared at ``/api/items`` is dispatched as ``/api/items``
    with root ``/api``, which Starlette routes to ``/items``: an unexposed admin route answers a public tool. Over
    HTTP ``/api/items`` is reached at ``/api/api/items``."""
    app = FastAPI(root_path="/api")
    ran: list[str] = []

    @app.get("/api/items")
    @tool(read_only=True)
    async def list_items() -> dict[str, str]:
        ran.append("list_items")
        return {"route": "list_items"}

    @app.get("/items")
    async def admin_items() -> dict[str, str]:
        ran.append("admin_items")
        return {"route": "admin_items"}

    agent = Agent("rooted", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000"
    ) as http:
        assert (await http.get("/api/api/items")).json() == {"route": "list_items"}
    ran.clear()
    async with McpTestClient(app, path="/api/mcp") as client:
        result = await client.call_tool("list_items", {})
    assert "admin_items" not in ran, result
    assert result.get("structuredContent") == {"route": "list_items"}, result


# --- a handler served where its route's dependencies do not run ------------------------------------------------


def require_key(x_api_key: Annotated[str | None, Header()] = None) -> None:
    if x_api_key != "k":
        raise HTTPException(401, "Not authenticated", headers={"WWW-Authenticate": "ApiKey"})


def guarded_router() -> APIRouter:
    router = APIRouter(prefix="/guarded", dependencies=[Depends(require_key)])

    @router.get("/secret")
    @tool(read_only=True)
    async def secret() -> dict[str, str]:
        return {"secret": "42"}

    return router


def endpoint_of(router: APIRouter, name: str) -> Any:
    return next(r.endpoint for r in router.routes if getattr(r, "name", None) == name)


async def _served_secret(app: Any, path: str = "/mcp", headers: dict[str, str] | None = None) -> Any:
    async with McpTestClient(app, path=path, headers=headers) as client:
        return await post_call(client, "secret", {})


async def test_a_route_handler_served_by_agent_asgi_alone_never_skips_its_routers_dependency() -> None:
    """``Agent(include=[secret])`` served by ``agent.asgi()`` (no host app): the function is called directly and
    the router's ``Depends(require_key)`` is skipped, so an anonymous caller reads what HTTP answers 401 to. It
    must be refused at start or at the call."""
    router = guarded_router()
    host = FastAPI()
    host.include_router(router)
    try:
        agent = Agent("alone", include=[endpoint_of(router, "secret")], store="memory://")
        response = await _served_secret(agent.asgi())
    except Exception as refused:  # noqa: BLE001  # refused at start (any error), naming the route: fine
        assert "secret" in str(refused)
        return
    assert '"42"' not in response.text, response.text


async def test_a_route_handler_served_by_agent_router_on_another_app_never_skips_its_routers_dependency() -> (
    None
):
    """The handler's route lives in one app; ``agent.router()`` is included in another (an admin app, a test
    app). That app has no such route, the handler stays unbound and runs without its router's dependency: an
    anonymous caller gets the secret."""
    router = guarded_router()
    host = FastAPI()
    host.include_router(router)
    other = FastAPI()
    try:
        agent = Agent("other", include=[endpoint_of(router, "secret")], store="memory://")
        other.include_router(agent.router())
        response = await _served_secret(other)
    except Exception as refused:  # noqa: BLE001  # refused at start, whatever the error
        assert "secret" in str(refused)
        return
    assert '"42"' not in response.text, response.text


async def test_agent_asgi_mounted_in_the_host_app_calls_its_routes_through_the_app() -> None:
    """``app.mount("/agent", agent.asgi())``: the call is dispatched to the middleware's empty inner app and every
    route answers 404, for a caller HTTP serves (and a refusal says nothing about the real route)."""
    router = guarded_router()
    app = FastAPI()
    app.include_router(router)
    agent = Agent("mounted", include=[endpoint_of(router, "secret")], store="memory://")
    app.mount("/agent", agent.asgi())
    anonymous = await _served_secret(app, "/agent/mcp")
    assert anonymous.status_code == 401, anonymous.text
    async with McpTestClient(app, path="/agent/mcp", headers={"x-api-key": "k"}) as client:
        served = await client.call_tool("secret", {})
    assert served.get("structuredContent") == {"secret": "42"}, served


async def test_an_agent_includes_an_api_router_and_serves_its_routes_with_their_dependencies() -> None:
    """``Agent(include=[router])`` (documented in fastapi-migration.md section 4) raises ``TypeError: unhashable
    type: 'APIRouter'``; a team then falls back to including functions, the shape the two tests above break."""
    router = guarded_router()
    agent = Agent("routed", include=[router], store="memory://")
    app = FastAPI()
    app.include_router(router)
    app.add_middleware(AgentMiddleware, agent=agent)
    anonymous = await _served_secret(app)
    assert anonymous.status_code == 401, anonymous.text
    async with McpTestClient(app, headers={"x-api-key": "k"}) as client:
        served = await client.call_tool("secret", {})
    assert served.get("structuredContent") == {"secret": "42"}, served


# --- the gate's pre-check and the real call ---------------------------------------------------------------------


async def test_a_gated_route_that_inner_middleware_refuses_asks_nobody() -> None:
    """Middleware added before ``AgentMiddleware`` runs for every route call (the docs say so), but the gate's
    pre-check runs only the dependencies: an anonymous caller the app's own API-key middleware refuses is offered
    an approval ("Approval required ...") for an action that would answer 401, and a person is asked for it."""
    app = FastAPI()
    ran: list[str] = []

    @app.post("/orders")
    @tool
    @human_gate(side_effects="Places an order")
    async def place_order(sku: str) -> dict[str, str]:
        ran.append(sku)
        return {"placed": sku}

    @app.middleware("http")
    async def key_required(request: Request, call_next: Any) -> Any:
        if request.headers.get("x-api-key") != "k":
            return JSONResponse({"detail": "no key"}, status_code=401, headers={"WWW-Authenticate": "ApiKey"})
        return await call_next(request)

    agent = Agent("gated", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)  # added last: outermost, the key middleware is below it
    async with McpTestClient(app) as anonymous:
        refused = await post_call(anonymous, "place_order", {"sku": "A"})
    assert "Approval required" not in refused.text, refused.text
    assert refused.status_code == 401, refused.text
    assert await agent.approvals.count() == 0 and ran == []


# --- budgets: a route that never ends ---------------------------------------------------------------------------


async def test_a_stream_past_the_response_limit_ends_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A route streaming without end (a log tail, an SSE feed) on a tool with no timeout: once the body passes
    ``MAX_ROUTE_RESPONSE_BYTES`` nothing more is kept, but the app is never told to stop. The call never
    answers and the stream runs on, one in-flight slot and one core per call: a handful of calls stops the
    server. The limit must end the call, saying so, and stop the stream."""
    from agentmw import _dispatch

    monkeypatch.setattr(_dispatch, "MAX_ROUTE_RESPONSE_BYTES", 64 * 1024)
    app = FastAPI()
    stopped = asyncio.Event()
    abandoned = asyncio.Event()  # set by the test when it gives up, so a stream nobody stopped ends with it

    @app.get("/tail")
    @tool(read_only=True)
    async def tail() -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            try:
                while not abandoned.is_set():
                    yield b"x" * 4096
                    await asyncio.sleep(0)
            finally:
                stopped.set()

        return StreamingResponse(chunks(), media_type="text/plain")

    agent = Agent("tail", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    async with McpTestClient(app) as client:
        try:
            result = await asyncio.wait_for(client.call_tool("tail", {}), 10)
        except TimeoutError:
            pytest.fail("the call never answered: the stream past the limit was never stopped")
        finally:
            with contextlib.suppress(AssertionError):  # the stream has 0.2 s to stop; `leaked` says if it did
                await eventually(stopped.is_set, "the stream past the limit to stop", timeout=0.2)
            leaked = not stopped.is_set()
            abandoned.set()
    assert result["isError"] is True and "larger than" in result["content"][0]["text"]
    assert not leaked, "the route's stream went on after the call ended"


async def test_a_route_past_its_timeout_is_stopped_and_its_yield_dependency_cleaned_up() -> None:
    """Held: the capability's timeout cancels the route; its ``yield`` dependency cleans up once."""
    app = FastAPI()
    closed: list[str] = []

    async def session() -> AsyncIterator[str]:
        try:
            yield "db"
        finally:
            closed.append("closed")

    @app.get("/slow")
    @tool(read_only=True, timeout=0.2)
    async def slow(db: Annotated[str, Depends(session)]) -> dict[str, str]:
        await asyncio.Event().wait()
        return {"never": db}

    agent = Agent("slow", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    async with McpTestClient(app) as client:
        result = await client.call_tool("slow", {})
    assert result["isError"] is True and "did not finish within 0.2 seconds" in result["content"][0]["text"]
    assert closed == ["closed"]


# --- held: arguments and headers ----------------------------------------------------------------------------


async def test_query_values_with_url_syntax_arrive_as_sent() -> None:
    """Held: ``&``, ``=`` and CR/LF in a query argument are one value; no other key is set."""
    app = FastAPI()

    @app.get("/search")
    @tool(read_only=True)
    async def search(q: str, admin: bool = False) -> dict[str, Any]:
        return {"q": q, "admin": admin}

    agent = Agent("search", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    async with McpTestClient(app) as client:
        result = await client.call_tool("search", {"q": "x&admin=true\r\nX-Evil: 1"})
    assert result["structuredContent"] == {"q": "x&admin=true\r\nX-Evil: 1", "admin": False}


def cookie_app() -> tuple[FastAPI, list[str]]:
    app = FastAPI()
    ran: list[str] = []

    def user(session: Annotated[str | None, Cookie()] = None) -> str:
        if session != "alice-session":
            raise HTTPException(401, "log in")
        return "alice"

    @app.post("/account/delete")
    @tool
    @skill
    async def delete_account(who: Annotated[str, Depends(user)]) -> dict[str, str]:
        ran.append(who)
        return {"deleted": who}

    agent = Agent("account", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    return app, ran


async def test_a_cross_site_page_cannot_ride_the_users_cookie_into_a_route() -> None:
    """Held: a page on another origin posting to AG-UI or A2A with the user's session cookie (as a plain
    ``text/plain`` form would, with no preflight) is refused before any route runs."""
    app, ran = cookie_app()
    run = {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "m", "role": "user", "content": "go"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "1",
                "role": "ROLE_USER",
                "parts": [{"data": {}}],
                "metadata": {"skill": "delete_account"},
            }
        },
    }
    headers = {"origin": "http://evil.example", "cookie": "session=alice-session", "a2a-version": "1.0"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000"
    ) as http:
        for path, body in (("/agui/delete_account", run), ("/a2a", message)):
            for content_type in ("application/json", "text/plain"):
                answer = await http.post(
                    path, content=json.dumps(body), headers={**headers, "content-type": content_type}
                )
                assert answer.status_code == 403, (path, content_type, answer.text)
    assert ran == []


async def test_another_caller_cannot_approve_and_run_a_gated_task_with_their_own_credentials() -> None:
    """Held: an A2A task parked on its gate by Alice is not found for Bob, so Bob's ``Authorization`` never
    runs Alice's transfer (nor does Alice's run as Bob)."""
    app = FastAPI()
    moves: list[tuple[str, int]] = []

    def current_user(authorization: Annotated[str | None, Header()] = None) -> str:
        if not authorization or not authorization.startswith("Bearer "):
            raise HTTPException(401, "Not authenticated", headers={"WWW-Authenticate": "Bearer"})
        return authorization.removeprefix("Bearer ")

    @app.post("/transfers")
    @tool
    @skill
    @human_gate(side_effects="Moves money")
    async def transfer(amount: int, user: Annotated[str, Depends(current_user)]) -> dict[str, Any]:
        moves.append((user, amount))
        return {"from": user, "amount": amount}

    agent = Agent("bank", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    try:
        async with A2ATestClient(app, headers={"authorization": "Bearer alice"}) as alice:
            task = (await alice.send("move 5", skill="transfer", data={"amount": 5}))["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        async with A2ATestClient(app, headers={"authorization": "Bearer bob"}) as bob:
            with pytest.raises(A2ACallError):
                await bob.follow_up(task, data={"approved": True})
        assert moves == []
    finally:
        await agent.a2a_app.ops.tasks.close()  # the parked task: a shutdown leaves it
