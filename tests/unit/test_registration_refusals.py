"""What cannot be served is refused when it is registered, with the fix in the message (issue 21, item 6)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI, File, UploadFile

from agentmw import Agent, AgentMiddleware, tool
from agentmw.errors import RegistrationError
from agentmw.testing import McpTestClient


class Engine:
    """A database engine: a Python object, not data a caller could send."""


def test_var_positional_and_var_keyword_are_refused_with_the_fix() -> None:
    def spread(*items: str) -> str:
        return ",".join(items)

    def options(**flags: bool) -> str:
        return str(flags)

    with pytest.raises(RegistrationError, match=r"\*items cannot be served.*named parameter"):
        Agent("a", store="memory://").add("tool", spread)
    with pytest.raises(RegistrationError, match=r"\*\*flags cannot be served"):
        Agent("a", store="memory://").add("tool", options)


def test_a_sync_generator_is_refused_and_told_to_be_async() -> None:
    def chunks() -> Any:
        yield "a"

    with pytest.raises(RegistrationError, match=r"generator function.*async def"):
        Agent("a", store="memory://").add("tool", chunks)


def test_a_parameter_type_with_no_schema_is_named() -> None:
    def locked(lock: Engine) -> str:
        return "x"

    with pytest.raises(RegistrationError, match=r"parameter 'lock' has the type .*no JSON schema"):
        Agent("a", store="memory://").add("tool", locked)


def test_duplicate_names_name_both_functions_with_file_and_line() -> None:
    def first() -> str:
        return "1"

    def second() -> str:
        return "2"

    agent = Agent("a", store="memory://")
    agent.add("tool", first, name="same")
    with pytest.raises(RegistrationError) as raised:
        agent.add("tool", second, name="same")
    message = str(raised.value)
    assert "first" in message and "second" in message
    assert message.count("test_registration_refusals.py:") == 2


def test_a_file_upload_route_is_refused_naming_the_route_and_parameter() -> None:
    app = FastAPI()

    @app.post("/avatars")
    @tool
    async def upload(avatar: UploadFile = File(...)) -> dict[str, str]:
        return {"name": avatar.filename or ""}

    with pytest.raises(RegistrationError, match=r"POST /avatars: parameter 'avatar' is a file upload"):
        Agent("a", include=[app], store="memory://")


async def test_routes_included_after_the_agent_was_built_are_found_at_the_first_request(caplog) -> None:
    app = FastAPI()
    late = APIRouter(prefix="/late")

    @late.get("/ping")
    @tool(read_only=True)
    async def ping() -> dict[str, str]:
        return {"pong": "yes"}

    agent = Agent("early", include=[app], store="memory://")
    assert "ping" not in agent.tools  # the router is not in the app yet
    app.include_router(late)
    app.add_middleware(AgentMiddleware, agent=agent)
    with caplog.at_level(logging.INFO, logger="agentmw"):
        async with McpTestClient(app) as client:
            listed = {t["name"] for t in (await client.request("tools/list", {}))["tools"]}
            result = await client.call_tool("ping", {})
    assert "ping" in listed
    assert result["structuredContent"] == {"pong": "yes"}
    assert agent.tools["ping"].route is not None and agent.tools["ping"].route.path == "/late/ping"
    lines = [r.getMessage() for r in caplog.records]
    assert any("MCP serves 1 tools ['ping']" in line for line in lines)
    assert any("A2A serves 0 skills" in line for line in lines)


async def test_a_marked_function_no_agent_serves_is_warned_about_at_the_first_request(caplog) -> None:
    app = FastAPI()

    @app.get("/served")
    @tool
    async def served() -> str:
        return "s"

    @tool
    async def forgotten_helper() -> str:  # marked, in no app and included by no agent
        return "f"

    agent = Agent("some", include=[app], store="memory://")
    app.add_middleware(AgentMiddleware, agent=agent)
    with caplog.at_level(logging.WARNING, logger="agentmw"):
        async with McpTestClient(app) as client:
            await client.request("tools/list", {})
    warned = [r.getMessage() for r in caplog.records if "no agent serves it" in r.getMessage()]
    assert any("forgotten_helper" in w for w in warned)
    assert not any(".served " in w for w in warned)


def test_lint_takes_a_routes_response_model_as_its_return_type() -> None:
    from pydantic import BaseModel

    from agentmw.cli.lint import lint_agent

    class UserPublic(BaseModel):
        id: int

    app = FastAPI()

    @app.get("/me", response_model=UserPublic)
    @tool(read_only=True)
    async def me() -> Any:
        """Who the caller is.

        Summary:
            Reads the caller's own record.
        """
        return {"id": 1, "hashed_password": "x"}

    @app.get("/raw")
    @tool(read_only=True)
    async def raw() -> Any:
        """Raw data.

        Summary:
            Reads raw data.
        """
        return {}

    agent = Agent("lint", include=[app], store="memory://")
    codes = {(f.code, f.name) for f in lint_agent(agent)}
    assert ("AMW008", "me") not in codes  # FastAPI serialises it with UserPublic: MCP has its schema
    assert ("AMW008", "raw") in codes
