"""A hostile review of the A2A face after issue 24 (items 1-7): streams, subscriptions, repeats, chunked
artifacts, text answers and skills chosen by text, attacked as a hostile client and a demanding new user.

Real servers on a loopback socket (uvicorn), raw httpx on both bindings and the 0.3 methods; the replica case
shares one SQLite file between two agents, as tests/regressions/test_a2a_answers_replicas.py does."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import HTTPConnection

import agentmw
from agentmw import Agent, AgentMiddleware, Artifact, Context
from agentmw.a2a import A2ASettings
from agentmw.answers import Unreadable, read_text
from tests.conftest import serve
from tests.helpers.a2a_raw import V1
from tests.waiting import eventually

APPROVAL = {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}
V03 = {"a2a-version": "0.3"}
JSON_V1 = {**V1, "content-type": "application/json"}

gates: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Event]] = {}
ran: list[str] = []


def identify(connection: HTTPConnection) -> str | None:
    _scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    return token or None


def build(dedupe: bool | str = "side-effects") -> tuple[Agent, Starlette]:
    agent = Agent("a2a-hostile", identify=identify, a2a=A2ASettings(dedupe_message_ids=dedupe))  # type: ignore[arg-type]

    @agent.skill(read_only=True)
    async def echo(text: str) -> str:
        """Echo text back.

        Summary:
            Repeats what it is told.
        """
        return f"echo: {text}"

    @agent.skill
    async def record(text: str) -> str:
        """Write the text down (a side effect).

        Summary:
            Keeps a note.
        """
        ran.append(text)
        return f"noted: {text}"

    @agent.skill
    async def hold(text: str, ctx: Context) -> str:
        """Work until told to stop.

        Summary:
            Runs until its gate opens.
        """
        gate = gates[text] = (asyncio.get_running_loop(), asyncio.Event())
        await ctx.progress(1, 2, "working")
        await gate[1].wait()
        return f"held {text}"

    @agent.skill
    async def ponder(text: str) -> agentmw.Message:
        """Think, then reply with a message and no task.

        Summary:
            May answer with a message and no task.
        """
        gate = gates[text] = (asyncio.get_running_loop(), asyncio.Event())
        await gate[1].wait()
        return agentmw.Message(f"thought about {text}")

    @agent.skill
    async def approve(item: str, ctx: Context) -> str:
        """Ask whether to approve an item.

        Summary:
            Waits for a yes or no.
        """
        answer = await ctx.ask(f"Approve {item}?", APPROVAL)
        return f"{item}: {'approved' if (answer.content or {}).get('approved') is True else 'declined'}"

    @agent.skill
    async def grade(item: str, ctx: Context) -> str:
        """Ask for a grade whose values differ only by case.

        Summary:
            Asks a case-sensitive grade.
        """
        schema = {"type": "object", "properties": {"grade": {"type": "string", "enum": ["a", "A"]}}}
        answer = await ctx.ask(f"Grade for {item}?", schema)
        return f"{item}: {(answer.content or {}).get('grade')!r}"

    @agent.skill
    async def pair(item: str, ctx: Context) -> str:
        """Ask two yes-or-no questions at once.

        Summary:
            Asks two approvals.
        """
        answers = await ctx.inputs(
            {
                "first": agentmw.context.Ask("First?", APPROVAL),
                "second": agentmw.context.Ask("Second?", APPROVAL),
            }
        )
        return json.dumps({k: v.content for k, v in answers.items()}, sort_keys=True)

    @agent.skill(read_only=True)
    async def burst(text: str, ctx: Context) -> list[Artifact]:
        """Stream chunks concurrently, then return the last.

        Summary:
            Streams chunks of one artifact at once.
        """
        await asyncio.gather(
            *(
                ctx.artifact(Artifact(f"{i}-", name="log", artifact_id="log", last_chunk=False))
                for i in range(5)
            )
        )
        return [Artifact("end", name="log", artifact_id="log")]

    @agent.skill(read_only=True)
    async def laugh(text: str) -> list[Artifact]:
        """Return two equal chunks of one artifact.

        Summary:
            Laughs twice.
        """
        return [
            Artifact("ha", name="laugh", artifact_id="laugh"),
            Artifact("ha", name="laugh", artifact_id="laugh"),
        ]

    @agent.skill(roles=["admin"])
    async def wipe(text: str) -> str:
        """Wipe everything (admins only).

        Summary:
            Hidden from non-admins.
        """
        ran.append(f"wipe {text}")
        return "wiped"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return agent, app


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Agent, str]]:
    agent, app = build()
    with serve(app) as url:
        yield agent, url


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    ran.clear()
    yield
    for text in list(gates):
        go_on(text)


def go_on(text: str) -> None:
    loop, event = gates.pop(text)
    loop.call_soon_threadsafe(event.set)


def msg(parts: list[dict[str, Any]], *, message_id: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"messageId": message_id or uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts, **extra}


async def rpc(
    http: httpx.AsyncClient,
    url: str,
    method: str,
    params: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = await http.post(f"{url}/a2a", json=body, headers={**V1, **(headers or {})})
    assert response.status_code == 200, response.text
    return response.json()


async def result(http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any], **kw: Any) -> Any:
    reply = await rpc(http, url, method, params, **kw)
    assert "result" in reply, reply
    return reply["result"]


async def sse(
    http: httpx.AsyncClient,
    url: str,
    method: str,
    params: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    out = []
    async with http.stream("POST", f"{url}/a2a", json=body, headers={**V1, **(headers or {})}) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data = json.loads(line[5:])
                out.append(data.get("result", data))
    return out


async def asked(http: httpx.AsyncClient, url: str, skill: str, item: str = "x") -> dict[str, Any]:
    task = (
        await result(
            http, url, "SendMessage", {"message": msg([{"data": {"item": item}}], metadata={"skill": skill})}
        )
    )["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    return task


async def answer(
    http: httpx.AsyncClient, url: str, task_id: str, parts: list[dict[str, Any]]
) -> dict[str, Any]:
    return (await result(http, url, "SendMessage", {"message": msg(parts, taskId=task_id)}))["task"]


def said(task: dict[str, Any]) -> str:
    return " ".join(p.get("text", "") for p in task["status"].get("message", {}).get("parts", []))


# --- text answers --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "yes please",
        "",
        "   ",
        "not approved",
        "nope",
        "yes\nno",
        "1",
        "0",
        "NaN",
        "maybe",
        "yes no",
        "no, yes",
    ],
)
async def test_text_that_is_not_plainly_yes_or_no_is_asked_again(server, text: str) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        task = await asked(http, url, "approve")
        again = await answer(http, url, task["id"], [{"text": text}])
    assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", again
    assert "could not be read" in said(again)


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("no", "declined"),
        ("No.", "declined"),
        ("deny", "declined"),
        ("'YES'", "approved"),
        ("approve!", "approved"),
    ],
)
async def test_no_is_never_read_as_approval(server, text: str, verdict: str) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        task = await asked(http, url, "approve")
        done = await answer(http, url, task["id"], [{"text": text}])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert json.dumps(done["artifacts"]).count(f"x: {verdict}") == 1


@pytest.mark.parametrize(
    "text", ["1e999", "-1e999", "NaN", "inf", "Infinity", "0x10", "1,5", "", "1.5", "٣.5"]
)
def test_numbers_that_are_not_finite_numbers_are_unreadable(text: str) -> None:
    with pytest.raises(Unreadable):
        read_text(text, {"type": "object", "properties": {"n": {"type": "integer"}}})


@pytest.mark.parametrize("data", [{"approved": "yes please"}, {"approved": "1e999"}, {"approved": ""}])
async def test_stringly_data_answers_that_are_not_yes_or_no_are_asked_again(
    server, data: dict[str, Any]
) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        task = await asked(http, url, "approve")
        again = await answer(http, url, task["id"], [{"data": data}])
    assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", again


# --- a skill chosen by text: a hidden one stays unknown ----------------------------------------------------------


@pytest.mark.parametrize("how", ["text", "data", "title-case"])
async def test_a_hidden_skill_cannot_be_chosen_by_text_or_data(server, how: str) -> None:
    _, url = server
    alice = {"authorization": "Bearer alice"}
    parts = {
        "text": [{"text": "wipe"}],
        "data": [{"data": {"skill": "wipe"}}],
        "title-case": [{"text": " WIPE. "}],
    }[how]
    async with httpx.AsyncClient(timeout=30) as http:
        first = (
            await result(http, url, "SendMessage", {"message": msg([{"text": "everything"}])}, headers=alice)
        )["task"]
        assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert "wipe" not in json.dumps(first["status"]), "a hidden skill is not listed"
        again = (
            await result(http, url, "SendMessage", {"message": msg(parts, taskId=first["id"])}, headers=alice)
        )["task"]
    assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", again
    assert "not one of this agent's skills" in said(again)
    assert ran == [], "the hidden skill never ran"


# --- repeats: scoped to the caller, to the same message --------------------------------------------------------


async def test_a_repeated_message_id_from_another_caller_is_never_answered_with_the_first_callers_task(
    server,
) -> None:
    _, url = server
    same = msg([{"text": "secret"}], message_id=f"shared-{uuid.uuid4().hex}", metadata={"skill": "record"})
    async with httpx.AsyncClient(timeout=30) as http:
        alice = await result(
            http, url, "SendMessage", {"message": same}, headers={"authorization": "Bearer alice"}
        )
        bob = await result(
            http, url, "SendMessage", {"message": same}, headers={"authorization": "Bearer bob"}
        )
        alice_again = await result(
            http, url, "SendMessage", {"message": same}, headers={"authorization": "Bearer alice"}
        )
        peek = await rpc(
            http, url, "GetTask", {"id": alice["task"]["id"]}, headers={"authorization": "Bearer bob"}
        )
    assert alice["task"]["id"] != bob["task"]["id"]
    assert alice_again["task"]["id"] == alice["task"]["id"]
    assert ran == ["secret", "secret"], "each caller's message ran once"
    assert "error" in peek, "bob cannot read alice's task"


async def test_a_reused_message_id_with_other_content_is_a_new_task(server) -> None:
    _, url = server
    same_id = f"reuse-{uuid.uuid4().hex}"
    async with httpx.AsyncClient(timeout=30) as http:
        one = await result(
            http,
            url,
            "SendMessage",
            {"message": msg([{"text": "a"}], message_id=same_id, metadata={"skill": "record"})},
        )
        two = await result(
            http,
            url,
            "SendMessage",
            {"message": msg([{"text": "b"}], message_id=same_id, metadata={"skill": "record"})},
        )
    assert one["task"]["id"] != two["task"]["id"] and ran == ["a", "b"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_repeat_of_a_parked_message_answers_at_once_on_1_0_and_0_3(server, streaming: bool) -> None:
    _, url = server
    first = msg(
        [{"data": {"item": "p"}}], message_id=f"park-{uuid.uuid4().hex}", metadata={"skill": "approve"}
    )
    v03 = {
        "kind": "message",
        "messageId": first["messageId"],
        "role": "user",
        "parts": [{"kind": "data", "data": {"item": "p"}}],
        "metadata": {"skill": "approve"},
    }
    async with httpx.AsyncClient(timeout=10, headers={"authorization": "Bearer repeater"}) as http:
        task = (await result(http, url, "SendMessage", {"message": first}))["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        if streaming:
            body = {"jsonrpc": "2.0", "id": 2, "method": "message/stream", "params": {"message": v03}}
            async with http.stream("POST", f"{url}/a2a", json=body, headers=V03) as response:
                lines = [
                    json.loads(x[5:])["result"] async for x in response.aiter_lines() if x.startswith("data:")
                ]
            assert [(r["kind"], r["status"]["state"]) for r in lines] == [("task", "input-required")]
            assert lines[0]["id"] == task["id"]
        else:
            body = {"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": v03}}
            got = (await http.post(f"{url}/a2a", json=body, headers=V03)).json()["result"]
            assert got["id"] == task["id"] and got["status"]["state"] == "input-required"


# --- streams and subscriptions -----------------------------------------------------------------------------------


async def test_a_subscription_and_the_stream_agree_and_never_go_backwards(server) -> None:
    agent, url = server
    label = f"sub-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(timeout=30) as http:
        task = (
            await result(
                http,
                url,
                "SendMessage",
                {
                    "message": msg([{"text": label}], metadata={"skill": "hold"}),
                    "configuration": {"returnImmediately": True},
                },
            )
        )["task"]
        live = agent.a2a_app.ops.tasks.live[task["id"]]
        await eventually(lambda: label in gates and live.record.state == "TASK_STATE_WORKING", "working")
        subs = [
            asyncio.ensure_future(sse(http, url, "SubscribeToTask", {"id": task["id"]})) for _ in range(2)
        ]
        await eventually(lambda: len(live.subscribers) == 2, "two subscribers")
        go_on(label)
        both = await asyncio.wait_for(asyncio.gather(*subs), 10)
    assert both[0] == both[1]
    first = both[0][0]["task"]
    assert first["status"]["state"] == "TASK_STATE_WORKING"
    first_ids = [m["messageId"] for m in first["history"]]
    later = [
        e["statusUpdate"]["status"].get("message", {}).get("messageId")
        for e in both[0][1:]
        if "statusUpdate" in e
    ]
    assert not set(first_ids) & {m for m in later if m}, (
        "no status message is both in the first Task and after it"
    )
    assert both[0][-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_subscribers_that_leave_mid_stream_are_removed(server) -> None:
    agent, url = server
    label = f"leak-{uuid.uuid4().hex[:6]}"
    async with httpx.AsyncClient(timeout=30) as http:
        task = (
            await result(
                http,
                url,
                "SendMessage",
                {
                    "message": msg([{"text": label}], metadata={"skill": "hold"}),
                    "configuration": {"returnImmediately": True},
                },
            )
        )["task"]
        live = agent.a2a_app.ops.tasks.live[task["id"]]
        await eventually(lambda: label in gates, "the skill to run")
        for index in range(10):
            body = {"jsonrpc": "2.0", "id": index, "method": "SubscribeToTask", "params": {"id": task["id"]}}
            async with http.stream("POST", f"{url}/a2a", json=body, headers=V1) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        break  # the first event, then the client leaves
            for path in (f"/a2a/tasks/{task['id']}:subscribe",):
                async with http.stream("POST", f"{url}{path}", json={}, headers=V1) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data:"):
                            break
        await eventually(
            lambda: len(live.subscribers) == 0, "every subscriber that left to be removed", timeout=10
        )


# --- chunked artifacts -------------------------------------------------------------------------------------------


async def test_concurrent_ctx_artifact_chunks_go_out_in_one_order_once_closed_once(server) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        events = await sse(
            http, url, "SendStreamingMessage", {"message": msg([{"text": "go"}], metadata={"skill": "burst"})}
        )
        stored = await result(http, url, "GetTask", {"id": events[0]["task"]["id"]})
    updates = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
    assert [u.get("append", False) for u in updates] == [False] + [True] * (len(updates) - 1)
    assert [u["lastChunk"] for u in updates] == [False] * (len(updates) - 1) + [True]
    text = "".join(p.get("text", "") for u in updates for p in u["artifact"]["parts"])
    assert sorted(text.split("-")[:-1]) == ["0", "1", "2", "3", "4"] and text.endswith("end")
    assert "".join(p["text"] for p in stored["artifacts"][0]["parts"]) == text


# --- malformed input on the new paths: never a 500 or an internal error ----------------------------------------

BAD_PARTS: list[list[dict[str, Any]]] = [
    [{"data": None}],
    [{"data": []}],
    [{"data": "yes"}],
    [{"data": True}],
    [{"data": {"skill": None}}],
    [{"data": {"skill": {"nested": "echo"}}}],
    [{"data": {"skill": ["echo"]}}],
    [{"data": {"approved": {"deep": [1, 2, {"x": None}]}}}],
    [{"data": {"approved": 1e308}}],
    [{"data": {"action": "accept", "content": "yes"}}],
    [{"data": {"action": "accept", "content": {"approved": "maybe"}}}],
    [{"data": {"action": "nonsense"}}],
    [{"text": "\u0000yes"}],
    [{"text": "\ud800"}],
    [{"text": "x" * 100_000}],
    [{"url": "file:///etc/passwd"}],
    [{"raw": "eWVz"}],
    [{"text": "yes"}, {"data": {"approved": "no"}}],
]


@pytest.mark.parametrize("parts", BAD_PARTS, ids=range(len(BAD_PARTS)))
@pytest.mark.parametrize("question", ["approve", "skill", "pair"])
async def test_odd_answers_get_a_proper_answer_never_an_internal_error(server, parts, question: str) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        if question == "skill":
            first = (await result(http, url, "SendMessage", {"message": msg([{"text": "hi"}])}))["task"]
        else:
            first = await asked(http, url, question)
        assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        for binding in ("jsonrpc", "rest", "v03"):
            if binding == "jsonrpc":
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {"message": msg(parts, taskId=first["id"])},
                }
                response = await http.post(f"{url}/a2a", content=json.dumps(body), headers=JSON_V1)
            elif binding == "rest":
                response = await http.post(
                    f"{url}/a2a/message:send",
                    content=json.dumps({"message": msg(parts, taskId=first["id"])}),
                    headers=JSON_V1,
                )
            else:
                v03 = [{"kind": next(iter(p)) if next(iter(p)) != "raw" else "file", **p} for p in parts]
                v03 = [
                    {"kind": "file", "file": {"bytes": p["raw"]}}
                    if "raw" in p
                    else {"kind": "file", "file": {"uri": p["url"]}}
                    if "url" in p
                    else p
                    for p in v03
                ]
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "message/send",
                    "params": {
                        "message": {
                            "kind": "message",
                            "messageId": uuid.uuid4().hex,
                            "role": "user",
                            "parts": v03,
                            "taskId": first["id"],
                        }
                    },
                }
                response = await http.post(
                    f"{url}/a2a",
                    content=json.dumps(body),
                    headers={**V03, "content-type": "application/json"},
                )
            assert response.status_code < 500, (binding, response.text)
            reply = response.json()
            error = reply.get("error") or (reply if "code" in reply else None)
            assert not error or error.get("code") != -32603, (binding, reply)
            state = (
                (reply.get("result", reply).get("task") or reply.get("result", reply))
                .get("status", {})
                .get("state")
            )
            if state in ("TASK_STATE_COMPLETED", "completed", "TASK_STATE_FAILED", "failed"):
                break  # the task is over: the other bindings would be answering a finished task


# --- races: a cancel against a streaming answer -----------------------------------------------------------------


@pytest.mark.parametrize("cancel_first", [False, True])
async def test_a_cancel_racing_a_streaming_answer_never_goes_back_from_canceled(
    server, cancel_first: bool
) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        task = await asked(http, url, "approve")
        answering = sse(
            http, url, "SendStreamingMessage", {"message": msg([{"text": "yes"}], taskId=task["id"])}
        )
        cancelling = rpc(http, url, "CancelTask", {"id": task["id"]})
        pair = (cancelling, answering) if cancel_first else (answering, cancelling)
        got = await asyncio.wait_for(asyncio.gather(*pair, return_exceptions=True), 10)
        stored = await result(http, url, "GetTask", {"id": task["id"]})
    events = got[1] if cancel_first else got[0]
    assert stored["status"]["state"] in ("TASK_STATE_CANCELED", "TASK_STATE_COMPLETED"), stored
    if isinstance(events, list) and events:
        states = [events[0].get("task", {}).get("status", {}).get("state")] + [
            e["statusUpdate"]["status"]["state"] for e in events if "statusUpdate" in e
        ]
        terminal = [i for i, s in enumerate(states) if s in ("TASK_STATE_CANCELED", "TASK_STATE_COMPLETED")]
        assert not terminal or terminal[0] == len(states) - 1, states
        assert states[-1] == stored["status"]["state"] or states[-1] is None, (states, stored["status"])
