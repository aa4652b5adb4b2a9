"""An ADK-like text-only client against agentmw (issue 24, items 4-6): google-adk's ``RemoteA2aAgent`` uses
a2a-sdk 0.3's client and sends each user turn as one text part with no metadata. ``tests/a2a03/text_client.py``
is such a client (a2a-sdk 0.3.26's own ``Client`` and ``ClientTaskManager``, run by the python of its venv,
``.deps/a2a03`` or ``$AGENTMW_DEPS/a2a03``); here it picks a skill of a multi-skill agent by text, answers a
typed question and a human gate with "yes", and assembles a chunked artifact, blocking and streaming."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette

from agentmw import Agent, AgentMiddleware, Artifact, Context, human_gate
from tests.conftest import require_tool, serve

ROOT = Path(__file__).resolve().parent.parent
PYTHON = Path(os.environ.get("AGENTMW_DEPS") or ROOT / ".deps").absolute() / "a2a03" / "bin" / "python"
SCRIPT = Path(__file__).parent / "a2a03" / "text_client.py"
APPROVAL = {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}
CHUNKS = ("alpha-", "beta-", "gamma")
deleted: list[str] = []


def build() -> Starlette:
    agent = Agent("text-clients", "1.0.0")

    @agent.skill
    async def shout(text: str) -> str:
        """Say text loudly.

        Summary:
            Repeats in capitals.
        """
        return f"SHOUT: {text.upper()}"

    @agent.skill
    async def approve(item: str, ctx: Context) -> str:
        """Ask whether to approve an item.

        Summary:
            Waits for a yes or a no.
        """
        answer = await ctx.ask(f"Approve {item}?", APPROVAL)
        return f"{item}: {'approved' if (answer.content or {}).get('approved') is True else 'declined'}"

    @agent.skill
    @human_gate(side_effects="deletes the file")
    async def delete(path: str) -> str:
        """Delete a file.

        Summary:
            Deletes a file once a person approves.
        """
        deleted.append(path)
        return f"deleted {path}"

    @agent.skill
    async def report(text: str, ctx: Context) -> list[Artifact]:
        """One chunk streamed now, the rest returned, none of them marked by hand.

        Summary:
            Writes a report in chunks.
        """
        first, middle, last = CHUNKS
        await ctx.artifact(Artifact(first, name="report", artifact_id="report-1", last_chunk=False))
        return [
            Artifact(middle, name="report", artifact_id="report-1"),
            Artifact(last, artifact_id="report-1"),
        ]

    @agent.skill
    async def story(text: str) -> AsyncIterator[Artifact]:
        """A generator whose chunks never say which is the last.

        Summary:
            Streams a story in chunks.
        """
        for index, chunk in enumerate(CHUNKS):
            yield Artifact(chunk, name="story", artifact_id="story-1", append=index > 0, last_chunk=False)

    app = Starlette()
    app.add_middleware(AgentMiddleware, agent=agent)
    return app


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(build()) as base:
        yield base


def talk(url: str, *turns: str, streaming: bool) -> dict[str, Any]:
    python = require_tool("a2a-sdk 0.3 (its own venv)", PYTHON, "run `scripts/setup-tools`, which makes it")
    request = json.dumps({"url": url, "turns": list(turns), "streaming": streaming})
    done = subprocess.run(
        [python, str(SCRIPT)], input=request, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout)
    return out


MODES = pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])


@MODES
def test_a_skill_is_picked_by_text_and_works_on_the_first_message(url: str, streaming: bool) -> None:
    out = talk(url, "hi there", "Shout", streaming=streaming)
    asked, done = (t["task"] for t in out["turns"])
    assert asked["state"] == "input-required"
    assert "Which skill should handle this?" in asked["status_text"] and "- shout: " in asked["status_text"]
    assert done["id"] == asked["id"] and done["state"] == "completed"
    assert [a["parts"] for a in done["artifacts"]] == [[{"kind": "text", "text": "SHOUT: HI THERE"}]]
    assert out["get"] == done  # what the client assembled is what the agent keeps


@MODES
def test_a_typed_question_is_answered_yes_by_text(url: str, streaming: bool) -> None:
    out = talk(url, "invoice 8", "approve", "yes", streaming=streaming)
    _, asked, done = (t["task"] for t in out["turns"])
    assert asked["state"] == "input-required"
    assert (
        asked["status_text"]
        == "Approve invoice 8?\nReply with yes or no (or a data part matching the schema)."
    )
    assert done["state"] == "completed" and done["id"] == asked["id"]
    assert [a["parts"][0]["text"] for a in done["artifacts"]] == ["invoice 8: approved"]
    assert out["get"] == done


@MODES
def test_an_unreadable_answer_is_asked_again_then_no_declines(url: str, streaming: bool) -> None:
    out = talk(url, "invoice 9", "approve", "perhaps", "no", streaming=streaming)
    _, _, again, done = (t["task"] for t in out["turns"])
    assert again["state"] == "input-required"
    assert "'perhaps' is neither yes nor no" in again["status_text"]
    assert [a["parts"][0]["text"] for a in done["artifacts"]] == ["invoice 9: declined"]


@MODES
def test_a_human_gate_is_approved_by_text(url: str, streaming: bool) -> None:
    deleted.clear()
    out = talk(url, "a.txt", "delete", "yes", streaming=streaming)
    _, asked, done = (t["task"] for t in out["turns"])
    assert asked["state"] == "input-required" and 'delete(path="a.txt")' in asked["status_text"]
    assert "Reply with yes or no" in asked["status_text"] and deleted == ["a.txt"]
    assert done["state"] == "completed"
    assert [a["parts"][0]["text"] for a in done["artifacts"]] == ["deleted a.txt"]


@MODES
def test_a_chunked_artifact_is_assembled_whole(url: str, streaming: bool) -> None:
    out = talk(url, "go", "report", streaming=streaming)
    turn = out["turns"][1]
    done = turn["task"]
    assert done["state"] == "completed"
    assert done["artifacts"] == [
        {"id": "report-1", "name": "report", "parts": [{"kind": "text", "text": c} for c in CHUNKS]}
    ]
    assert out["get"] == done
    updates = [(e["append"], e["last_chunk"]) for e in turn["events"] if e["kind"] == "artifact-update"]
    assert updates == ([(False, False), (True, False), (True, True)] if streaming else [])


@MODES
def test_a_stream_that_never_marks_its_last_chunk_is_closed_at_completion(url: str, streaming: bool) -> None:
    out = talk(url, "go", "story", streaming=streaming)
    turn = out["turns"][1]
    done = turn["task"]
    (artifact,) = done["artifacts"]
    assert "".join(p["text"] for p in artifact["parts"]) == "".join(CHUNKS)
    assert artifact["parts"][-1] == {"kind": "text", "text": ""}  # the closing chunk adds no text
    assert out["get"] == done
    updates = [(e["append"], e["last_chunk"]) for e in turn["events"] if e["kind"] == "artifact-update"]
    assert updates == ([(False, False), (True, False), (True, False), (True, True)] if streaming else [])
