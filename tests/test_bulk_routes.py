"""Bulk exposure: ``Agent(include=[app], routes=...)`` serves undecorated routes picked by method, tag or path."""

from __future__ import annotations

import logging
from typing import Annotated

import pytest
from fastapi import APIRouter, Depends, FastAPI, Header, Query
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from agentmw import Agent, RouteSelection, tool
from agentmw.cli.lint import lint_agent
from agentmw.selection import iter_routes
from agentmw.testing import McpTestClient

CATALOG = {"LPT-14": 1899.0, "MON-27": 449.0}
orders: list[dict] = []


def build_app() -> FastAPI:
    app = FastAPI()

    @app.get("/assets")
    async def list_assets(limit: int = Query(10, ge=1, le=50)) -> list[str]:
        """List the SKUs of the catalog.

        Args:
            limit: at most this many.
        """
        return sorted(CATALOG)[:limit]

    @app.get("/assets/{sku}", summary="Price of one asset")
    async def asset_price(sku: str) -> float:
        return CATALOG[sku]

    @app.post("/orders")
    async def place_order(sku: str, quantity: int = 1) -> dict:
        order = {"sku": sku, "quantity": quantity}
        orders.append(order)
        return order

    @app.delete("/orders/{index}")
    async def cancel_order(index: int) -> None:
        orders.pop(index)

    @app.get("/budget")
    @tool(name="budget", title="The budget", read_only=True, open_world=False)
    async def budget_route() -> float:
        """The remaining budget.

        Summary:
            Says how much can still be spent.
        """
        return 100.0

    @app.get("/hidden", include_in_schema=False)
    async def hidden() -> str:
        return "hidden"

    @app.get("/with-dependency", dependencies=[Depends(lambda: None)])
    async def guarded() -> str:
        return "guarded"

    def who(x_user: Annotated[str, Header()]) -> str:
        return x_user

    secure = APIRouter(prefix="/secure", dependencies=[Depends(who)])

    @secure.get("/mine")
    async def mine() -> str:
        return "mine"

    catalog = APIRouter(prefix="/v1", tags=["catalog"])

    @catalog.get("/categories")
    async def categories() -> list[str]:
        """The asset categories."""
        return ["laptop", "monitor"]

    @catalog.get("/categories/{name}/count")
    async def category_count(name: str) -> int:
        """How many assets a category holds."""
        return sum(1 for sku in CATALOG if sku.startswith(name[:3].upper()))

    app.include_router(secure)
    app.include_router(catalog)
    return app


def tools_of(agent: Agent) -> set[str]:
    return set(agent.tools)


def test_get_routes_are_the_suggested_start(caplog) -> None:
    with caplog.at_level(logging.DEBUG, logger="agentmw"):
        agent = Agent("bulk", include=[build_app()], routes=RouteSelection())
    # routes with dependencies=[...] are served: an agent call runs them as HTTP does (test_router_dependencies_run)
    assert tools_of(agent) == {
        "list_assets",
        "asset_price",
        "budget",
        "categories",
        "category_count",
        "guarded",
        "mine",
    }
    warned = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert warned.count("not exposing") == 0  # FastAPI's own /docs and /openapi.json are skipped quietly
    quiet = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
    assert "GET /hidden in bulk: the route is hidden" in quiet and "GET /openapi.json" in quiet
    for name in ("list_assets", "asset_price", "categories"):
        assert agent.tools[name].annotations == {"readOnlyHint": True}


def test_descriptions_are_derived_and_decorated_handlers_keep_their_options() -> None:
    agent = Agent("bulk", include=[build_app()], routes=RouteSelection())
    documented = agent.tools["list_assets"]
    assert documented.contract == "List the SKUs of the catalog."  # its own docstring
    assert documented.input_schema["properties"]["limit"]["description"] == "at most this many."
    derived = agent.tools["asset_price"]
    assert derived.contract == "Price of one asset. Serves the app's GET /assets/{sku} route."
    assert (
        derived.title == "Price of one asset"
        and derived.output_schema["properties"]["result"]["type"] == "number"
    )
    assert agent.tools["categories"].tags == ("catalog",)
    decorated = agent.tools["budget"]
    assert decorated.title == "The budget" and decorated.summary == "Says how much can still be spent."
    assert decorated.annotations == {"title": "The budget", "readOnlyHint": True, "openWorldHint": False}


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        (RouteSelection(tags="catalog"), {"categories", "category_count"}),
        (RouteSelection(paths="/assets*"), {"list_assets", "asset_price"}),
        (RouteSelection(paths=["/v1/*"], exclude="*/count"), {"categories"}),
        (RouteSelection(exclude=["asset_*", "/v1/*"]), {"list_assets", "guarded", "mine"}),
        (
            RouteSelection(methods=("GET", "POST", "DELETE"), paths=("/orders*",)),
            {"place_order", "cancel_order"},
        ),
        (lambda route: route.path == "/assets/{sku}", {"asset_price"}),
    ],
)
def test_selection_by_tag_path_method_or_predicate(selection, expected: set[str]) -> None:
    agent = Agent("bulk", include=[build_app()], routes=selection)
    assert tools_of(agent) == expected | {"budget"}  # the decorated handler is always there


def test_write_routes_are_marked_as_such() -> None:
    agent = Agent("bulk", include=[build_app()], routes=RouteSelection(methods=["get", "post", "delete"]))
    assert agent.tools["place_order"].annotations == {"readOnlyHint": False, "destructiveHint": False}
    assert agent.tools["cancel_order"].annotations == {"readOnlyHint": False, "destructiveHint": True}
    findings = {(f.code, f.name) for f in lint_agent(agent)}
    assert ("AMW004", "place_order") in findings and ("AMW004", "cancel_order") in findings  # ungated writes
    assert ("AMW011", "place_order") in findings and ("AMW011", "asset_price") in findings
    assert not any(name == "budget" for _, name in findings)  # the decorated one is as its author wrote it


async def test_bulk_tools_run_through_the_pipeline() -> None:
    agent = Agent("bulk", include=[build_app()], routes=RouteSelection(methods=["GET", "POST"]))
    orders.clear()
    async with McpTestClient(agent.asgi()) as mcp:
        listed = {t["name"]: t for t in (await mcp.request("tools/list"))["tools"]}
        assert listed["asset_price"]["description"].endswith("GET /assets/{sku} route.")
        price = await mcp.call_tool("asset_price", {"sku": "MON-27"})
        assert price["structuredContent"] == {"result": 449.0}
        refused = await mcp.call_tool("list_assets", {"limit": 500})  # the route's Query(le=50) holds
        assert refused["isError"] is True
        placed = await mcp.call_tool("place_order", {"sku": "LPT-14", "quantity": 2})
        assert placed["structuredContent"] == {"sku": "LPT-14", "quantity": 2}
    assert orders == [{"sku": "LPT-14", "quantity": 2}]


def test_include_on_an_existing_agent_and_the_same_handler_twice() -> None:
    app = FastAPI()

    async def shared() -> str:
        """The same handler on two paths."""
        return "x"

    app.add_api_route("/a", shared, methods=["GET"])
    app.add_api_route("/b", shared, methods=["GET"])
    agent = Agent("bulk")
    agent.include(app, routes=RouteSelection())
    assert tools_of(agent) == {"shared"}
    assert agent.tools["shared"].meta["agentmw/route"] == {"methods": ["GET"], "path": "/a"}


def test_plain_starlette_endpoints_are_never_exposed_in_bulk(caplog) -> None:
    app = Starlette(routes=[Route("/ping", lambda request: PlainTextResponse("pong"))])
    with caplog.at_level(logging.DEBUG, logger="agentmw"):
        agent = Agent("bulk", include=[app], routes=RouteSelection())
    assert agent.tools == {} and "reads its request itself" in caplog.text


def test_without_routes_nothing_undecorated_is_served() -> None:
    agent = Agent("bulk", include=[build_app()])
    assert tools_of(agent) == {"budget"}


def test_iter_routes_sees_prefixes_tags_and_dependencies() -> None:
    found = {r.path: r for r in iter_routes(build_app())}
    assert found["/v1/categories/{name}/count"].tags == ("catalog",)
    assert found["/secure/mine"].dependencies == 1 and found["/with-dependency"].dependencies == 1
    assert found["/assets"].methods == frozenset({"GET"}) and found["/assets"].fastapi
    assert found["/hidden"].include_in_schema is False


async def test_router_dependencies_run_for_a_route_exposed_in_bulk() -> None:
    """The router's ``dependencies=[Depends(who)]`` needs an ``X-User`` header: HTTP answers 422 without it, and
    so does the agent call (never the handler's value); with it, both serve the route."""
    from agentmw import AgentMiddleware

    app = build_app()
    agent = Agent("bulk", include=[app], routes=RouteSelection(), store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    async with McpTestClient(app) as client:
        refused = await client.call_tool("mine", {})
        assert refused["isError"] is True and "x-user" in refused["content"][0]["text"].lower()
    async with McpTestClient(app, headers={"x-user": "ada"}) as client:
        served = await client.call_tool("mine", {})
        assert served["isError"] is False and served["structuredContent"] == {"result": "mine"}
        assert served["content"][0]["text"] == '"mine"'  # the body FastAPI serves: a JSON string
