"""Fixes for the hostile review of the A2A face (issue 24 items 4 and 5): a returned chunk equal to an earlier
one in the same return is its own chunk; an answer with nothing of the question in it (an empty data part, a
file alone, other fields) is asked again rather than read as "declined"; plain values keyed by question are
read as each question's one field; an enum's exact value wins over a case-folded one; integers are exact.

Real servers on a loopback socket (uvicorn), raw httpx, the agent of tests/regressions/test_a2a_hostile_review.py
with one more skill."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentmw import Agent, Artifact, Context
from agentmw.answers import Unreadable, read_text
from tests.conftest import serve
from tests.regressions.test_a2a_hostile_review import (  # noqa: F401  (fresh: the autouse fixture)
    answer,
    asked,
    build,
    fresh,
    msg,
    result,
    said,
    sse,
)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Agent, str]]:
    agent, app = build()

    @agent.skill(read_only=True)
    async def chuckle(text: str, ctx: Context) -> list[Artifact]:
        """Stream one chunk, then return it and the same chunk again.

        Summary:
            Laughs, then laughs again.
        """
        chunk = Artifact("ha", name="laugh", artifact_id="laugh", last_chunk=False)
        await ctx.artifact(chunk)
        return [chunk, chunk]

    with serve(app) as url:
        yield agent, url


def texts(artifact: dict[str, Any]) -> list[str]:
    return [p["text"] for p in artifact["parts"]]


# --- chunks ---------------------------------------------------------------------------------------------------


async def test_two_equal_returned_chunks_are_both_kept(server) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        task = (
            await result(
                http, url, "SendMessage", {"message": msg([{"text": "x"}], metadata={"skill": "laugh"})}
            )
        )["task"]
        events = await sse(
            http, url, "SendStreamingMessage", {"message": msg([{"text": "x"}], metadata={"skill": "laugh"})}
        )
    assert [texts(a) for a in task["artifacts"]] == [["ha", "ha"]], task["artifacts"]
    chunks = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
    assert [(texts(c["artifact"]), c.get("append", False), c.get("lastChunk", False)) for c in chunks] == [
        (["ha"], False, False),
        (["ha"], True, True),
    ], chunks


async def test_only_the_chunk_streamed_last_before_the_return_counts_as_sent(server) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        events = await sse(
            http,
            url,
            "SendStreamingMessage",
            {"message": msg([{"text": "x"}], metadata={"skill": "chuckle"})},
        )
        task_id = next(e["task"]["id"] for e in events if "task" in e)
        got = await result(http, url, "GetTask", {"id": task_id})
    chunks = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
    # streamed "ha", then returned it twice: the first returned is the one streamed, the second a new chunk
    assert [(texts(c["artifact"]), c.get("append", False), c.get("lastChunk", False)) for c in chunks] == [
        (["ha"], False, False),
        (["ha"], True, True),
    ], chunks
    assert [texts(a) for a in got["artifacts"]] == [["ha", "ha"]], got["artifacts"]


# --- answers with nothing of the question in them -----------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "why"),
    [
        ([{"data": {}}], "the answer has no approved (required)."),
        ([{"url": "https://example.com/x.txt"}], "the message has nothing to read as an answer"),
        ([{"data": {"other": 1}}], "the answer has no approved (required)."),
        ([{"data": {"action": "accept"}}], "the answer has no approved (required)."),
        ([{"data": {"approved": 1}}], "approved is neither yes nor no"),
    ],
)
async def test_an_empty_answer_to_a_required_question_is_asked_again(server, parts, why: str) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        task = await asked(http, url, "approve")
        again = await answer(http, url, task["id"], parts)
        assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", again
        text = said(again)
        assert "That answer could not be read: " + why in text, text
        assert text.rstrip().endswith("Reply with yes or no (or a data part matching the schema)."), text
        done = await answer(http, url, task["id"], [{"text": "yes"}])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert "x: approved" in json.dumps(done["artifacts"]), done


# --- several questions answered with plain values ---------------------------------------------------------


async def test_two_questions_answered_with_plain_values_are_read(server) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        task = await asked(http, url, "pair")
        done = await answer(http, url, task["id"], [{"data": {"first": True, "second": "no"}}])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert json.loads(done["artifacts"][0]["parts"][0]["text"]) == {
        "first": {"approved": True},
        "second": {"approved": False},
    }, done


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"first": True}, "second: no answer to it in the data part."),
        ({"first": True, "second": 3}, "second: approved is neither yes nor no"),
        ({"first": "maybe", "second": False}, "first: 'maybe' is neither yes nor no"),
        ({"first": {}, "second": {"approved": True}}, "first: the answer has no approved (required)."),
    ],
)
async def test_two_questions_with_one_unreadable_answer_are_asked_again(server, data, why: str) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        task = await asked(http, url, "pair")
        again = await answer(http, url, task["id"], [{"data": data}])
        assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", again
        assert "That answer could not be read: " + why in said(again), said(again)
        done = await answer(
            http, url, task["id"], [{"data": {"first": "yes", "second": {"approved": False}}}]
        )
    assert json.loads(done["artifacts"][0]["parts"][0]["text"]) == {
        "first": {"approved": True},
        "second": {"approved": False},
    }, done


# --- enum values and integers ------------------------------------------------------------------------------


@pytest.mark.parametrize(("typed", "read"), [("A", "'A'"), ("a", "'a'"), (" A ", "'A'")])
async def test_an_enum_text_answer_prefers_the_exact_value(server, typed: str, read: str) -> None:
    _, url = server
    async with httpx.AsyncClient(timeout=30) as http:
        task = await asked(http, url, "grade")
        done = await answer(http, url, task["id"], [{"text": typed}])
    assert f"x: {read}" in json.dumps(done.get("artifacts")), done


def test_an_integer_in_exponent_form_is_exact_or_unreadable() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert read_text("1e23", schema)["n"] == 10**23
    for bad in ("1_000", "١٢", "１２", "1e-3"):
        with pytest.raises(Unreadable):
            read_text(bad, schema)
