"""Hand-written JSON Schema 2020-12 input schemas (``@tool(input_schema=...)``, docs/tool.md).

The schema is served exactly as written to the official ``mcp`` client in both eras, arguments are checked
against it on every face (MCP ``isError``, A2A asking again for its input), it must agree with the function
at registration, it is compiled once, and ``jsonschema`` is imported only for such a capability.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, RegistrationError
from agentmw.context import Context
from agentmw.runtime import invoke
from agentmw.testing import A2ATestClient, McpTestClient
from tests.conformance.mcp_fixture import JSON_SCHEMA_2020_12 as SCHEMA
from tests.conftest import serve

calls: list[dict[str, Any]] = []


def contact(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    calls.append(
        {"name": name, "address": address, "contactMethod": contactMethod, "phone": phone, "email": email}
    )
    how = f"phone {phone}" if contactMethod == "phone" else f"email {email}"
    return f"{name or 'someone'} by {how}"


def build() -> tuple[Agent, Starlette]:
    agent = Agent("schemas")
    agent.tool(contact, input_schema=SCHEMA)
    agent.skill(contact, input_schema=SCHEMA, name="reach")
    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


def client(url: str, mode: str) -> Client:
    return Client(
        streamable_http_client(f"{url}/mcp", http_client=httpx2.AsyncClient(timeout=30)),
        mode=mode,
        cache=None,
    )


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_official_client_gets_the_schema_as_written_and_it_is_enforced(mode: str) -> None:
    calls.clear()
    _, app = build()
    with serve(app) as url:
        async with client(url, mode) as mcp:
            [tool] = (await mcp.list_tools()).tools
            assert tool.input_schema == SCHEMA  # $schema, $defs/$anchor, allOf/anyOf, if/then/else, closed
            ok = await mcp.call_tool(
                "contact",
                {"name": "Ada", "contactMethod": "phone", "phone": "555", "address": {"city": "Paris"}},
            )
            assert not ok.is_error and ok.content[0].text == "Ada by phone 555"
            assert calls == [
                {
                    "name": "Ada",
                    "address": {"city": "Paris"},
                    "contactMethod": "phone",
                    "phone": "555",
                    "email": None,
                }
            ]
            refused = {
                "then": ({"contactMethod": "phone", "email": "e"}, "arguments: 'phone' is a required"),
                "anyOf": ({"name": "Ada"}, "is a required property (no alternative of anyOf matched)"),
                "closed": ({"email": "e", "fax": "1"}, "('fax' was unexpected)"),
                "$ref": ({"email": "e", "address": {"city": 7}}, "address.city: 7 is not of type 'string'"),
                "enum": ({"email": "e", "contactMethod": "pigeon"}, "contactMethod: 'pigeon' is not one of"),
            }
            for keyword, (arguments, expected) in refused.items():
                result = await mcp.call_tool("contact", arguments)
                assert result.is_error, keyword
                assert result.content[0].text.startswith("Invalid arguments: "), result.content[0].text
                assert expected in result.content[0].text, (keyword, result.content[0].text)
            assert len(calls) == 1, "a call refused by the schema must never reach the function"


async def test_a2a_asks_again_for_input_that_breaks_the_schema() -> None:
    calls.clear()
    _, app = build()
    async with A2ATestClient(app) as a2a:
        task = (await a2a.send(data={"contactMethod": "phone", "email": "a@b.c"}, skill="reach"))["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        text = task["status"]["message"]["parts"][0]["text"]
        assert "Missing or invalid input: arguments: 'phone' is a required property" in text
        assert task["status"]["message"]["parts"][1]["data"] == {"inputSchema": SCHEMA}
        assert calls == []
        done = (await a2a.follow_up(task, data={"phone": "555"}))["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert done["artifacts"][0]["parts"] == [{"text": "someone by phone 555"}]


async def test_mcp_test_client_in_process_gets_the_same_refusal() -> None:
    _, app = build()
    async with McpTestClient(app) as mcp:
        result = await mcp.call_tool("contact", {"contactMethod": "phone"})
        assert result["isError"] is True
        assert result["content"][0]["text"] == (
            "Invalid arguments: arguments: 'phone' is a required property (no alternative of anyOf matched); "
            "arguments: 'phone' is a required property"
        )


async def test_the_validator_is_compiled_once_at_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    import jsonschema
    import referencing

    agent, _ = build()
    capability = agent.tools["contact"]

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a schema was checked or compiled while serving a call")

    compiled = capability.params.input_model.__agentmw_validator__
    assert isinstance(compiled, jsonschema.Draft202012Validator)
    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", forbidden)
    monkeypatch.setattr(referencing.Registry, "with_resource", forbidden)
    for arguments in ({"email": "a@b.c"}, {"contactMethod": "phone"}):
        outcome = await invoke(capability, arguments, Context())
        assert outcome.status in ("completed", "rejected")
    assert outcome.code == "invalid_arguments"
    assert capability.params.input_model.__agentmw_validator__ is compiled


def test_the_served_schema_is_a_copy_the_caller_cannot_change() -> None:
    schema = copy.deepcopy(SCHEMA)
    agent = Agent("copy")
    agent.tool(contact, input_schema=schema)
    schema["properties"]["phone"]["type"] = "integer"
    assert agent.tools["contact"].input_schema == SCHEMA


def _fn_a(a: str, b: int = 1) -> str:
    return a


BASE = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
    "required": ["a"],
}


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({**BASE, "required": ["a", "c"]}, "required properties ['c'] are not parameters"),
        ({**BASE, "properties": {**BASE["properties"], "c": {}}}, "properties ['c'] are not parameters"),
        ({**BASE, "properties": {"a": {"type": "string"}}}, "parameters ['b'] are not among the schema's"),
        ({**BASE, "required": []}, "parameters ['a'] have no default but the schema does not require them"),
        ({**BASE, "type": "array"}, 'whose root has "type": "object"'),
        ({k: v for k, v in BASE.items() if k != "type"}, 'whose root has "type": "object"'),
        (
            {**BASE, "$schema": "http://json-schema.org/draft-07/schema#"},
            "agentmw validates JSON Schema 2020-12",
        ),
        ({**BASE, "minProperties": "two"}, "is not a valid JSON Schema 2020-12 (at minProperties:"),
        ({**BASE, "properties": {"a": {"$ref": "https://example.com/s.json"}, "b": {}}}, "never fetches"),
        ({**BASE, "properties": {"a": {"$ref": "#/$defs/missing"}, "b": {}}}, "which it does not define"),
    ],
)
def test_a_schema_that_does_not_fit_is_refused_at_registration(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(RegistrationError) as refused:
        Agent("bad").tool(_fn_a, input_schema=schema)
    assert message in str(refused.value)
    assert "'_fn_a'" in str(refused.value)


def test_agreeing_schemas_register_and_references_resolve() -> None:
    agent = Agent("good")
    schema = {
        **BASE,
        "$defs": {"s": {"$anchor": "text", "type": "string"}},
        "properties": {"a": {"$ref": "#text"}, "b": {"$ref": "#/$defs/s/not-there/.."}},
    }
    with pytest.raises(RegistrationError):
        agent.tool(_fn_a, input_schema=schema)
    schema["properties"]["b"] = {"type": "integer", "minimum": 0}
    agent.tool(_fn_a, input_schema={**schema, "$schema": "https://json-schema.org/draft/2020-12/schema#"})
    assert agent.tools["_fn_a"].input_schema["properties"]["a"] == {"$ref": "#text"}


def test_only_tools_and_skills_take_an_input_schema() -> None:
    agent = Agent("kinds")
    with pytest.raises(RegistrationError, match="for tools and skills, not a prompt"):
        agent.prompt(_fn_a, input_schema=BASE)

    def nothing() -> str:
        return ""

    with pytest.raises(RegistrationError, match="the function takes none"):
        agent.tool(nothing, input_schema={"type": "object"})


def test_jsonschema_is_imported_only_for_a_hand_written_schema() -> None:
    code = (
        "import sys\n"
        "from agentmw import Agent\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "agent = Agent('lazy')\n"
        "agent.tool(add)\n"
        "assert 'jsonschema' not in sys.modules, 'imported without a hand-written schema'\n"
        "agent.tool(add, name='add2', input_schema={'type': 'object', 'required': ['a', 'b'],\n"
        "           'properties': {'a': {'type': 'integer'}, 'b': {'type': 'integer'}}})\n"
        "assert 'jsonschema' in sys.modules\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"AGENTMW_STORE": "memory://", "PATH": ""},
    )
    assert run.returncode == 0, run.stderr
