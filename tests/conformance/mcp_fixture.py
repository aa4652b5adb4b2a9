"""The MCP conformance suite's fixture server, built only with agentmw's public API.

Serve it with ``uvicorn tests.conformance.mcp_fixture:app --port 8765``; MCP lives at ``/mcp``.
The names and behaviours are the suite's (its scenarios call fixtures by exact name).
"""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Annotated

from pydantic import Field
from starlette.applications import Starlette

from agentmw import (
    Agent,
    AgentMiddleware,
    Ask,
    Audio,
    Context,
    EmbeddedResource,
    Image,
    ListRoots,
    PromptMessage,
    Rejected,
    Sample,
    SkillPackage,
    Text,
)

# 1x1 PNG and a tiny WAV, as the suite's reference server sends.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
WAV = base64.b64decode("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=")

agent = Agent("agentmw-conformance", "0.1.0")
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@agent.tool
async def test_simple_text() -> str:
    """Returns simple text content."""
    return "This is a simple text response for testing."


@agent.tool
async def test_image_content() -> Image:
    """Returns image content."""
    return Image(PNG, "image/png")


@agent.tool
async def test_audio_content() -> Audio:
    """Returns audio content."""
    return Audio(WAV, "audio/wav")


@agent.tool
async def test_embedded_resource() -> EmbeddedResource:
    """Returns an embedded resource."""
    return EmbeddedResource(
        "test://embedded-resource", text="This is an embedded resource content.", mime_type="text/plain"
    )


@agent.tool
async def test_multiple_content_types() -> list[Text | Image | EmbeddedResource]:
    """Returns text, image and resource content."""
    return [
        Text("Multiple content types test:"),
        Image(PNG, "image/png"),
        EmbeddedResource(
            "test://mixed-content-resource", text='{"test":"data","value":123}', mime_type="application/json"
        ),
    ]


# The json-schema-2020-12 scenario's tool: a hand-written input schema, served exactly as written (SEP-1613,
# SEP-2106) and enforced on every call.
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@agent.tool(input_schema=JSON_SCHEMA_2020_12, contract="Tool with JSON Schema 2020-12 features")
async def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    how = f"phone {phone}" if contactMethod == "phone" else f"email {email}"
    return f"{name or 'someone'} is reached by {how}"


@agent.tool
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three log messages while it runs."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@agent.tool
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    await ctx.progress(0, 100)
    await asyncio.sleep(0.05)
    await ctx.progress(50, 100)
    await asyncio.sleep(0.05)
    await ctx.progress(100, 100)
    return "Progress tool completed"


@agent.tool
async def test_error_handling() -> str:
    """Always fails."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@agent.tool
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model to complete a prompt."""
    sampled = await ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {sampled.text}"


@agent.tool
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user for a username and an email."""
    answer = await ctx.ask(
        message,
        {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        },
    )
    return f"User response: action={answer.action}, content={answer.content}"


@agent.tool
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits with defaults for every primitive type."""
    answer = await ctx.ask(
        "Please review and update the form fields with defaults",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "description": "Verification status", "default": True},
            },
            "required": [],
        },
    )
    return f"Elicitation completed: action={answer.action}, content={answer.content}"


@agent.tool
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits with the five enum shapes."""
    answer = await ctx.ask(
        "Please select options from the enum fields",
        {
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "description": "Select one option",
                    "enum": ["option1", "option2", "option3"],
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Select one option with titles",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"},
                    ],
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Select one option (legacy)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Select multiple options",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Select multiple options with titles",
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"},
                        ]
                    },
                },
            },
            "required": [],
        },
    )
    return f"Elicitation completed: action={answer.action}, content={answer.content}"


@agent.tool
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability."""
    sampled = await ctx.sample("Say hello", max_tokens=10)
    return sampled.text


@agent.tool
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks for the user's name."""
    answer = await ctx.ask("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {(answer.content or {}).get('name', 'stranger')}!"


@agent.tool
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question."""
    sampled = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    return f"The model said: {sampled.text}"


@agent.tool
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Reads the client's roots."""
    roots = await ctx.roots(key="client_roots")
    return "Roots: " + ", ".join(r.uri for r in roots)


@agent.tool
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Round-trips a signed requestState."""
    await ctx.ask(
        "Please confirm",
        {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        key="confirm",
    )
    return "state-ok: the request state was verified"


@agent.tool
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks for a name, a greeting and the roots in one round."""
    answers = await ctx.inputs(
        {
            "user_name": Ask("What is your name?", NAME_SCHEMA),
            "greeting": Sample("Generate a greeting", max_tokens=50),
            "client_roots": ListRoots(),
        }
    )
    return (
        f"{answers['greeting'].text} {(answers['user_name'].content or {}).get('name')} "
        f"({len(answers['client_roots'])} roots)"
    )


@agent.tool
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Asks two questions, one round each."""
    first = await ctx.ask("Step 1: What is your name?", NAME_SCHEMA, key="step1")
    second = await ctx.ask(
        "Step 2: What is your favorite color?",
        {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]},
        key="step2",
    )
    return f"{(first.content or {}).get('name')} likes {(second.content or {}).get('color')}"


@agent.tool
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Rejects a requestState that was changed on the way."""
    await ctx.ask(
        "Please confirm", {"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="confirm"
    )
    return "confirmed"


@agent.tool
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only what the client declared it can answer."""
    wanted = {}
    if ctx.supports("elicitation"):
        wanted["user_name"] = Ask("What is your name?", NAME_SCHEMA)
    if ctx.supports("sampling"):
        wanted["greeting"] = Sample("Generate a greeting", max_tokens=50)
    if not wanted:
        return "nothing to ask"
    answers = await ctx.inputs(wanted)
    return f"answered: {sorted(answers)}"


@agent.prompt
async def test_input_required_result_prompt(ctx: Context) -> list[PromptMessage]:
    """A prompt that needs context from the user first."""
    answer = await ctx.ask(
        "What context should the prompt use?",
        {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
        key="user_context",
    )
    return [PromptMessage("user", f"Use this context: {(answer.content or {}).get('context')}")]


async def _dynamic_tool() -> str:
    """Appears and disappears with test_trigger_tool_change."""
    return "dynamic"


def _dynamic_prompt() -> str:
    """Appears and disappears with test_trigger_prompt_change."""
    return "dynamic prompt"


def _toggle(kind: str, name: str, fn: object) -> str:
    table = agent.tools if kind == "tool" else agent.prompts
    if name in table:
        agent.remove(kind, name)  # type: ignore[arg-type]
        return f"removed {name}"
    agent.add(kind, fn, name=name)  # type: ignore[arg-type]
    return f"added {name}"


@agent.tool
async def test_trigger_tool_change() -> str:
    """Adds or removes test_dynamic_tool, so listeners see tools/list_changed."""
    return _toggle("tool", "test_dynamic_tool", _dynamic_tool)


@agent.tool
async def test_trigger_prompt_change() -> str:
    """Adds or removes test_dynamic_prompt, so listeners see prompts/list_changed."""
    return _toggle("prompt", "test_dynamic_prompt", _dynamic_prompt)


@agent.tool
async def test_streaming_elicitation(ctx: Context) -> str:
    """Reports progress, then asks a question: the stream must never carry the question as a request."""
    await ctx.progress(1, 2, "about to ask")
    answer = await ctx.ask(
        "Continue?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}, key="continue"
    )
    return f"answered: {answer.action}"


@agent.tool
async def test_custom_headers(
    region: Annotated[str, Field(description="Routing region", json_schema_extra={"x-mcp-header": "Region"})],
    priority: Annotated[int | None, Field(json_schema_extra={"x-mcp-header": "Priority"})] = None,
    verbose: Annotated[bool | None, Field(json_schema_extra={"x-mcp-header": "Verbose"})] = None,
) -> str:
    """Arguments mirrored into Mcp-Param-* headers, which the server checks against the body."""
    return f"region={region} priority={priority} verbose={verbose}"


@agent.tool
async def test_logging_tool(ctx: Context) -> str:
    """Logs at every level; a request without a log level must see none of it."""
    for level in ("debug", "info", "warning", "error"):
        await ctx.log(level, f"{level} message")
    return "logged"


@agent.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@agent.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (an image)."""
    return PNG


@agent.resource(
    "test://template/{id}/data",
    name="template",
    mime_type="application/json",
    completions={"id": lambda value: [v for v in ("123", "456", "789") if v.startswith(value)]},
)
def template(id: str) -> str:
    """Data for one id."""
    return f'{{"id":"{id}","templateTest":true,"data":"Data for ID: {id}"}}'


@agent.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched() -> str:
    """A resource that can be subscribed to."""
    return "Watched resource content"


@agent.prompt
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@agent.prompt(
    completions={"arg1": lambda value: [v for v in ("paris", "park", "party") if v.startswith(value)]}
)
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with two arguments.

    Args:
        arg1: First test argument
        arg2: Second test argument
    """
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@agent.prompt
def test_prompt_with_embedded_resource(resourceUri: str) -> list[PromptMessage]:
    """A prompt that embeds a resource.

    Args:
        resourceUri: URI of the resource to embed
    """
    return [
        PromptMessage(
            "user",
            EmbeddedResource(
                resourceUri, text="Embedded resource content for testing.", mime_type="text/plain"
            ),
        ),
        PromptMessage("user", "Please process the embedded resource above."),
    ]


@agent.prompt
def test_prompt_with_image() -> list[PromptMessage]:
    """A prompt with an image."""
    return [
        PromptMessage("user", Image(PNG, "image/png")),
        PromptMessage("user", "Please analyze the image above."),
    ]


# The tasks extension's fixtures (the suite's tasks-* scenarios; docs/mcp.md, "Tasks").


@agent.tool
async def greet(name: str) -> str:
    """Greets someone at once (never a task)."""
    return f"Hello, {name}!"


@agent.tool(task="optional")
async def slow_compute(seconds: float, label: str = "") -> str:
    """Sleeps ``seconds`` seconds, then answers; a task when the caller takes one."""
    await asyncio.sleep(seconds)
    return f"Computed {label or 'result'} after {seconds:g}s"


@agent.tool(task="required")
async def failing_job() -> str:
    """Fails after about a second, as a tool error."""
    await asyncio.sleep(1)
    raise RuntimeError("The job failed")


@agent.tool(task="optional")
async def protocol_error_job() -> str:
    """Fails with a protocol error (the request is refused), after a moment."""
    await asyncio.sleep(0.2)
    raise Rejected("This job always refuses its request")


@agent.tool(task="optional")
async def confirm_delete(filename: str, ctx: Context) -> str:
    """Asks whether to delete ``filename`` (a question inside the task), then says what it did."""
    answer = await ctx.ask(
        f"Delete {filename}?",
        {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]},
    )
    confirmed = answer.accepted and (answer.content or {}).get("confirm") is True
    return f"Deleted {filename}" if confirmed else f"Kept {filename}"


@agent.tool(task="optional")
async def multi_input(ctx: Context) -> str:
    """Asks two things at once; each may be answered on its own."""
    answers = await ctx.inputs(
        {
            "name": Ask("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}),
            "confirm": Ask("Proceed?", {"type": "object", "properties": {"confirm": {"type": "boolean"}}}),
        }
    )
    name = (answers["name"].content or {}).get("name", "someone")
    return f"{name} answered both questions"


@agent.tool(task="required", ask_first=True)
async def test_tool_with_task(ctx: Context) -> str:
    """Asks for a name before the task exists (a multi-round-trip request), then works on as a task."""
    answer = await ctx.ask(
        "What is your name?",
        {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        key="user_name",
    )
    await ctx.continue_as_task()
    await asyncio.sleep(0.3)
    return f"Hello, {(answer.content or {}).get('name', 'someone')}!"


# The skills extension's scenarios (sep-2640-*): one package read from a folder, with a subfolder (the
# directory scenario descends into it).
agent.add_skill_package(SkillPackage.from_folder(Path(__file__).with_name("skills") / "pdf-processing"))

app = Starlette()
app.add_middleware(AgentMiddleware, agent=agent)
