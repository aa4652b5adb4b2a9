"""Issue 24, items 4, 5 and 6 (must-haves 3 and 4): chunked artifacts arrive whole, in order, with ``append`` and
``lastChunk``; a text answer to a typed question is read (and one that cannot be read is asked again); a skill is
chosen by text or data in answer to "which skill?".

Driven by the real ``a2a-sdk==1.3.0`` client on both bindings (its events assembled with a2a-sdk's own
``append_artifact_to_task``, what its task managers do with ``append``) and by raw HTTP."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types.a2a_pb2 import GetTaskRequest, SendMessageRequest, Task, TaskState
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Artifact, Context, human_gate
from agentmw.auth import Principal, ProtectedResource
from agentmw.context import Ask
from tests.conftest import require_tool, serve
from tests.helpers.a2a_raw import V1, send_message
from tests.helpers.a2a_sdk import a2a_client, message

BINDINGS = ["JSONRPC", "HTTP+JSON"]
ASSEMBLE = Path(__file__).resolve().parents[1] / "a2a_js" / "assemble.mjs"
APPROVAL = {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}
gated_runs: list[str] = []


def build() -> Starlette:
    agent = Agent("a2a-answers")

    @agent.skill
    async def returned(text: str) -> list[Artifact]:
        """Two chunks of one artifact, both returned, neither marked (the defaults).

        Summary:
            Returns an artifact in two chunks.
        """
        return [Artifact("one-", name="doc", artifact_id="r"), Artifact("two", name="doc", artifact_id="r")]

    @agent.skill
    async def mixed(text: str, ctx: Context) -> list[Artifact]:
        """One chunk streamed with ctx.artifact, the next returned.

        Summary:
            Streams a chunk, returns the next.
        """
        await ctx.artifact(Artifact("one-", name="doc", artifact_id="m", metadata={"a": 1}))
        return [Artifact("two", name="other name", artifact_id="m", metadata={"b": 2})]

    @agent.skill
    async def unmarked(text: str) -> AsyncIterator[Artifact]:
        """A generator whose chunks never say which is last.

        Summary:
            Streams chunks, none marked last.
        """
        for index, chunk in enumerate(("a-", "b-", "c")):
            yield Artifact(chunk, name="doc", artifact_id="u", append=index > 0, last_chunk=False)

    @agent.skill
    async def approve(item: str, ctx: Context) -> str:
        """Ask a yes/no question.

        Summary:
            Asks whether to approve.
        """
        answer = await ctx.ask(f"Approve {item}?", APPROVAL)
        return f"{item}: {'approved' if (answer.content or {}).get('approved') is True else 'declined'}"

    @agent.skill
    async def paint(item: str, ctx: Context) -> str:
        """Ask for one of three colours.

        Summary:
            Asks for a colour.
        """
        schema = {"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "Green"]}}}
        answer = await ctx.ask(f"Colour for {item}?", schema)
        return f"{item}: {(answer.content or {}).get('color')!r}"

    @agent.skill
    async def count(item: str, ctx: Context) -> str:
        """Ask for a whole number.

        Summary:
            Asks how many.
        """
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        answer = await ctx.ask(f"How many {item}?", schema)
        return f"{item}: {(answer.content or {}).get('n')!r}"

    @agent.skill
    async def greet(item: str, ctx: Context) -> str:
        """Ask for a name.

        Summary:
            Asks a name.
        """
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        answer = await ctx.ask("Your name?", schema)
        return f"hello {(answer.content or {}).get('name')!r}"

    @agent.skill
    async def both(item: str, ctx: Context) -> str:
        """Ask two things at once.

        Summary:
            Asks a name and a yes or no.
        """
        name = {"type": "object", "properties": {"name": {"type": "string"}}}
        got = await ctx.inputs({"who": Ask("Who?", name), "ok": Ask("OK?", APPROVAL)})
        return f"{got['who'].content} {got['ok'].content}"

    @agent.skill(title="Loud Echo")
    async def shout(text: str) -> str:
        """Say text loudly.

        Summary:
            Repeats in capitals.
        """
        return f"SHOUT: {text.upper()}"

    @agent.skill
    @human_gate(side_effects="deletes the file")
    async def delete(path: str) -> str:
        """Delete a file.

        Summary:
            Deletes a file once approved.
        """
        gated_runs.append(path)
        return f"deleted {path}"

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(build()) as base:
        yield base


def _dict(task: Task) -> dict[str, Any]:
    return MessageToDict(task)


async def _stream(http: httpx.AsyncClient, url: str, binding: str, msg: Any) -> list[Any]:
    client = await a2a_client(http, url, binding, streaming=True)
    return [event async for event in client.send_message(SendMessageRequest(message=msg))]


def _assembled(events: list[Any]) -> Task:
    """The task a client builds from a stream: the first Task, then each artifact update put in with a2a-sdk's
    own ``append_artifact_to_task`` (what its task managers do: ``append`` adds the parts)."""
    task = Task()
    task.CopyFrom(events[0].task)
    for event in events[1:]:
        if event.HasField("artifact_update"):
            append_artifact_to_task(task, event.artifact_update)
    return task


async def _get(http: httpx.AsyncClient, url: str, binding: str, task_id: str) -> Task:
    client = await a2a_client(http, url, binding)
    return await client.get_task(GetTaskRequest(id=task_id))


# --- item 4: chunks ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize(
    ("skill", "whole", "flags"),
    [
        ("returned", "one-two", [(False, False), (True, True)]),
        ("mixed", "one-two", [(False, True), (True, True)]),
        ("unmarked", "a-b-c", [(False, False), (True, False), (True, False), (True, True)]),
    ],
)
async def test_every_chunk_arrives_once_in_order_and_the_assembled_artifact_is_getTasks(
    url: str, binding: str, skill: str, whole: str, flags: list[tuple[bool, bool]]
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        events = await _stream(http, url, binding, message("go", skill=skill))
        updates = [e.artifact_update for e in events if e.HasField("artifact_update")]
        assert [(u.append, u.last_chunk) for u in updates] == flags
        assert {u.artifact.artifact_id for u in updates} == {skill[0]}
        assembled = _assembled(events)
        stored = await _get(http, url, binding, events[0].task.id)
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(assembled.artifacts) == 1
    assert "".join(p.text for p in assembled.artifacts[0].parts) == whole
    assert [MessageToDict(a) for a in assembled.artifacts] == [MessageToDict(a) for a in stored.artifacts]
    assert assembled.artifacts[0].name == "doc"


async def test_appended_chunks_merge_metadata_and_keep_the_first_name_on_the_wire(url: str) -> None:
    """What a2a-sdk (keeps the first name, merges metadata) and @a2a-js/sdk (takes a later chunk's name) make
    of the chunks is the same, because an appended chunk carries the first chunk's name."""
    async with httpx.AsyncClient(timeout=30) as http:
        events = await _stream(http, url, "JSONRPC", message("go", skill="mixed"))
        updates = [MessageToDict(e.artifact_update) for e in events if e.HasField("artifact_update")]
        stored = await _get(http, url, "JSONRPC", events[0].task.id)
    assert [u["artifact"]["name"] for u in updates] == ["doc", "doc"]
    assert updates[1]["artifact"]["metadata"] == {"a": 1, "b": 2}
    assert MessageToDict(stored.artifacts[0])["metadata"] == {"a": 1, "b": 2}


async def test_raw_wire_carries_append_and_last_chunk(url: str) -> None:
    body = send_message([{"text": "go"}], metadata={"skill": "returned"})
    body["method"] = "SendStreamingMessage"
    async with httpx.AsyncClient(timeout=30) as http:
        async with http.stream("POST", f"{url}/a2a", json=body, headers=V1) as response:
            lines = [line async for line in response.aiter_lines() if line.startswith("data:")]
        blocking = (
            await http.post(
                f"{url}/a2a", json=send_message([{"text": "go"}], metadata={"skill": "returned"}), headers=V1
            )
        ).json()
    events = [json.loads(line[5:])["result"] for line in lines]
    updates = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
    assert [(u.get("append", False), u["lastChunk"]) for u in updates] == [(False, False), (True, True)]
    assert [u["artifact"]["parts"] for u in updates] == [[{"text": "one-"}], [{"text": "two"}]]
    (artifact,) = blocking["result"]["task"]["artifacts"]
    assert artifact["parts"] == [{"text": "one-"}, {"text": "two"}] and artifact["artifactId"] == "r"


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize(
    ("skill", "whole"), [("returned", "one-two"), ("mixed", "one-two"), ("unmarked", "a-b-c")]
)
def test_a_js_sdk_result_manager_assembles_the_same_artifact(
    url: str, binding: str, skill: str, whole: str
) -> None:
    """@a2a-js/sdk's ResultManager (it takes a later chunk's name and description, unlike a2a-sdk) puts the
    chunks together into GetTask's artifact too."""
    node = require_tool("Node (>= 20)", shutil.which("node"), "install Node >= 20, then run `scripts/setup`")
    require_tool(
        "@a2a-js/sdk 1.3.0", ASSEMBLE.parent / "node_modules" / "@a2a-js" / "sdk", "run `scripts/setup-tools`"
    )
    request = {
        "message": {
            "messageId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"text": "go"}],
            "metadata": {"skill": skill},
        }
    }
    done = subprocess.run(
        [node, str(ASSEMBLE), json.dumps({"url": url, "binding": binding, "request": request})],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["assembled"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert out["assembled"]["artifacts"] == out["get"]["artifacts"]
    (artifact,) = out["get"]["artifacts"]
    assert "".join(p.get("text", "") for p in artifact["parts"]) == whole and artifact["name"] == "doc"


# --- item 5: text answers ------------------------------------------------------------------------------------


async def _ask_and_answer(
    http: httpx.AsyncClient, url: str, binding: str, skill: str, item: str, *answers: str
) -> list[Task]:
    client = await a2a_client(http, url, binding)
    tasks = [
        [e async for e in client.send_message(SendMessageRequest(message=message(item, skill=skill)))][
            -1
        ].task
    ]
    for answer in answers:
        follow = message(answer, task_id=tasks[0].id)
        tasks.append([e async for e in client.send_message(SendMessageRequest(message=follow))][-1].task)
    return tasks


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize(
    ("answer", "result"),
    [("yes", "approved"), ("TRUE", "approved"), ("no", "declined"), ("Deny", "declined")],
)
async def test_a_yes_or_no_text_answers_a_boolean_question(
    url: str, binding: str, answer: str, result: str
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        asked, done = await _ask_and_answer(http, url, binding, "approve", "laptop", answer)
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[0].text == (
        "Approve laptop?\nReply with yes or no (or a data part matching the schema)."
    )
    assert done.id == asked.id and done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == f"laptop: {result}"


async def test_an_unreadable_answer_asks_again_and_loses_nothing(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        asked, again, still, done = await _ask_and_answer(
            http, url, "JSONRPC", "approve", "laptop", "maybe", "ok then", "y"
        )
    for task in (again, still):
        assert task.id == asked.id and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    text = again.status.message.parts[0].text
    assert text.startswith("Approve laptop?\nThat answer could not be read: 'maybe' is neither yes nor no")
    assert text.endswith("Reply with yes or no (or a data part matching the schema).")
    assert "'ok then'" in still.status.message.parts[0].text
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "laptop: approved"
    users = [m.parts[0].text for m in done.history if m.role == 1]
    assert users == ["laptop", "maybe", "ok then", "y"]  # every message is kept in the history


@pytest.mark.parametrize(
    ("skill", "forms", "answer", "result"),
    [
        ("paint", "one of: red, Green", "green", "door: 'Green'"),
        ("count", "a whole number", " 12 ", "door: 12"),
        ("greet", "your answer as text", "Ada Lovelace", "hello 'Ada Lovelace'"),
    ],
)
async def test_enum_number_and_string_questions_take_text(
    url: str, skill: str, forms: str, answer: str, result: str
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        asked, done = await _ask_and_answer(http, url, "JSONRPC", skill, "door", answer)
    assert asked.status.message.parts[0].text.endswith(
        f"Reply with {forms} (or a data part matching the schema)."
    )
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == result


async def test_wrong_enum_and_number_answers_are_asked_again(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        _, wrong_colour = await _ask_and_answer(http, url, "JSONRPC", "paint", "door", "purple")
        _, wrong_count = await _ask_and_answer(http, url, "JSONRPC", "count", "door", "a few")
    assert wrong_colour.status.state == wrong_count.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "'purple' is not an answer for color: reply with one of: red, Green" in (
        wrong_colour.status.message.parts[0].text
    )
    assert "'a few' is not a whole number" in wrong_count.status.message.parts[0].text


async def test_data_answers_still_work_and_a_stringly_boolean_is_read(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, url)
        for data, result in (({"approved": True}, "approved"), ({"approved": "yes"}, "approved")):
            asked = [
                e
                async for e in client.send_message(SendMessageRequest(message=message("pc", skill="approve")))
            ][-1].task
            follow = message(data=data, task_id=asked.id)
            done = [e async for e in client.send_message(SendMessageRequest(message=follow))][-1].task
            assert done.artifacts[0].parts[0].text == f"pc: {result}", data


async def test_several_questions_need_a_data_part_keyed_by_question(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, url)

        async def send(msg: Any) -> Task:
            return [e async for e in client.send_message(SendMessageRequest(message=msg))][-1].task

        asked = await send(message("x", skill="both"))
        assert (
            asked.status.message.parts[0].text
            == "Who?\nOK?\nReply with a data part keyed by question: who, ok."
        )
        again = await send(message("Ada", task_id=asked.id))
        assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "several questions are open: answer them in a data part keyed by question" in (
            again.status.message.parts[0].text
        )
        done = await send(message(data={"who": {"name": "Ada"}, "ok": {"approved": "yes"}}, task_id=asked.id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "{'name': 'Ada'} {'approved': True}"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_human_gate_is_approved_by_text(url: str, binding: str) -> None:
    gated_runs.clear()
    async with httpx.AsyncClient(timeout=30) as http:
        asked, refused_once, done = await _ask_and_answer(
            http, url, binding, "delete", "a.txt", "hmm", "approve"
        )
    assert 'delete(path="a.txt")' in asked.status.message.parts[0].text
    assert "Reply with yes or no" in asked.status.message.parts[0].text
    assert refused_once.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "'hmm' is neither yes nor no" in refused_once.status.message.parts[0].text
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "deleted a.txt" and gated_runs == ["a.txt"]


async def test_a_human_gate_declined_by_text_does_not_run(url: str) -> None:
    gated_runs.clear()
    async with httpx.AsyncClient(timeout=30) as http:
        _, done = await _ask_and_answer(http, url, "JSONRPC", "delete", "b.txt", "no")
    assert done.status.state == TaskState.TASK_STATE_REJECTED and gated_runs == []
    assert done.status.message.parts[0].text.startswith('Not approved: Run delete(path="b.txt")')


# --- item 6: choosing a skill --------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("answer", ["shout", " SHOUT. ", "loud echo", {"skill": "shout"}])
async def test_which_skill_is_answered_by_text_or_data(url: str, binding: str, answer: Any) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, url, binding)
        asked = [e async for e in client.send_message(SendMessageRequest(message=message("hi there")))][
            -1
        ].task
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        question = asked.status.message.parts[0].text
        assert "Which skill should handle this?" in question and "id or name as text" in question
        assert "- shout (Loud Echo): Repeats in capitals." in question
        follow = (
            message(data=answer, task_id=asked.id)
            if isinstance(answer, dict)
            else message(answer, task_id=asked.id)
        )
        done = [e async for e in client.send_message(SendMessageRequest(message=follow))][-1].task
    assert done.id == asked.id and done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "SHOUT: HI THERE"  # the first message is what it works on


async def test_an_unknown_skill_name_asks_again_then_arguments_are_asked_for(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        client = await a2a_client(http, url)

        async def send(msg: Any) -> Task:
            return [e async for e in client.send_message(SendMessageRequest(message=msg))][-1].task

        asked = await send(message(data={"n": 1}))  # no text: a skill chosen later has no item yet
        again = await send(message("fly", task_id=asked.id))
        assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert again.status.message.parts[0].text.startswith(
            "'fly' is not one of this agent's skills. Which skill should handle this?"
        )
        needs = await send(message("approve", task_id=asked.id))
        assert needs.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "item" in needs.status.message.parts[0].text  # the skill's missing argument, asked as usual
        question = await send(message(data={"item": "car"}, task_id=asked.id))
        assert question.status.message.parts[0].text.startswith("Approve car?")
        done = await send(message("yes", task_id=asked.id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "car: approved"


async def test_choosing_by_data_raw_http(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        first = (await http.post(f"{url}/a2a", json=send_message([{"text": "raw"}]), headers=V1)).json()
        task = first["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        skills = task["status"]["message"]["parts"][1]["data"]["skills"]
        assert {"id": "shout", "summary": "Repeats in capitals."} in skills
        answer = send_message([{"data": {"skill": "shout"}}], taskId=task["id"], message_id=uuid.uuid4().hex)
        done = (await http.post(f"{url}/a2a", json=answer, headers=V1)).json()["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"] == [{"text": "SHOUT: RAW"}]


async def test_a_hidden_skill_named_in_answer_is_as_unknown_as_a_missing_one() -> None:
    """A skill the caller may not see (``roles``) cannot be chosen by text or data: the answer is what a name
    that does not exist gets, and the question never lists it."""
    users = {"op": Principal("op", roles={"ops"}), "guest": Principal("guest")}
    auth = ProtectedResource(
        authorization_servers=["https://login.example.com"], verifier=lambda token, resource: users.get(token)
    )
    agent = Agent("hidden-skills", auth=auth, store="memory://")

    @agent.skill
    async def ping(text: str) -> str:
        """Ping.

        Summary:
            Answers pong.
        """
        return f"pong {text}"

    @agent.skill
    async def echo(text: str) -> str:
        """Echo.

        Summary:
            Repeats.
        """
        return f"echo {text}"

    @agent.skill(roles=["ops"])
    async def reset(text: str) -> str:
        """Reset (operators only).

        Summary:
            Resets everything.
        """
        return f"reset {text}"

    async def ask(http: httpx.AsyncClient, who: str, answer: list[dict[str, Any]]) -> dict[str, Any]:
        headers = {**V1, "authorization": f"Bearer {who}"}
        first = (await http.post(f"{base}/a2a", json=send_message([{"text": "now"}]), headers=headers)).json()
        task = first["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        reply = send_message(answer, taskId=task["id"])
        got: dict[str, Any] = (await http.post(f"{base}/a2a", json=reply, headers=headers)).json()["result"][
            "task"
        ]
        return {"asked": task, "got": got}

    with serve(agent.asgi()) as base:
        async with httpx.AsyncClient(timeout=30) as http:
            hidden = await ask(http, "guest", [{"text": "reset"}])
            hidden_data = await ask(http, "guest", [{"data": {"skill": "reset"}}])
            missing = await ask(http, "guest", [{"text": "rezet"}])
            allowed = await ask(http, "op", [{"text": "reset"}])
    assert "reset" not in hidden["asked"]["status"]["message"]["parts"][0]["text"]
    for case in (hidden, hidden_data):
        assert case["got"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert case["got"]["status"]["message"]["parts"][0]["text"] == missing["got"]["status"]["message"][
            "parts"
        ][0]["text"].replace("rezet", "reset")
    assert allowed["got"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert allowed["got"]["artifacts"][0]["parts"] == [{"text": "reset now"}]
