"""``agentmw stdio``: the official MCP client's stdio transport in each of its modes, and the raw wire.

The server is always a real process (``python -m agentmw.cli stdio ...``), on the example app and on
tests/stdio_app.py (an app with its own lifespan, middleware and bearer-token dependency).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from agentmw.cli.stdio import TOKEN_ENV, identity_headers
from agentmw.mcp.stdio import NO_SESSION, StdioBridge, _SseReader, header_value
from tests.helpers.mcp_raw import initialize_request
from tests.stdio_app import TOKEN

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "examples.fastapi_app.main:app"
APP = "tests.stdio_app:app"
POLICIES = ROOT / "examples" / "fastapi_app" / "policies"
MODES = ("legacy", "2026-07-28", "auto")
ERA = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28", "auto": "2026-07-28"}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def server(target: str, *args: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentmw.cli", "stdio", target, *args],
        env={"PYTHONPATH": str(ROOT), **env},
        cwd=str(ROOT),
    )


def answers(content: dict[str, Any]) -> Any:
    async def elicit(_context: Any, params: Any) -> types.ElicitResult:
        assert params.requested_schema["type"] == "object"
        return types.ElicitResult(action="accept", content=content)

    return elicit


# --- the official client, each mode ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_example_over_the_official_client(mode: str) -> None:
    """tools, resources, prompts, the human gate's approval and progress, with the token from the environment."""
    params = server(EXAMPLE, **{TOKEN_ENV: "demo-token"})
    asked_roots: list[int] = []

    async def roots(_context: Any) -> types.ListRootsResult:
        asked_roots.append(1)
        return types.ListRootsResult(roots=[types.Root(uri=POLICIES.as_uri(), name="policies")])

    async with Client(
        params,
        mode=mode,
        cache=None,
        elicitation_callback=answers({"approved": True}),
        list_roots_callback=roots,
    ) as c:
        assert c.protocol_version == ERA[mode]
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"search_assets", "department_budget", "submit_purchase_request"} <= names
        found = await c.call_tool("search_assets", {"query": "laptop"})
        assert [a["sku"] for a in found.structured_content["result"]] == ["LPT-14", "LPT-13"]
        budget = await c.read_resource("budget://engineering")
        assert json.loads(budget.contents[0].text)["total"] == 50000.0
        drafted = await c.get_prompt("purchase_justification", {"sku": "MON-27", "reason": "a new hire"})
        assert "MON-27" in drafted.messages[0].content.text
        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        request = {
            "sku": "MON-27",
            "quantity": 1,
            "department": "engineering",
            "justification": "for the new hire",
        }
        receipt = await c.call_tool(
            "submit_purchase_request", {"request": request}, progress_callback=on_progress
        )
        assert receipt.is_error is False, receipt.content
        assert (
            receipt.structured_content["requested_by"] == "alice"
        )  # demo-token's subject: the agent's auth ran
        assert receipt.structured_content["total"] == 449.0
        assert [p[0] for p in progress] == [1, 2]
        # the rooted-path check asks the client for its roots: a server request (2025) or an MRTR round (2026)
        policy = await c.call_tool("read_policy", {"path": "purchasing.md"})
        assert policy.is_error is False and policy.content[0].text.startswith("# Purchasing policy")
        assert asked_roots


@pytest.mark.parametrize("mode", MODES)
async def test_the_apps_own_auth_dependency_middleware_and_lifespan(mode: str) -> None:
    """The app's bearer dependency refuses an anonymous process and serves one given the token; its middleware's
    request.state and its lifespan's state reach the route."""
    async with Client(server(APP), mode=mode, cache=None) as anonymous:
        with pytest.raises(MCPError, match="a valid bearer token is needed"):
            await anonymous.call_tool("whoami", {})
        assert (await anonymous.call_tool("read_note", {"name": "welcome"})).is_error is False
    given = server(APP, "--token", TOKEN, "--header", "X-Tenant: acme")
    async with Client(given, mode=mode, cache=None, elicitation_callback=answers({"confirm": True})) as c:
        me = await c.call_tool("whoami", {})
        assert me.structured_content == {"user": "notes-admin", "tenant": "acme", "store": "notes-db"}
        deleted = await c.call_tool("delete_note", {"name": "todo"})
        assert deleted.content[0].text == "deleted todo"
        seen = await c.call_tool(
            "regional", {"region": "São Paulo", "text": "olá"}
        )  # Mcp-Param-Region, base64
        assert seen.content[0].text == "São Paulo: olá"
        steps: list[float] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            steps.append(done)

        counted = await c.call_tool("count", {"to": 3}, progress_callback=on_progress)
        assert counted.structured_content == {"result": 3} and steps == [1, 2, 3]
        note = await c.read_resource("notes://welcome")
        assert note.contents[0].text == "Hello from the notes store."
        prompt = await c.get_prompt("summarize", {"name": "welcome"})
        assert "Hello from the notes store." in prompt.messages[0].content.text


async def test_token_from_the_environment() -> None:
    async with Client(server(APP, **{TOKEN_ENV: TOKEN}), mode="auto", cache=None) as c:
        assert (await c.call_tool("whoami", {})).structured_content["user"] == "notes-admin"


async def test_requests_run_at_once() -> None:
    async with Client(server(APP), mode="2026-07-28", cache=None) as c:
        started = time.monotonic()
        results = await asyncio.gather(*(c.call_tool("wait", {"seconds": 1.0}) for _ in range(4)))
        assert [r.content[0].text for r in results] == ["waited"] * 4
        assert time.monotonic() - started < 3.0  # four one-second waits, not one after another


# --- the raw wire ---------------------------------------------------------------------------------------


class Wire:
    """``agentmw stdio`` as a bare process: lines in, lines out."""

    def __init__(self, target: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agentmw.cli", "stdio", target, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
        self.out: list[bytes] = []

    def send(self, *lines: str | dict[str, Any]) -> None:
        assert self.process.stdin is not None
        for line in lines:
            text = line if isinstance(line, str) else json.dumps(line)
            self.process.stdin.write(text.encode() + b"\n")
        self.process.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the server closed stdout"
        self.out.append(line)
        return json.loads(line)

    def until(self, request_id: Any) -> list[dict[str, Any]]:
        seen = []
        while True:
            message = self.read()
            seen.append(message)
            if message.get("id") == request_id and "method" not in message:
                return seen

    def close(self, timeout: float = 15) -> tuple[int, bytes, str]:
        """Close stdin (the client is done); the exit status, the rest of stdout, and stderr."""
        rest, err = self.process.communicate(timeout=timeout)
        self.out.extend(rest.splitlines(keepends=True))
        return self.process.returncode, rest, err.decode()


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "lifespan.txt"


def _only_json(lines: list[bytes]) -> list[dict[str, Any]]:
    parsed = []
    for line in lines:
        assert line.endswith(b"\n"), line
        message = json.loads(line)
        assert isinstance(message, dict) and message["jsonrpc"] == "2.0", line
        parsed.append(message)
    return parsed


def modern(request_id: int, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": MODERN_META}}


def test_bad_lines_get_json_rpc_errors_and_eof_ends_cleanly(marker: Path) -> None:
    wire = Wire(APP, env={"STDIO_APP_MARKER": str(marker)})
    wire.send("this is not json {")
    first = wire.read()
    assert first["id"] is None and first["error"]["code"] == -32700
    wire.send(
        "[]", '{"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list"}', '{"jsonrpc": "2.0", "id": 5}', ""
    )
    assert wire.read()["error"]["code"] == -32600  # a batch
    assert wire.read() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "an id is a string or a number"},
    }
    assert wire.read() == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {"code": -32600, "message": "not a JSON-RPC request, notification or response"},
    }
    wire.send(modern(1, "tools/call", name="count", arguments={"to": 2}))  # it prints to stdout
    wire.send(modern(2, "tools/list"))
    got = {m["id"]: m for m in (wire.read(), wire.read()) if "id" in m}
    assert got[2]["result"]["tools"] and got[1]["result"]["structuredContent"] == {"result": 2}
    code, _, err = wire.close()
    assert code == 0
    assert "Traceback" not in err, err
    assert "counting 2" in err and "lifespan: opening the notes store" in err  # prints went to stderr
    _only_json(wire.out)  # and stdout carried protocol messages only
    assert marker.read_text().split() == ["started", "stopped"]  # the app's lifespan ran, once, both ends


def test_handshake_era_on_the_raw_wire() -> None:
    wire = Wire(APP)
    wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert wire.read() == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": NO_SESSION}}
    wire.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert wire.read() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    # pipelined, as a script sends it: initialize, initialized and a call before the first answer is back
    wire.send(
        initialize_request(revision="2025-06-18", request_id=3),
        INITIALIZED,
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "read_note", "arguments": {"name": "welcome"}},
        },
    )
    assert wire.read()["result"]["protocolVersion"] == "2025-06-18"
    note = wire.read()["result"]["content"][0]["text"]
    assert json.loads(note) == "Hello from the notes store."  # the route's JSON body
    code, _, err = wire.close()
    assert code == 0 and "Traceback" not in err, err


def test_elicitation_round_trip_on_the_raw_wire() -> None:
    wire = Wire(APP)
    wire.send(initialize_request(revision="2025-11-25", request_id=1, capabilities={"elicitation": {}}))
    assert wire.read()["id"] == 1
    wire.send(
        INITIALIZED,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "delete_note", "arguments": {"name": "welcome"}},
        },
    )
    asked = wire.read()
    assert asked["method"] == "elicitation/create" and "welcome" in asked["params"]["message"]
    wire.send(
        {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"confirm": False}}}
    )
    assert wire.until(2)[-1]["result"]["content"][0]["text"] == "kept welcome"
    code, _, err = wire.close()
    assert code == 0 and "Traceback" not in err, err
    _only_json(wire.out)


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_a_cancelled_request_gets_no_answer_and_others_go_on(era: str) -> None:
    wire = Wire(APP)
    if era == "2026-07-28":
        wait, listing = (
            modern(1, "tools/call", name="wait", arguments={"seconds": 30}),
            modern(2, "tools/list"),
        )
    else:
        wire.send(
            initialize_request(revision=era, request_id=0),
            INITIALIZED,
        )
        assert wire.read()["id"] == 0
        wait = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "wait", "arguments": {"seconds": 30}},
        }
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    wire.send(wait)
    time.sleep(0.5)
    wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}, listing)
    assert wire.until(2)[-1]["result"]["tools"]
    started = time.monotonic()
    code, _, err = wire.close()
    assert code == 0 and "Traceback" not in err, err
    assert time.monotonic() - started < 5  # nothing was left running to drain
    assert all(m.get("id") != 1 for m in _only_json(wire.out))


def test_sigterm_stops_a_running_request_and_runs_the_shutdown(marker: Path) -> None:
    wire = Wire(APP, env={"STDIO_APP_MARKER": str(marker)})
    wire.send(modern(1, "tools/call", name="wait", arguments={"seconds": 60}))
    time.sleep(1.0)
    wire.process.send_signal(signal.SIGTERM)
    started = time.monotonic()
    code = wire.process.wait(timeout=15)
    _, err = wire.process.communicate()
    assert code == 0 and time.monotonic() - started < 10
    assert b"Traceback" not in err, err
    assert marker.read_text().split() == ["started", "stopped"]


def test_the_secret_is_never_printed_and_credentials_conflict() -> None:
    wire = Wire(EXAMPLE, "--token", "very-secret-token", "--log-level", "debug")
    wire.send(modern(1, "tools/call", name="submit_purchase_request", arguments={"request": {}}))
    assert wire.read()["id"] == 1
    code, _, err = wire.close()
    assert code == 0 and "very-secret-token" not in err and "credential: --token" in err
    refused = subprocess.run(
        [sys.executable, "-m", "agentmw.cli", "stdio", APP, "--token", "a", "-H", "Authorization: Bearer b"],
        check=False,
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=30,
    )
    assert refused.returncode == 2 and refused.stdout == b""
    assert b"give the credential once" in refused.stderr


@pytest.mark.parametrize(
    ("how", "token", "says"),
    [
        ("env", "t\u20acken", b"cannot carry"),
        ("flag", "t\u20acken", b"cannot carry"),
        ("env", "abc\ndef", b"control character"),
        ("flag", "abc\rdef", b"control character"),
        ("header", "abc\x1bdef", b"control character"),
    ],
)
def test_a_token_or_header_http_cannot_carry_is_a_usage_error_at_start(
    how: str, token: str, says: bytes
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "agentmw.cli", "stdio", APP]
    if how == "env":
        env[TOKEN_ENV] = token
    elif how == "flag":
        args += ["--token", token]
    else:
        args += ["-H", f"Authorization: Bearer {token}"]
    line = json.dumps(modern(1, "tools/list")) + "\n"
    done = subprocess.run(
        args, input=line.encode(), check=False, capture_output=True, cwd=ROOT, env=env, timeout=30
    )
    assert done.returncode == 2 and done.stdout == b"", (done.returncode, done.stdout)
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and says in err[0] and b"Traceback" not in done.stderr, done.stderr
    assert token.encode("utf-8", "replace") not in done.stderr, "the credential is never echoed"
    if how != "header":
        assert (TOKEN_ENV if how == "env" else "--token").encode() in err[0], (
            "it says where the token came from"
        )


def test_a_target_that_does_not_import_is_a_usage_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentmw.cli", "stdio", "tests.no_such_module:app"],
        check=False,
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=30,
    )
    assert done.returncode == 2 and done.stdout == b"" and b"no such module" in done.stderr


# --- pure parts -----------------------------------------------------------------------------------------


def test_header_values_are_wrapped_when_not_plain_ascii() -> None:
    assert header_value("eu-west") == "eu-west"
    assert header_value("São Paulo") == "=?base64?U8OjbyBQYXVsbw==?="
    assert header_value(" padded") == "=?base64?IHBhZGRlZA==?="
    assert header_value("line\nbreak").startswith("=?base64?")


def test_identity_precedence() -> None:
    env = {TOKEN_ENV: "from-env"}
    assert identity_headers([], None, env) == ({"authorization": "Bearer from-env"}, f"${TOKEN_ENV}")
    assert identity_headers([], "flag", env)[0] == {"authorization": "Bearer flag"}
    headers, source = identity_headers(["Authorization: Basic abc", "X-Tenant: acme"], None, env)
    assert headers == {"authorization": "Basic abc", "x-tenant": "acme"} and "--header" in source
    assert identity_headers([], None, {}) == ({}, "none (anonymous)")
    with pytest.raises(ValueError):
        identity_headers(["no colon"], None, {})
    with pytest.raises(ValueError):
        identity_headers(["Authorization: Bearer x"], "y", {})
    with pytest.raises(ValueError, match="cannot carry"):
        identity_headers(["X-Price: 5 €"], None, {})
    for bad in ("X-Tenant: a\r\nX-Admin: 1", "X-Tenant: a\x7f", "X Tenant: a"):
        with pytest.raises(ValueError):
            identity_headers([bad], None, {})
    assert identity_headers(["X-Tenant: a\tb"], None, {})[0] == {"x-tenant": "a\tb"}  # a tab is allowed
    for source, args in (("--token", ("t\u20ac", {})), (f"${TOKEN_ENV}", (None, {TOKEN_ENV: "a\nb"}))):
        with pytest.raises(ValueError, match=f"the token from {re.escape(source)}") as caught:
            identity_headers([], *args)
        assert "t\u20ac" not in str(caught.value) and "a\nb" not in str(caught.value)
    with pytest.raises(ValueError, match="control character"):
        StdioBridge(lambda *a: None, print, headers={"authorization": "Bearer a\nb"})  # type: ignore[arg-type]


def test_sse_reader_joins_split_events_and_skips_comments() -> None:
    reader = _SseReader()
    assert reader.feed(b': ping\n\nid: a-1\ndata: {"a"') == []
    assert reader.feed(b": 1}\r\n\r\ndata: [2]\n\n") == [{"a": 1}, [2]]


async def test_resource_updates_reach_a_subscriber_in_each_era() -> None:
    """2025: resources/subscribe, then the session's GET stream; 2026: subscriptions/listen, ended by the client."""
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    async with Client(server(APP), mode="legacy", cache=None, message_handler=on_message) as c:
        with pytest.warns(MCPDeprecationWarning):  # the 2025 way, as a 2025 client does it
            await c.subscribe_resource("notes://welcome")
        assert (await c.call_tool("edit_note", {"name": "welcome", "text": "v2"})).is_error is False
        deadline = time.monotonic() + 10
        while not updates and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert updates == ["notes://welcome"]
    async with Client(server(APP), mode="2026-07-28", cache=None) as c:
        async with c.listen(resource_subscriptions=["notes://welcome"]) as subscription:
            await c.call_tool("edit_note", {"name": "welcome", "text": "v3"})
            event = await asyncio.wait_for(anext(aiter(subscription)), 10)
            assert "notes://welcome" in repr(event)
        assert (
            await c.call_tool("read_note", {"name": "welcome"})
        ).is_error is False  # the listen ended cleanly


def test_app_dir_serves_a_project_from_anywhere(tmp_path: Path) -> None:
    """Desktop clients start servers in a folder of their own: --app-dir names the project's."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "agentmw.cli", "stdio", APP, "--app-dir", str(ROOT)],
        check=False,
        input=json.dumps(modern(1, "tools/list")).encode() + b"\n",
        capture_output=True,
        cwd=tmp_path,
        env=env,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert "whoami" in {t["name"] for t in json.loads(done.stdout)["result"]["tools"]}
    assert list(tmp_path.iterdir()) == []  # and nothing was left where it was started (no store file)


def test_eof_with_an_unanswered_question_ends_after_the_drain() -> None:
    wire = Wire(APP, "--drain", "1")
    wire.send(
        initialize_request(revision="2025-11-25", request_id=1, capabilities={"elicitation": {}}),
        INITIALIZED,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "delete_note", "arguments": {"name": "welcome"}},
        },
    )
    assert wire.read()["id"] == 1
    assert wire.read()["method"] == "elicitation/create"
    started = time.monotonic()
    code, rest, err = wire.close()  # the question can never be answered now
    assert code == 0 and time.monotonic() - started < 8 and "Traceback" not in err
    assert rest == b""  # the call was cancelled: no answer for it


def test_a_client_that_closes_stdout_ends_the_process() -> None:
    wire = Wire(APP)
    assert wire.process.stdout is not None and wire.process.stderr is not None
    wire.process.stdout.close()
    wire.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})  # its answer has nowhere to go
    assert wire.process.wait(timeout=15) == 0
    assert b"Traceback" not in wire.process.stderr.read()
    wire.process.stdin.close()  # type: ignore[union-attr]
    wire.process.stderr.close()
