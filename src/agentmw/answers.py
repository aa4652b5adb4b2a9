"""Reading a person's answer to a question from what a client can send: data, or plain text.

Pure functions, no I/O. A question (``ctx.ask``, ``ctx.confirm``, a gate) carries a flat JSON object schema
of its answer. Clients that can only send text (google-adk's ``RemoteA2aAgent``, a2a-handler, chat UIs)
send the user's next turn as it was typed: ``"yes"``, ``"3"``, ``"blue"``. :func:`read_text` turns such text
into the answer's content for the simple schemas (one boolean, enum, number, integer or string field);
:func:`read_data` does the same for the string values of a data answer. What cannot be read raises
:class:`Unreadable`, whose message says what would be; :func:`accepted_forms` is the same sentence for the
question itself (docs/context.md, "Answers from text").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["FALSE_WORDS", "TRUE_WORDS", "Unreadable", "accepted_forms", "read_data", "read_text"]

TRUE_WORDS = frozenset({"true", "yes", "y", "approve", "approved"})
FALSE_WORDS = frozenset({"false", "no", "n", "deny", "denied", "reject", "rejected"})
_SIMPLE = ("boolean", "integer", "number", "string")


class Unreadable(ValueError):
    """An answer that does not fit the question's schema; the message says what would."""


def _properties(schema: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return {}
    return {str(k): v if isinstance(v, Mapping) else {} for k, v in props.items()}


def _type(prop: Mapping[str, Any]) -> str | None:
    """A property's one JSON type (``["boolean", "null"]`` is boolean), or None."""
    kind = prop.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    return kind if isinstance(kind, str) else None


def _enum(prop: Mapping[str, Any]) -> list[Any] | None:
    values = prop.get("enum")
    if isinstance(values, list) and values:
        return values
    options = prop.get("oneOf") or prop.get("anyOf")
    if (
        isinstance(options, list)
        and options
        and all(isinstance(o, Mapping) and "const" in o for o in options)
    ):
        return [o["const"] for o in options]
    return None


def _field(schema: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """The one field a text answer fills: the only property, or the only required one."""
    props = _properties(schema)
    if len(props) == 1:
        return next(iter(props.items()))
    required = [r for r in schema.get("required") or () if r in props]
    if len(required) == 1:
        return required[0], props[required[0]]
    return None


def _word(text: str) -> str:
    return text.strip().strip("\"'`").rstrip(".!").strip().casefold()


def _shown(text: str) -> str:
    """An answer as a message quotes it: short, whatever the client sent."""
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _forms(prop: Mapping[str, Any]) -> str:
    """What a text answer to one field may be, as the end of "Reply with ..."."""
    values = _enum(prop)
    if values is not None:
        return "one of: " + ", ".join(str(v) for v in values)
    kind = _type(prop)
    if kind == "boolean":
        return "yes or no"
    if kind == "integer":
        return "a whole number"
    if kind == "number":
        return "a number"
    if kind in ("string", None):
        return "your answer as text"
    return "a data part matching the schema"


def accepted_forms(schema: Mapping[str, Any]) -> str:
    """The sentence a question's text ends with: how to answer it (by text where text can be read)."""
    props = _properties(schema)
    if not props:
        return "Reply with your answer as text, or a data part."
    field = _field(schema)
    if field is None or (_type(field[1]) not in (*_SIMPLE, None) and _enum(field[1]) is None):
        return "Reply with a data part matching the schema."
    return f"Reply with {_forms(field[1])} (or a data part matching the schema)."


def _convert(text: str, name: str, prop: Mapping[str, Any]) -> Any:
    """``text`` as a value of the field ``name``, or :class:`Unreadable`."""
    values = _enum(prop)
    word = _word(text)
    if values is not None:
        for value in values:
            if _word(str(value)) == word:
                return value
        raise Unreadable(f"{_shown(text)!r} is not an answer for {name}: reply with {_forms(prop)}.")
    kind = _type(prop)
    if kind == "boolean":
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise Unreadable(
            f"{_shown(text)!r} is neither yes nor no: reply with yes or no (also accepted: true/false, y/n, "
            "approve/deny, reject)."
        )
    if kind in ("integer", "number"):
        number: float
        try:
            number = int(word)
        except ValueError:
            try:
                number = float(word)
            except ValueError:
                number = math.nan
        if not math.isfinite(number) or (kind == "integer" and number != int(number)):
            raise Unreadable(f"{_shown(text)!r} is not {_forms(prop)}: reply with {_forms(prop)}.")
        return int(number) if kind == "integer" else number
    if kind in ("string", None):
        return text
    raise Unreadable(f"{name} cannot be answered by text: reply with a data part matching the schema.")


def read_text(text: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The content a text answer gives a question with ``schema``: ``{field: value}`` for a simple schema
    (``{"text": text}`` when the schema names no property); :class:`Unreadable` otherwise."""
    props = _properties(schema)
    if not props:
        return {"text": text}
    field = _field(schema)
    if field is None:
        raise Unreadable(
            "This question has several fields ("
            + ", ".join(props)
            + "): reply with a data part matching the schema."
        )
    name, prop = field
    return {name: _convert(text, name, prop)}


def read_data(content: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """A data answer with the string values of its boolean, number and enum fields read as text would be
    (``{"approved": "yes"}`` is ``{"approved": true}``); other values are kept as sent."""
    props = _properties(schema)
    read = dict(content)
    for name, value in content.items():
        prop = props.get(name)
        if prop is None or not isinstance(value, str):
            continue
        if _enum(prop) is not None or _type(prop) in ("boolean", "integer", "number"):
            read[name] = _convert(value, name, prop)
    return read
