"""Registration: schemas from signatures, two descriptions, names, stacking, and functions left callable."""

from __future__ import annotations

import sys
from typing import TypedDict as PlainTypedDict

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel
from typing_extensions import TypedDict

from agentmw import Agent, Context, RegistrationError, prompt, resource, tool
from agentmw.testing import McpTestClient


class Point(TypedDict):
    x: int
    y: int


def test_decorated_function_is_returned_unchanged_and_callable() -> None:
    def area(w: float, h: float) -> float:
        return w * h

    assert tool(area) is area
    assert area(2, 3) == 6
    agent = Agent(include=[area])
    cap = agent.tools["area"]
    assert cap.input_schema == {
        "type": "object",
        "properties": {"w": {"type": "number"}, "h": {"type": "number"}},
        "required": ["w", "h"],
    }
    assert cap.output_schema == {
        "type": "object",
        "properties": {"result": {"type": "number"}},
        "required": ["result"],
    }


def test_contract_and_summary_from_docstring_sections() -> None:
    agent = Agent()

    @agent.tool
    def lookup(sku: str) -> str:
        """Look up one SKU in the catalog.

        Do not use it to search; use search_assets for that.

        Summary:
            Resolves a SKU to its catalog entry.

        Args:
            sku: the stock-keeping unit, such as "LPT-14".
        """
        return sku

    cap = agent.tools["lookup"]
    assert (
        cap.contract
        == "Look up one SKU in the catalog.\n\nDo not use it to search; use search_assets for that."
    )
    assert cap.summary == "Resolves a SKU to its catalog entry."
    assert cap.input_schema["properties"]["sku"]["description"] == 'the stock-keeping unit, such as "LPT-14".'


def test_explicit_descriptions_win() -> None:
    agent = Agent()

    @agent.tool(contract="For models.", summary="For schedulers.")
    def f() -> str:
        """Docstring."""
        return ""

    assert (agent.tools["f"].contract, agent.tools["f"].summary) == ("For models.", "For schedulers.")


def test_annotations_and_title() -> None:
    agent = Agent()

    @agent.tool(title="Delete it", destructive=True, idempotent=True, read_only=False, open_world=False)
    def delete(id: int) -> None:
        """Delete."""

    assert agent.tools["delete"].annotations == {
        "title": "Delete it",
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert agent.tools["delete"].output_schema is None


@pytest.mark.parametrize("name", ["", "has space", "x" * 129, "slash/name", "ünï"])
def test_bad_names_fail_at_registration(name: str) -> None:
    with pytest.raises(RegistrationError, match="invalid"):
        Agent().tool(name=name)(lambda: None)


def test_duplicate_names_fail_at_registration() -> None:
    agent = Agent()
    agent.tool(name="same")(lambda: 1)
    with pytest.raises(RegistrationError, match="duplicate tool 'same'"):
        agent.tool(name="same")(lambda: 2)
    agent.resource("x://a")(lambda: "a")
    with pytest.raises(RegistrationError, match="duplicate resource"):
        agent.resource("x://a")(lambda: "b")


def test_resource_template_variables_must_be_parameters() -> None:
    with pytest.raises(RegistrationError, match="not parameters"):
        Agent().resource("x://{id}")(lambda other: other)
    with pytest.raises(RegistrationError, match="required parameters"):
        Agent().resource("x://fixed")(lambda id: id)


class Model(BaseModel):
    name: str


def test_object_returns_are_structured_as_is() -> None:
    agent = Agent()
    agent.tool(name="m")(lambda: Model(name="n"))

    def typed() -> Point:
        return {"x": 1, "y": 2}

    def models() -> Model:
        return Model(name="n")

    agent.tool(typed)
    agent.tool(models)
    assert agent.tools["typed"].output.mode == "object"
    assert agent.tools["typed"].output_schema["properties"] == {
        "x": {"type": "integer"},
        "y": {"type": "integer"},
    }
    assert agent.tools["models"].output_schema["required"] == ["name"]


async def test_sync_and_async_functions_both_serve() -> None:
    agent = Agent()

    @agent.tool
    def sync_add(a: int, b: int) -> int:
        return a + b

    @agent.tool
    async def async_add(a: int, b: int, ctx: Context) -> int:
        await ctx.progress(1)
        return a + b

    @agent.tool
    async def streamed(n: int):
        for i in range(n):
            yield str(i)

    async with McpTestClient(agent.asgi()) as mcp:
        assert (await mcp.call_tool("sync_add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
        assert (await mcp.call_tool("async_add", {"a": 1, "b": 2}))["structuredContent"] == {"result": 3}
        assert (await mcp.call_tool("streamed", {"n": 3}))["content"] == [{"type": "text", "text": "012"}]
    assert "ctx" not in agent.tools["async_add"].input_schema["properties"]


@pytest.mark.parametrize("order", ["route-outside", "route-inside"])
def test_stacking_with_fastapi_routes_in_either_order(order: str) -> None:
    app = FastAPI()
    if order == "route-outside":

        @app.get("/double/{n}")
        @tool
        def double(n: int) -> int:
            return 2 * n
    else:

        @tool
        @app.get("/double/{n}")
        def double(n: int) -> int:
            return 2 * n

    agent = Agent(include=[app])
    assert "double" in agent.tools
    assert TestClient(app).get("/double/21").json() == 42


def test_include_a_module_takes_only_its_own_marked_functions() -> None:
    import types

    module = types.ModuleType("fake_module")
    exec(
        "from agentmw import tool, prompt\n"
        "@tool\ndef t() -> str:\n    return 'x'\n"
        "@prompt\ndef p() -> str:\n    return 'y'\n"
        "def plain():\n    pass\n",
        module.__dict__,
    )
    agent = Agent(include=[module])
    assert list(agent.tools) == ["t"] and list(agent.prompts) == ["p"]


def test_decorators_stack_with_each_other() -> None:
    @tool
    @resource("thing://{id}")
    @prompt
    def thing(id: str) -> str:
        """A thing."""
        return id

    agent = Agent(include=[thing])
    assert "thing" in agent.tools and "thing://{id}" in agent.templates and "thing" in agent.prompts


class Old(PlainTypedDict):
    x: int


def test_return_type_pydantic_cannot_use_is_a_clear_registration_error() -> None:
    def old() -> Old:
        return {"x": 1}

    if sys.version_info >= (3, 12):  # pydantic accepts typing.TypedDict from Python 3.12 on
        assert Agent().tool(old) is old
        return
    with pytest.raises(RegistrationError, match="typing_extensions.TypedDict"):
        Agent().tool(old)


def test_unresolvable_return_annotation_is_a_registration_error() -> None:
    def f() -> NoSuchType:  # noqa: F821
        return 1

    with pytest.raises(RegistrationError, match="NoSuchType"):
        Agent().tool(f)


def test_include_finds_handlers_in_included_routers_and_mounts() -> None:
    from fastapi import APIRouter

    router = APIRouter(prefix="/inventory")

    @router.get("/count")
    @tool
    def count() -> int:
        return 3

    sub = FastAPI()

    @sub.get("/echo")
    @tool
    def echo(text: str) -> str:
        return text

    app = FastAPI()
    app.include_router(router)
    app.mount("/sub", sub)
    agent = Agent(include=[app])
    assert set(agent.tools) == {"count", "echo"}
    assert TestClient(app).get("/inventory/count").json() == 3


def test_local_functions_with_postponed_annotations_resolve() -> None:

    agent = Agent()

    @agent.tool
    async def local(n: int, ctx: Context) -> int:
        return n

    assert agent.tools["local"].params.context_param == "ctx"
    assert list(agent.tools["local"].input_schema["properties"]) == ["n"]

    def unknown(x: Nowhere) -> int:  # noqa: F821
        return 1

    with pytest.raises(RegistrationError, match="Nowhere"):
        agent.tool(unknown)
