"""Reading an answer from text or data (``agentmw.answers``, and ``answer_from``/``read_answer`` on top of it):
issue 24 item 5, what a text-only client (ADK, a2a-handler) sends to a typed question."""

from __future__ import annotations

from typing import Any

import pytest

from agentmw.answers import Unreadable, accepted_forms, read_data, read_text, read_value
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


# --- the hostile review's findings (issue 24 items 4/5): exact numbers, ranges, exact enum values, complete data


def test_an_integer_in_exponent_form_is_exact() -> None:
    assert read_text("1e23", COUNT) == {"count": 10**23}  # not 99999999999999991611392 (a float's)
    assert read_text("1.5e1", COUNT) == {"count": 15}
    assert read_text("12345678901234567891", COUNT) == {"count": 12345678901234567891}
    for bad in ("1e-1", "1e309", "1.0000000000000000000001"):
        with pytest.raises(Unreadable, match="whole number"):
            read_text(bad, COUNT)


@pytest.mark.parametrize("text", ["1_000", "١٢", "１２", "٣.5", "0x10", "1,000", "+-1", "1e", "."])
@pytest.mark.parametrize("schema", [COUNT, PRICE])
def test_only_ascii_digits_make_a_number(text: str, schema: dict[str, Any]) -> None:
    with pytest.raises(Unreadable):
        read_text(text, schema)


def ranged(kind: str, **bounds: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"n": {"type": kind, **bounds}}}


def test_numbers_keep_to_the_schemas_range() -> None:
    one_to_ten = ranged("integer", minimum=1, maximum=10)
    assert read_text("10", one_to_ten) == {"n": 10}
    assert read_text("1", one_to_ten) == {"n": 1}
    for bad in ("0", "11", "1e23"):
        with pytest.raises(Unreadable, match="a whole number from 1 to 10"):
            read_text(bad, one_to_ten)
    share = ranged("number", exclusiveMinimum=0, maximum=1)
    assert read_text("0.5", share) == {"n": 0.5}
    assert read_text("1", share) == {"n": 1}
    for bad in ("0", "-0.1", "1.01"):
        with pytest.raises(Unreadable, match="a number greater than 0 and at most 1"):
            read_text(bad, share)
    draft4 = ranged("number", minimum=0, exclusiveMinimum=True, exclusiveMaximum=5)
    with pytest.raises(Unreadable, match="greater than 0 and less than 5"):
        read_text("5", draft4)
    assert read_text("4.5", draft4) == {"n": 4.5}
    # the range holds for a data answer's numbers too, sent as numbers or as text
    with pytest.raises(Unreadable):
        read_data({"n": 11}, one_to_ten)
    with pytest.raises(Unreadable):
        read_data({"n": "0"}, one_to_ten)
    assert read_data({"n": 7}, one_to_ten) == {"n": 7}


@pytest.mark.parametrize(
    ("schema", "forms"),
    [
        (
            ranged("integer", minimum=1, maximum=10),
            "Reply with a whole number from 1 to 10 (or a data part matching the schema).",
        ),
        (
            ranged("number", minimum=0.5),
            "Reply with a number at least 0.5 (or a data part matching the schema).",
        ),
        (
            ranged("integer", exclusiveMaximum=100),
            "Reply with a whole number less than 100 (or a data part matching the schema).",
        ),
        (
            ranged("number", minimum=0, exclusiveMaximum=1.0),
            "Reply with a number at least 0 and less than 1 (or a data part matching the schema).",
        ),
    ],
)
def test_the_accepted_forms_say_the_range(schema: dict[str, Any], forms: str) -> None:
    assert accepted_forms(schema) == forms


def test_an_enum_takes_the_exact_value_first_and_a_case_folded_one_only_if_unambiguous() -> None:
    cased = {"type": "object", "properties": {"g": {"type": "string", "enum": ["a", "A"]}}}
    assert read_text("A", cased) == {"g": "A"}
    assert read_text("a", cased) == {"g": "a"}
    assert read_data({"g": "A"}, cased) == {"g": "A"}
    mixed = {"type": "object", "properties": {"g": {"type": "string", "enum": ["Ab", "aB"]}}}
    with pytest.raises(Unreadable, match="differ in case only"):
        read_text("AB", mixed)
    assert read_text("aB", mixed) == {"g": "aB"}
    assert read_text("GREEN", COLOR) == {"color": "Green"}  # one value folds to it: any case, as before


def test_a_data_answer_with_nothing_of_the_question_is_unreadable() -> None:
    for empty in ({}, {"other": 1}):
        with pytest.raises(Unreadable, match="approved"):
            read_data(empty, APPROVED)
        with pytest.raises(Unreadable, match="color"):
            read_data(empty, COLOR)  # no field required, but none of its fields is no answer either
    assert read_data({}, {"type": "object", "properties": {}}) == {}
    assert read_data({}, APPROVED, complete=False) == {}
    ask = Ask("Approve?", APPROVED, confirmation=True)
    with pytest.raises(Unreadable, match="approved"):
        read_answer({}, ask)
    with pytest.raises(Unreadable, match="approved"):
        read_answer({"action": "accept"}, ask)
    with pytest.raises(Unreadable, match="approved"):
        read_answer({"action": "accept", "content": {"note": "x"}}, ask)
    with pytest.raises(Unreadable, match="nothing to read"):
        read_answer(None, ask)
    # an explicit accept may leave optional fields out (an MCP elicitation result may)
    assert read_answer({"action": "accept", "content": {}}, Ask("Color?", COLOR)) == Answer("accept", {})
    # answer_from (AG-UI, MCP, the journal) keeps what it cannot judge as sent, as before
    assert answer_from({}, ask) == Answer("accept", {})
    assert answer_from({"other": 1}, ask) == Answer("accept", {"other": 1})
    assert answer_from(
        {"approved": "yes", "other": 1}, Ask("Two?", {**APPROVED, "required": ["approved", "why"]})
    ) == (Answer("accept", {"approved": True, "other": 1}))


def test_data_values_must_fit_their_simple_fields() -> None:
    for bad in ({"approved": 1}, {"approved": None}, {"approved": [True]}):
        with pytest.raises(Unreadable):
            read_data(bad, APPROVED)
    with pytest.raises(Unreadable):
        read_data({"count": 3.5}, COUNT)
    with pytest.raises(Unreadable):
        read_data({"count": True}, COUNT)
    with pytest.raises(Unreadable):
        read_data({"color": "purple"}, COLOR)
    assert read_data({"count": 3}, COUNT) == {"count": 3}
    nullable = {"type": "object", "properties": {"ok": {"type": ["boolean", "null"]}}}
    assert read_data({"ok": None}, nullable) == {"ok": None}


def test_a_plain_value_fills_the_one_field() -> None:
    assert read_value(True, APPROVED) == {"approved": True}
    assert read_value("no", APPROVED) == {"approved": False}
    assert read_value(3, COUNT) == {"count": 3}
    assert read_value(2.5, PRICE) == {"price": 2.5}
    assert read_value("Green", COLOR) == {"color": "Green"}
    for value, schema in (
        (3, APPROVED),
        (True, TWO),
        ({"approved": True}, APPROVED),
        (7, NAME),
        (None, COUNT),
    ):
        with pytest.raises(Unreadable):
            read_value(value, schema)
    assert read_answer(True, Ask("Approve?", APPROVED)) == Answer("accept", {"approved": True})
    assert read_answer(4, Ask("n?", COUNT)) == Answer("accept", {"count": 4})


def test_a_huge_integer_in_a_data_answer_is_checked_not_crashed_on() -> None:
    assert read_data({"price": 10**400}, PRICE) == {"price": 10**400}  # an int is finite; no float overflow
    with pytest.raises(Unreadable, match="at most 5"):
        read_data({"n": 10**400}, ranged("integer", maximum=5))
    with pytest.raises(Unreadable):
        read_data({"price": float("inf")}, PRICE)
