"""Reading an answer from text or data (``agentmw.answers``, and ``answer_from``/``read_answer`` on top of it):
issue 24 item 5, what a text-only client (ADK, a2a-handler) sends to a typed question."""

from __future__ import annotations

from typing import Any

import pytest

from agentmw.answers import Unreadable, accepted_forms, read_data, read_text
from agentmw.context import Answer, Ask, answer_from, read_answer

APPROVED = {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}
COLOR = {"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "Green", "blue"]}}}
COUNT = {"type": "object", "properties": {"count": {"type": "integer"}}}
PRICE = {"type": "object", "properties": {"price": {"type": "number"}}}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}}
TWO = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}


@pytest.mark.parametrize(
    "text", ["true", "yes", "Y", "approve", "Approved", " YES ", "yes.", '"yes"', "True!"]
)
def test_yes_words_approve(text: str) -> None:
    assert read_text(text, APPROVED) == {"approved": True}


@pytest.mark.parametrize("text", ["false", "no", "N", "deny", "denied", "reject", "Rejected", "no."])
def test_no_words_decline(text: str) -> None:
    assert read_text(text, APPROVED) == {"approved": False}


@pytest.mark.parametrize("text", ["maybe", "", "yes please", "1", "sure"])
def test_anything_else_is_not_silently_false(text: str) -> None:
    with pytest.raises(Unreadable, match="yes or no"):
        read_text(text, APPROVED)


def test_enums_are_read_in_any_case_and_keep_their_spelling() -> None:
    assert read_text("GREEN", COLOR) == {"color": "Green"}
    assert read_text(" blue ", COLOR) == {"color": "blue"}
    with pytest.raises(Unreadable, match="one of: red, Green, blue"):
        read_text("purple", COLOR)
    consts = {"type": "object", "properties": {"size": {"oneOf": [{"const": 1}, {"const": 2}]}}}
    assert read_text("2", consts) == {"size": 2}


def test_numbers_and_integers() -> None:
    assert read_text(" 42 ", COUNT) == {"count": 42}
    assert read_text("3.0", COUNT) == {"count": 3}
    assert read_text("-1.5", PRICE) == {"price": -1.5}
    assert read_text("7", PRICE) == {"price": 7}
    for bad, schema in (("3.5", COUNT), ("many", COUNT), ("nan", PRICE), ("inf", PRICE), ("", PRICE)):
        with pytest.raises(Unreadable):
            read_text(bad, schema)


def test_a_single_string_field_is_the_text_itself() -> None:
    assert read_text("Ada Lovelace", NAME) == {"name": "Ada Lovelace"}
    assert read_text("anything", {"type": "object", "properties": {}}) == {"text": "anything"}
    assert read_text("x", {"properties": {"note": {}}}) == {"note": "x"}  # no type: text


def test_several_fields_take_text_only_when_one_is_required() -> None:
    with pytest.raises(Unreadable, match="data part"):
        read_text("hi", TWO)
    assert read_text("hi", {**TWO, "required": ["b"]}) == {"b": "hi"}
    nested = {"type": "object", "properties": {"tags": {"type": "array"}}}
    with pytest.raises(Unreadable, match="data part"):
        read_text("a, b", nested)


def test_data_answers_have_their_string_values_read_by_type() -> None:
    assert read_data({"approved": "yes"}, APPROVED) == {"approved": True}
    assert read_data({"approved": True, "note": "x"}, APPROVED) == {"approved": True, "note": "x"}
    assert read_data({"count": "5"}, COUNT) == {"count": 5}
    assert read_data({"name": "yes"}, NAME) == {"name": "yes"}  # a string field keeps its string
    with pytest.raises(Unreadable):
        read_data({"approved": "perhaps"}, APPROVED)


@pytest.mark.parametrize(
    ("schema", "forms"),
    [
        (APPROVED, "Reply with yes or no (or a data part matching the schema)."),
        (COLOR, "Reply with one of: red, Green, blue (or a data part matching the schema)."),
        (COUNT, "Reply with a whole number (or a data part matching the schema)."),
        (PRICE, "Reply with a number (or a data part matching the schema)."),
        (NAME, "Reply with your answer as text (or a data part matching the schema)."),
        (TWO, "Reply with a data part matching the schema."),
        ({"type": "object", "properties": {}}, "Reply with your answer as text, or a data part."),
    ],
)
def test_the_question_names_the_accepted_forms(schema: dict[str, Any], forms: str) -> None:
    assert accepted_forms(schema) == forms


def test_read_answer_refuses_what_answer_from_keeps() -> None:
    ask = Ask("Approve?", APPROVED, confirmation=True)
    assert read_answer("yes", ask) == Answer("accept", {"approved": True})
    assert read_answer({"action": "decline"}, ask) == Answer("decline", None)
    assert read_answer({"action": "accept", "content": {"approved": "no"}}, ask) == Answer(
        "accept", {"approved": False}
    )
    assert read_answer(True, ask) == Answer("accept", {"approved": True})
    with pytest.raises(Unreadable):
        read_answer("later", ask)
    # answer_from (AG-UI, the journal) never refuses: what it cannot read it keeps as sent, as before
    assert answer_from("later", ask) == Answer("accept", {"approved": "later"})
    assert answer_from({"approved": "perhaps"}, ask) == Answer("accept", {"approved": "perhaps"})
    assert answer_from({"action": "accept", "content": {"approved": "?"}}, ask) == Answer(
        "accept", {"approved": "?"}
    )
    assert answer_from("yes", ask) == Answer("accept", {"approved": True})
    assert answer_from("hi", Ask("Two?", TWO)) == Answer("accept", {"text": "hi"})
    assert answer_from(3, Ask("n?", COUNT)) == Answer("accept", {"value": 3})


def test_an_unreadable_answer_is_quoted_short() -> None:
    with pytest.raises(Unreadable) as caught:
        read_text("maybe " * 10_000, APPROVED)
    assert len(str(caught.value)) < 200 and "'maybe maybe" in str(caught.value)
