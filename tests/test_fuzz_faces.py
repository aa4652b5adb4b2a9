"""A small, deterministic fuzz over every face (issue 22, item 3): MCP in both eras, A2A over both bindings, AG-UI.

Each face gets a few hundred requests made from valid ones by a seeded generator: values swapped for others of
the wrong type, keys dropped, unknown keys added, lists and nesting blown up, bodies cut short or with bytes
that are not UTF-8. Every answer must be the protocol's: no 5xx; a well-formed JSON-RPC error (or result)
that carries the request's id whenever the request had a valid one; the binding's error shape on A2A's
HTTP+JSON and AG-UI; and no log record at ERROR or with a traceback. Served in-process over ASGI, so the run
takes seconds, and the seed makes every failure reproducible (the case's number is in the message).
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Context
from agentmw.safety import human_gate

SEED = int(os.environ.get("AGENTMW_FUZZ_SEED", "22"))  # other seeds, more cases: a longer run, by hand
CASES = int(os.environ.get("AGENTMW_FUZZ_CASES", "300"))
HANDSHAKE = "2025-11-25"
STATELESS = "2026-07-28"
MCP = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
MAX_BODY_BYTES = 4 * 1024 * 1024  # the agent's default
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def build() -> Starlette:
    agent = Agent("fuzz", store="memory://")

    @agent.skill
    async def echo(text: str) -> str:
        """Repeat the text.

        Summary:
            Repeats what it is told, for the fuzz run.
        """
        return text[:100]

    @agent.tool
    async def add(a: int, b: int = 0) -> int:
        """Add two integers."""
        return a + b

    @agent.tool
    async def confirm(item: str, ctx: Context) -> str:
        """Ask before going on."""
        answer = await ctx.ask(
            f"Go on with {item[:20]}?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}
        )
        return answer.action

    @agent.tool
    @human_gate(side_effects="Writes nothing real")
    async def gated(item: str) -> str:
        """A gated write."""
        return item[:20]

    @agent.resource("fuzz://note/{name}")
    async def note(name: str) -> str:
        """A note."""
        return name[:20]

    @agent.prompt
    async def greet(name: str) -> str:
        """A greeting."""
        return f"Hello {name[:20]}"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


# --- the generator ---------------------------------------------------------------------------------------------


class Raw(str):
    """JSON text put into a body as it is (nesting deeper than Python's encoder writes)."""


def hostile_value(rng: random.Random) -> Any:
    choices: list[Callable[[], Any]] = [
        lambda: None,
        lambda: True,
        lambda: False,
        lambda: 0,
        lambda: -1,
        lambda: 2**63,
        lambda: -(2**70),
        lambda: 1.5,
        lambda: 1e308,
        lambda: "",
        lambda: "x" * rng.choice((1, 300, 70_000)),
        lambda: "\u202e\u0000\ufffd\U0001f600",
        lambda: "..%u2215secret",
        list,
        dict,
        lambda: [None] * rng.choice((2, 50)),
        lambda: {"nested": {"deeper": [1, {"x": None}]}},
        lambda: list(range(rng.choice((10, 12_000)))),
        lambda: [{"text": ""}] * rng.choice((3, 2_000)),
        lambda: deep('{"a":', "1", "}", rng.choice((30, 70, 300, 1_200))),
        lambda: deep("[", "", "]", rng.choice((65, 260, 990))),
        lambda: Raw('"\\ud800"'),
        lambda: Raw("1e400"),
        lambda: Raw("NaN"),
    ]
    return rng.choice(choices)()


def deep(opening: str, inner: str, closing: str, depth: int) -> Raw:
    return Raw(opening * depth + inner + closing * depth)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            yield from paths(item, (*prefix, index))


def mutate(body: Any, rng: random.Random) -> Any:
    body = copy.deepcopy(body)
    for _ in range(rng.choice((1, 1, 2, 3))):
        where = rng.choice(list(paths(body)))
        if not where:
            if rng.random() < 0.3:
                return hostile_value(rng)
            continue
        parent = body
        for step in where[:-1]:
            parent = parent[step]
        key = where[-1]
        action = rng.random()
        if action < 0.6:
            parent[key] = hostile_value(rng)
        elif action < 0.8 and isinstance(parent, dict):
            del parent[key]
        elif isinstance(parent, dict):
            parent[rng.choice(("extra", "_meta", "id", "params", "jsonrpc", "snake_case"))] = hostile_value(
                rng
            )
    return body


def encode(body: Any, rng: random.Random) -> bytes:
    raws: dict[str, str] = {}

    def mark(value: Any) -> Any:
        if isinstance(value, Raw):
            token = f"@RAW{len(raws)}@"
            raws[token] = str(value)
            return token
        if isinstance(value, dict):
            return {k: mark(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mark(v) for v in value]
        return value

    text = json.dumps(mark(body), separators=(",", ":"))
    for token, raw in raws.items():
        text = text.replace(f'"{token}"', raw)
    data = text.encode("utf-8", "surrogatepass")
    roll = rng.random()
    if roll < 0.04:
        return data[: rng.randrange(len(data) + 1)]  # cut short
    if roll < 0.06:
        return data + b"\xff"
    if roll < 0.07:
        return b"[" + data + b"]"  # a batch
    return data


def request_id(raw: bytes) -> tuple[bool, Any]:
    """Whether the request, as the server can read it, is one (it has a ``method``) with a valid JSON-RPC id,
    and which. A body over ``max_body_bytes`` is refused unread (413), so it has none."""
    if len(raw) > MAX_BODY_BYTES:
        return False, None

    def not_json(text: str) -> Any:
        raise ValueError(f"{text} is not JSON")

    def finite(text: str) -> float:
        value = float(text)
        if math.isinf(value):
            raise ValueError("number out of range")
        return value

    try:  # strict, as the server reads it: NaN, Infinity and 1e400 make the body unreadable, and so its id
        body = json.loads(raw.decode("utf-8"), parse_constant=not_json, parse_float=finite)
    except (ValueError, RecursionError):
        return False, None
    if not isinstance(body, dict) or "id" not in body or "method" not in body:
        return False, None  # not a request: a response's id is one of the server's, never put on an error
    value = body["id"]
    valid = isinstance(value, (str, int)) and not isinstance(value, bool)
    if isinstance(
        value, str
    ):  # a lone surrogate is read as U+FFFD, so that every answer is UTF-8 (_transport.py)
        value = re.sub("[\ud800-\udfff]", "\ufffd", value)
    return valid, value


# --- what an answer must look like ------------------------------------------------------------------------------


def sse_payloads(response: httpx.Response) -> list[Any]:
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


def check_jsonrpc(message: Any, raw: bytes, case: str) -> None:
    assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", case
    if "error" in message:
        error = message["error"]
        assert (
            isinstance(error, dict)
            and isinstance(error.get("code"), int)
            and isinstance(error.get("message"), str)
        ), case
    else:
        assert "result" in message or "method" in message, case
    if "method" in message:  # a notification or request of the server's, on a stream
        return
    has_id, wanted = request_id(raw)
    if has_id:
        assert message.get("id") == wanted, f"{case}: answered with id {message.get('id')!r}, not {wanted!r}"


def check_rpc_response(response: httpx.Response, raw: bytes, case: str) -> None:
    assert response.status_code < 500, f"{case}: {response.status_code} {response.text[:300]}"
    if response.status_code == 202 or not response.content:
        return
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        payloads = sse_payloads(response)
        assert payloads, case
        for message in payloads:
            check_jsonrpc(message, raw, case)
        return
    check_jsonrpc(response.json(), raw, case)


def check_rest_response(response: httpx.Response, case: str) -> None:
    assert response.status_code < 500, f"{case}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        error = response.json().get("error")
        assert isinstance(error, dict) and isinstance(error.get("message"), str), (
            f"{case}: {response.text[:300]}"
        )
        assert error.get("code") == response.status_code, case
    elif response.headers.get("content-type", "").startswith("text/event-stream"):
        assert all(isinstance(p, dict) for p in sse_payloads(response)), case
    else:
        response.json()


def check_agui_response(response: httpx.Response, case: str) -> None:
    assert response.status_code < 500, f"{case}: {response.status_code} {response.text[:300]}"
    if response.status_code >= 400:
        assert "detail" in response.json(), f"{case}: {response.text[:300]}"
    else:
        events = sse_payloads(response)
        assert events and events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR"), f"{case}: {events[-1:]}"


# --- the faces --------------------------------------------------------------------------------------------------


def mcp_templates(era: str) -> list[dict[str, Any]]:
    meta = {"_meta": META} if era == STATELESS else {}
    return [
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, **meta}}
        for method, params in (
            ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),
            ("tools/call", {"name": "confirm", "arguments": {"item": "x"}}),
            ("tools/call", {"name": "gated", "arguments": {"item": "x"}}),
            ("tools/list", {}),
            ("resources/read", {"uri": "fuzz://note/a"}),
            ("prompts/get", {"name": "greet", "arguments": {"name": "a"}}),
            (
                "completion/complete",
                {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "a"}},
            ),
            ("logging/setLevel", {"level": "info"}),
            ("ping", {}),
        )
    ] + [
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "id": 5, "result": {"action": "accept"}},
    ]


def a2a_message() -> dict[str, Any]:
    return {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}], "metadata": {"skill": "echo"}}


A2A_RPC = [
    {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": a2a_message()}},
    {"jsonrpc": "2.0", "id": 2, "method": "SendStreamingMessage", "params": {"message": a2a_message()}},
    {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "t-1", "historyLength": 1}},
    {"jsonrpc": "2.0", "id": 4, "method": "ListTasks", "params": {"pageSize": 2}},
    {"jsonrpc": "2.0", "id": 5, "method": "CancelTask", "params": {"id": "t-1"}},
    {
        "jsonrpc": "2.0",
        "id": 6,
        "method": "CreateTaskPushNotificationConfig",
        "params": {"taskId": "t-1", "url": "https://example.com/hook", "token": "tok"},
    },
    {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "message/send",
        "params": {
            "message": {
                "messageId": "m-2",
                "role": "user",
                "kind": "message",
                "parts": [{"kind": "text", "text": "hi"}],
            }
        },
    },
]
A2A_REST = [
    ("POST", "/a2a/message:send", {"message": a2a_message()}),
    ("POST", "/a2a/message:stream", {"message": a2a_message()}),
    ("POST", "/a2a/tasks/t-1:cancel", {}),
    ("POST", "/a2a/tasks/t-1/pushNotificationConfigs", {"url": "https://example.com/hook", "token": "tok"}),
]


def agui_template() -> dict[str, Any]:
    return {
        "threadId": "t-1",
        "runId": "r-1",
        "state": {"count": 1, "items": ["a"]},
        "messages": [
            {"id": "u1", "role": "user", "content": "hi"},
            {
                "id": "a1",
                "role": "assistant",
                "content": "ok",
                "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"id": "u2", "role": "user", "content": [{"type": "text", "text": "again"}]},
        ],
        "tools": [{"name": "t", "description": "d", "parameters": {"type": "object"}}],
        "context": [{"description": "d", "value": "v"}],
        "forwardedProps": {"arguments": {"text": "x"}},
    }


def fresh_ids(body: Any, case: int) -> Any:
    """Unique run, thread and message ids, so that cases do not collide on them (a mutation may still)."""
    if isinstance(body, dict):
        for key in ("threadId", "runId", "messageId"):
            if isinstance(body.get(key), str):
                body[key] = f"{body[key]}-{case}"
        for value in body.values():
            fresh_ids(value, case)
    elif isinstance(body, list):
        for value in body:
            fresh_ids(value, case)
    return body


@pytest.fixture
def loud(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    caplog.set_level(logging.DEBUG)

    def records() -> list[str]:
        return [
            f"{r.name} {r.levelname}: {r.getMessage()[:200]}"
            for r in caplog.records
            if r.levelno >= logging.ERROR or r.exc_info
        ]

    yield records


def client(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
        base_url="http://127.0.0.1:8000",
        timeout=30,
    )


@pytest.mark.parametrize("era", [HANDSHAKE, STATELESS])
async def test_fuzz_mcp(era: str, loud: Callable[[], list[str]]) -> None:
    rng = random.Random(f"{SEED}-mcp-{era}")
    templates = mcp_templates(era)
    async with client(build()) as http:
        headers = {**MCP, "mcp-protocol-version": era}
        if era == HANDSHAKE:
            init = await http.post(
                "/mcp",
                headers=MCP,
                json={
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": era,
                        "capabilities": {},
                        "clientInfo": {"name": "fuzz", "version": "1"},
                    },
                },
            )
            headers["mcp-session-id"] = init.headers["mcp-session-id"]
        for case in range(CASES):
            template = rng.choice(templates)
            body = mutate(template, rng) if case % 10 else template
            raw = encode(body, rng)
            method = template.get("method", "")
            sent = {**headers, "mcp-method": method} if era == STATELESS and rng.random() < 0.9 else headers
            if era == STATELESS and method == "tools/call" and rng.random() < 0.9:
                sent = {**sent, "mcp-name": template["params"]["name"]}
            response = await http.post("/mcp", content=raw, headers=sent)
            check_rpc_response(response, raw, f"MCP {era} case {case}: {raw[:200]!r}")
    assert loud() == []


async def test_fuzz_a2a_jsonrpc(loud: Callable[[], list[str]]) -> None:
    rng = random.Random(f"{SEED}-a2a-rpc")
    async with client(build()) as http:
        for case in range(CASES):
            template = fresh_ids(copy.deepcopy(rng.choice(A2A_RPC)), case)
            body = mutate(template, rng) if case % 10 else template
            raw = encode(body, rng)
            version = "0.3" if template["method"].count("/") else "1.0"
            response = await http.post(
                "/a2a", content=raw, headers={"a2a-version": version, "content-type": "application/json"}
            )
            check_rpc_response(response, raw, f"A2A JSON-RPC case {case}: {raw[:200]!r}")
    assert loud() == []


async def test_fuzz_a2a_http_json(loud: Callable[[], list[str]]) -> None:
    rng = random.Random(f"{SEED}-a2a-rest")
    async with client(build()) as http:
        for case in range(CASES):
            verb, path, template = rng.choice(A2A_REST)
            template = fresh_ids(copy.deepcopy(template), case)
            body = mutate(template, rng) if case % 10 else template
            raw = encode(body, rng)
            response = await http.request(
                verb, path, content=raw, headers={"a2a-version": "1.0", "content-type": "application/json"}
            )
            check_rest_response(response, f"A2A HTTP+JSON case {case} {verb} {path}: {raw[:200]!r}")
    assert loud() == []


async def test_fuzz_agui(loud: Callable[[], list[str]]) -> None:
    rng = random.Random(f"{SEED}-agui")
    async with client(build()) as http:
        for case in range(CASES):
            template = fresh_ids(agui_template(), case)
            body = mutate(template, rng) if case % 10 else template
            raw = encode(body, rng)
            response = await http.post(
                "/agui/echo", content=raw, headers={"content-type": "application/json"}
            )
            check_agui_response(response, f"AG-UI case {case}: {raw[:200]!r}")
    assert loud() == []
