"""The official A2A JavaScript client against agentmw over a real socket: ``@a2a-js/sdk`` 1.3.0 on JSON-RPC and
HTTP+JSON, and 0.3.14 against the 0.3 methods. Sends (blocking and streaming), a question and its answer,
subscriptions to a parked and to a quiet task, cancel, get and list, each as the client's own types read them
(``tests/a2a_js/client.mjs``)."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import agentmw
from agentmw import Agent, AgentMiddleware, Context
from tests.conftest import require_tool, serve

HARNESS = Path(__file__).parent / "a2a_js" / "client.mjs"
SETUP = "run `scripts/setup-tools` (or `scripts/setup`, which runs it) to install it"
CLIENTS = [("1.3", "JSONRPC"), ("1.3", "HTTP+JSON"), ("0.3", "JSONRPC")]
RANK = {"submitted": 0, "working": 1, "input-required": 1, "completed": 2, "canceled": 2, "failed": 2}

gates: dict[
    str, asyncio.Event
] = {}  # a pondering skill waits on its text's gate; POST /test/release/<text> opens it


def node() -> str:
    found = require_tool("Node (>= 20)", shutil.which("node"), "install Node >= 20, then run `scripts/setup`")
    require_tool("@a2a-js/sdk 1.3.0", HARNESS.parent / "node_modules" / "@a2a-js" / "sdk", SETUP)
    require_tool("@a2a-js/sdk 0.3.14 (a2a-js-0.3)", HARNESS.parent / "node_modules" / "a2a-js-0.3", SETUP)
    return found


def identify(connection: HTTPConnection) -> str | None:
    return connection.headers.get("authorization", "").partition(" ")[2] or None


def build() -> Starlette:
    agent = Agent("a2a-js", "1.0.0", identify=identify)

    @agent.skill
    async def echo(text: str) -> str:
        """Echo text back.

        Summary:
            Repeats what it is told.
        """
        return f"echo: {text}"

    @agent.skill
    async def approve(item: str, ctx: Context) -> str:
        """Ask whether to approve an item.

        Summary:
            Waits for a human decision.
        """
        await ctx.progress(1, 2, "checking")
        answer = await ctx.ask(
            f"Approve {item}?",
            {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]},
        )
        return f"{item}: {'approved' if (answer.content or {}).get('approved') else 'declined'}"

    @agent.skill
    async def ponder(text: str, ctx: Context) -> agentmw.Message:
        """Think, then reply with a message.

        Summary:
            May answer with a message and no task.
        """
        gate = gates.setdefault(text, asyncio.Event())
        await ctx.progress(1, 2, "thinking")
        await gate.wait()
        return agentmw.Message(f"thought about {text}")

    async def release(request: Request) -> JSONResponse:
        gates.setdefault(request.path_params["text"], asyncio.Event()).set()
        return JSONResponse({})

    app = Starlette(routes=[Route("/test/release/{text}", release, methods=["POST"])])
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


@pytest.fixture(scope="module")
def url():
    node()
    with serve(build()) as base:
        yield base


def drive(
    url: str, sdk: str, binding: str, steps: list[dict[str, Any]], token: str = "js-user"
) -> dict[str, Any]:
    scenario = {"url": url, "sdk": sdk, "binding": binding, "token": token, "steps": steps}
    run = subprocess.run(
        [node(), str(HARNESS), json.dumps(scenario)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=HARNESS.parent,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    return {step["as"]: step for step in out["steps"]}


def msg(
    sdk: str,
    skill: str,
    *,
    text: str | None = None,
    data: dict[str, Any] | None = None,
    task: str | None = None,
) -> dict[str, Any]:
    """A SendMessage request in the client's own JSON: 1.3 ProtoJSON, or 0.3's params."""
    if sdk == "0.3":
        parts = [{"kind": "text", "text": text}] if text is not None else [{"kind": "data", "data": data}]
        message: dict[str, Any] = {"kind": "message", "role": "user", "parts": parts}
    else:
        parts = [{"text": text}] if text is not None else [{"data": data}]
        message = {"role": "ROLE_USER", "parts": parts}
    message.update(messageId=uuid.uuid4().hex, metadata={"skill": skill})
    if task is not None:
        message["taskId"] = task
    return {"message": message}


def state(sdk: str, value: str) -> str:
    """A state as one client writes it, for the other's: 1.3 says TASK_STATE_WORKING, 0.3 says working."""
    return value if sdk == "0.3" else value.upper().replace("-", "_").join(["TASK_STATE_", ""])


def kind(sdk: str, event: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """What an event is (task, status, artifact, message) and its body, in either client's shape."""
    if sdk == "0.3":
        return {
            "task": "task",
            "status-update": "status",
            "artifact-update": "artifact",
            "message": "message",
        }[event["kind"]], event
    ((name, body),) = event.items()
    return {"task": "task", "statusUpdate": "status", "artifactUpdate": "artifact", "message": "message"}[
        name
    ], body


def states_of(sdk: str, events: list[dict[str, Any]]) -> list[str]:
    out = []
    for event in events:
        what, body = kind(sdk, event)
        if what in ("task", "status"):
            raw = body["status"]["state"]
            out.append(raw if sdk == "0.3" else raw.removeprefix("TASK_STATE_").lower().replace("_", "-"))
    return out


def assert_ordered(sdk: str, events: list[dict[str, Any]]) -> None:
    """The Task first, states never backwards, each artifact once."""
    assert events and kind(sdk, events[0])[0] == "task", events[:1]
    states = states_of(sdk, events)
    assert all(RANK[a] <= RANK[b] for a, b in itertools.pairwise(states)), states
    artifacts = [kind(sdk, e)[1]["artifact"]["artifactId"] for e in events if kind(sdk, e)[0] == "artifact"]
    assert len(artifacts) == len(set(artifacts)), artifacts


@pytest.mark.parametrize(("sdk", "binding"), CLIENTS)
def test_blocking_and_streaming_sends(url: str, sdk: str, binding: str) -> None:
    got = drive(
        url,
        sdk,
        binding,
        [
            {"op": "send", "as": "sent", "request": msg(sdk, "echo", text="hi")},
            {"op": "stream", "as": "streamed", "request": msg(sdk, "echo", text="there")},
            {"op": "get", "as": "got", "request": {"id": "{streamed}"}},
        ],
    )
    sent = got["sent"]["result"] if sdk == "0.3" else got["sent"]["result"]["task"]
    assert sent["status"]["state"] == state(sdk, "completed")
    assert json.dumps(sent["artifacts"]).count("echo: hi") == 1
    events = got["streamed"]["events"]
    assert got["streamed"]["ended"], "the stream ends at the terminal state"
    assert_ordered(sdk, events)
    first = kind(sdk, events[0])[1]
    assert (
        states_of(sdk, events)[0] == "submitted" and len(first["history"]) == 1 and not first.get("artifacts")
    )
    assert states_of(sdk, events)[-1] == "completed" and kind(sdk, events[-1])[0] == "status"
    assert [kind(sdk, e)[0] for e in events].count("artifact") == 1
    assert got["got"]["result"]["status"]["state"] == state(sdk, "completed")


@pytest.mark.parametrize(("sdk", "binding"), CLIENTS)
def test_a_question_and_its_answer(url: str, sdk: str, binding: str) -> None:
    got = drive(
        url,
        sdk,
        binding,
        [
            {"op": "stream", "as": "asked", "request": msg(sdk, "approve", data={"item": "x"})},
            {
                "op": "stream",
                "as": "answered",
                "request": msg(sdk, "approve", data={"approved": True}, task="{asked}"),
            },
            {"op": "get", "as": "got", "request": {"id": "{asked}"}},
        ],
    )
    asked, answered = got["asked"]["events"], got["answered"]["events"]
    assert_ordered(sdk, asked)
    assert states_of(sdk, asked) == ["submitted", "working", "working", "input-required"]
    assert "Approve x?" in json.dumps(asked[-1])
    assert_ordered(sdk, answered)
    assert states_of(sdk, answered)[0] == "input-required" and states_of(sdk, answered)[-1] == "completed"
    final = got["got"]["result"]
    assert final["status"]["state"] == state(sdk, "completed") and "x: approved" in json.dumps(
        final["artifacts"]
    )
    # the client's view, built as a2a-sdk's task manager builds it: the first Task's history and every status
    # message after it; nothing twice, nothing missing
    history = len(kind(sdk, asked[0])[1]["history"]) + sum(
        1 for e in asked[1:] if kind(sdk, e)[0] == "status" and kind(sdk, e)[1]["status"].get("message")
    )
    assert history == len(kind(sdk, answered[0])[1]["history"]) - 1  # the answer is the one more
    assert len(kind(sdk, answered[0])[1]["history"]) + sum(
        1 for e in answered[1:] if kind(sdk, e)[0] == "status" and kind(sdk, e)[1]["status"].get("message")
    ) == len(final["history"])


@pytest.mark.parametrize(("sdk", "binding"), CLIENTS)
def test_subscribe_to_a_parked_task_then_cancel_it(url: str, sdk: str, binding: str) -> None:
    got = drive(
        url,
        sdk,
        binding,
        [
            {"op": "stream", "as": "parked", "request": msg(sdk, "approve", data={"item": "y"})},
            {"op": "subscribe", "as": "sub", "request": {"id": "{parked}"}, "take": 1},
            {"op": "cancel", "as": "canceled", "request": {"id": "{parked}"}},
            {"op": "rest", "as": "after", "of": "sub"},
            {"op": "cancel", "as": "again", "request": {"id": "{parked}"}},
        ],
    )
    first = got["sub"]["events"]
    assert len(first) == 1 and states_of(sdk, first) == ["input-required"], "the current task, at once"
    assert got["canceled"]["result"]["status"]["state"] == state(sdk, "canceled")
    assert got["after"]["ended"] and states_of(sdk, got["after"]["events"])[-1] == "canceled"
    error = got["again"]["error"]  # a canceled task cannot be canceled again, as the client's own error says
    assert (error["code"] == -32002) if sdk == "0.3" else error["name"].endswith("TaskNotCancelableError"), (
        error
    )


@pytest.mark.parametrize(("sdk", "binding"), CLIENTS)
def test_subscribe_to_a_quiet_task_answers_at_once(url: str, sdk: str, binding: str) -> None:
    label = f"ponder-{sdk}-{binding}"
    got = drive(
        url,
        sdk,
        binding,
        [
            {"op": "stream", "as": "quiet", "request": msg(sdk, "ponder", text=label), "take": 1},
            {"op": "subscribe", "as": "sub", "request": {"id": "{quiet}"}, "take": 1},
            {"op": "post", "as": "release", "path": f"/test/release/{label}"},
            {"op": "rest", "as": "sub_rest", "of": "sub"},
            {"op": "rest", "as": "quiet_rest", "of": "quiet"},
        ],
    )
    assert states_of(sdk, got["quiet"]["events"]) == ["submitted"], "shown: the task as it began"
    assert states_of(sdk, got["sub"]["events"]) == ["working"], "a subscription: the task as it is, at once"
    for name in ("sub_rest", "quiet_rest"):
        assert got[name]["ended"] and states_of(sdk, got[name]["events"])[-1] == "completed"
        assert f"thought about {label}" in json.dumps(got[name]["events"][-1])
    assert_ordered(sdk, got["quiet"]["events"] + got["quiet_rest"]["events"])


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_get_and_list(url: str, binding: str) -> None:
    token = f"lister-{binding}"
    got = drive(
        url,
        "1.3",
        binding,
        [
            {"op": "send", "as": "one", "request": msg("1.3", "echo", text="a")},
            {"op": "send", "as": "two", "request": msg("1.3", "echo", text="b")},
            {"op": "get", "as": "got", "request": {"id": "{one}", "historyLength": 1}},
            {"op": "list", "as": "listed", "request": {"pageSize": 10}},
            {"op": "get", "as": "missing", "request": {"id": "no-such-task"}},
        ],
        token=token,
    )
    assert got["got"]["result"]["id"] == got["one"]["result"]["task"]["id"]
    assert len(got["got"]["result"]["history"]) == 1
    listed = {t["id"] for t in got["listed"]["result"]["tasks"]}
    assert listed == {got["one"]["result"]["task"]["id"], got["two"]["result"]["task"]["id"]}
    assert got["listed"]["result"]["totalSize"] == 2
    assert got["missing"]["error"]["name"].endswith("TaskNotFoundError"), got["missing"]
