"""_codec: what a call produced, as strict JSON and back (an outcome kept under an idempotency key is read back on
another replica). The types that matter come back as themselves; the codec imports none of them: the modules that
define them register them (``storable``)."""

from __future__ import annotations

import dataclasses
import json
import math

import pydantic
import pytest

from agentmw._codec import from_json, storable, to_json
from agentmw.content import EmbeddedResource, Image, Text
from agentmw.context import Answer, Ask, Root
from agentmw.messages import Artifact, Data, File, Message


def round_trip(value: object) -> object:
    return from_json(json.loads(json.dumps(to_json(value), allow_nan=False)))


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        "text",
        [1, "a", None],
        {"a": {"b": [1, 2]}},
        b"\x00\xffbytes",
        (1, (2, "x")),
        {1: "one", (2, 3): "pair"},
        {"$t": "not a tag of ours"},
    ],
)
def test_plain_values_come_back_as_they_were(value: object) -> None:
    assert round_trip(value) == value


def test_the_registered_types_come_back_as_themselves() -> None:
    parts = [
        Text("hi"),
        Image(b"\x89PNG", "image/png"),
        EmbeddedResource("file:///a.txt", text="a"),
        Message((Text("hello"), Data({"n": 1}), File(data=b"x", name="x.bin")), role="user"),
        Artifact((Text("done"),), name="report"),
        Ask("Which one?"),
        Answer("accept", {"which": 1}),
        Root("file:///work", "work"),
    ]
    back = round_trip(parts)
    assert isinstance(back, list) and back == parts
    assert [type(p) for p in back] == [type(p) for p in parts]


def test_what_json_cannot_hold_is_kept_as_its_json_form() -> None:
    class Model(pydantic.BaseModel):
        n: int

    @dataclasses.dataclass
    class Unregistered:
        n: int

    assert round_trip(Model(n=1)) == {"n": 1}
    assert round_trip(Unregistered(2)) == {"n": 2}
    assert round_trip({1, 2}) in ([1, 2], [2, 1])
    assert to_json(math.nan) is None and to_json(math.inf) is None
    assert to_json(object()).startswith("<object object")


def test_a_stored_type_nobody_registered_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown stored type 'Nope'"):
        from_json({"$t": "Nope", "v": {}})
    with pytest.raises(ValueError, match="unknown stored type 'bytes'"):
        from_json({"$t": "bytes", "v": 1})  # a tag of ours with the wrong shape


def test_a_value_nested_too_deeply_is_refused() -> None:
    value: list[object] = []
    for _ in range(250):
        value = [value]
    with pytest.raises(ValueError, match="nested too deeply"):
        to_json(value)


def test_storable_takes_dataclasses_with_names_of_their_own() -> None:
    with pytest.raises(TypeError, match="not a dataclass"):
        storable(int)

    @dataclasses.dataclass(frozen=True)
    class Text:  # another class of the same name as agentmw.content.Text
        text: str

    with pytest.raises(TypeError, match="two storable classes are named Text"):
        storable(Text)
    assert storable(Ask) is Ask  # registering the same class again changes nothing
