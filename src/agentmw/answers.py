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
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

__all__ = [
    "FALSE_WORDS",
    "TRUE_WORDS",
    "Unreadable",
    "accepted_forms",
    "read_data",
    "read_text",
    "read_value",
]

TRUE_WORDS = frozenset({"true", "yes", "y", "approve", "approved"})
FALSE_WORDS = frozenset({"false", "no", "n", "deny", "denied", "reject", "rejected"})
_SIMPLE = ("boolean", "integer", "number", "string")
# ASCII digits only: Python's int()/float() also take "1_000", "٣" and "１２", which nobody types as a number
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


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


def _bare(text: str) -> str:
    return text.strip().strip("\"'`").rstrip(".!").strip()


def _word(text: str) -> str:
    return _bare(text).casefold()


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
        return "a whole number" + _range(prop)
    if kind == "number":
        return "a number" + _range(prop)
    if kind in ("string", None):
        return "your answer as text"
    return "a data part matching the schema"


def _bound(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _bounds(prop: Mapping[str, Any]) -> tuple[tuple[Any, bool] | None, tuple[Any, bool] | None]:
    """The field's lower and upper bound, each ``(value, exclusive)``, from ``minimum``/``maximum`` and
    ``exclusiveMinimum``/``exclusiveMaximum`` (a number, or draft 4's boolean)."""
    found: list[tuple[Any, bool] | None] = []
    for inclusive, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        limit: tuple[Any, bool] | None = None
        if _bound(prop.get(inclusive)):
            limit = (prop[inclusive], prop.get(exclusive) is True)
        if _bound(prop.get(exclusive)):
            tighter = limit is None or (
                prop[exclusive] >= limit[0] if inclusive == "minimum" else prop[exclusive] <= limit[0]
            )
            if tighter:
                limit = (prop[exclusive], True)
        found.append(limit)
    return found[0], found[1]


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


def _range(prop: Mapping[str, Any]) -> str:
    """`` from 1 to 10``, `` greater than 0``, ... (nothing when the field has no bounds)."""
    low, high = _bounds(prop)
    if low is not None and high is not None and not low[1] and not high[1]:
        return f" from {_num(low[0])} to {_num(high[0])}"
    said = []
    if low is not None:
        said.append(("greater than " if low[1] else "at least ") + _num(low[0]))
    if high is not None:
        said.append(("less than " if high[1] else "at most ") + _num(high[0]))
    return (" " + " and ".join(said)) if said else ""


def _in_range(number: Any, prop: Mapping[str, Any]) -> bool:
    low, high = _bounds(prop)
    if low is not None and (number <= low[0] if low[1] else number < low[0]):
        return False
    return not (high is not None and (number >= high[0] if high[1] else number > high[0]))


def _number(text: str, kind: str, prop: Mapping[str, Any]) -> int | float | None:
    """``text`` as a number of ``kind``, exactly (an integer through :class:`decimal.Decimal`, never a
    float: ``1e23`` is 10**23), within the field's bounds; None when it is not one."""
    word = _word(text)
    if not _NUMBER.fullmatch(word) or not math.isfinite(float(word)):
        return None  # beyond a double's range is no number a client means (JSON's interoperable range)
    number: int | float
    if kind == "integer":
        exact = Decimal(word)
        if exact != exact.to_integral_value():
            return None
        number = int(exact)
    elif "." in word or "e" in word:
        number = float(word)
    else:
        number = int(word)
    return number if _in_range(number, prop) else None


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
    if values is not None:
        # the value as typed first (enum ["a", "A"]: "A" is "A"), then in any case if only one fits
        exact = [v for v in values if str(v) in (text.strip(), _bare(text))]
        if len(exact) > 1:
            exact = [v for v in exact if isinstance(v, str)] or exact
        folded = [v for v in values if _word(str(v)) == _word(text)]
        found = exact if exact else folded
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise Unreadable(
                f"{_shown(text)!r} is more than one of the values for {name} (they differ in case only): "
                f"reply with exactly {_forms(prop)}."
            )
        raise Unreadable(f"{_shown(text)!r} is not an answer for {name}: reply with {_forms(prop)}.")
    word = _word(text)
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
        number = _number(text, kind, prop)
        if number is None:
            raise Unreadable(f"{_shown(text)!r} is not {_forms(prop)}: reply with {_forms(prop)}.")
        return number
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


def _nullable(prop: Mapping[str, Any]) -> bool:
    kind = prop.get("type")
    return kind == "null" or (isinstance(kind, list) and "null" in kind)


def _fits(value: Any, name: str, prop: Mapping[str, Any]) -> Any:
    """A non-text value of a data answer's field, as it is if it fits the field's simple type (a boolean
    for a boolean, a number in range for a number, one of an enum's values), else :class:`Unreadable`."""
    values = _enum(prop)
    kind = _type(prop)
    if value is None and (_nullable(prop) or (values is not None and None in values)):
        return value
    if values is not None:
        if any(type(value) is type(v) and value == v for v in values):
            return value
        raise Unreadable(f"{_shown(repr(value))} is not an answer for {name}: reply with {_forms(prop)}.")
    if kind == "boolean" and not isinstance(value, bool):
        raise Unreadable(f"{name} is neither yes nor no: reply with yes or no.")
    if kind in ("integer", "number"):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if (
            not number
            or (isinstance(value, float) and not math.isfinite(value))
            or (kind == "integer" and isinstance(value, float) and not value.is_integer())
            or not _in_range(value, prop)
        ):
            raise Unreadable(
                f"{_shown(repr(value))} for {name} is not {_forms(prop)}: reply with {_forms(prop)}."
            )
    return value


def _read_field(value: Any, name: str, prop: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        if _enum(prop) is not None or _type(prop) in ("boolean", "integer", "number"):
            return _convert(value, name, prop)
        return value
    return _fits(value, name, prop)


def _complete(content: Mapping[str, Any], schema: Mapping[str, Any], props: Mapping[str, Any]) -> None:
    """A data answer with nothing of the question in it is no answer (never a silent "declined")."""
    required = schema.get("required")
    missing = (
        [r for r in required if isinstance(r, str) and r not in content] if isinstance(required, list) else []
    )
    if missing:
        raise Unreadable(f"the answer has no {', '.join(missing)} (required).")
    if props and not any(name in content for name in props):
        raise Unreadable(f"the answer has none of this question's fields ({', '.join(props)}).")


def read_data(
    content: Mapping[str, Any], schema: Mapping[str, Any], *, complete: bool = True
) -> dict[str, Any]:
    """A data answer with the string values of its boolean, number and enum fields read as text would be
    (``{"approved": "yes"}`` is ``{"approved": true}``), and their other values checked against the field
    (a number in the field's range, a boolean for a boolean, one of an enum's values); values of other
    fields are kept as sent. ``complete``: an answer missing a required field, or with none of the schema's
    fields, is :class:`Unreadable` too."""
    props = _properties(schema)
    read = dict(content)
    for name, value in content.items():
        prop = props.get(name)
        if prop is not None:
            read[name] = _read_field(value, name, prop)
    if complete:
        _complete(read, schema, props)
    return read


def read_value(value: Any, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The content a plain value (``true``, ``3``, ``"no"``: what a data part keyed by question may hold)
    gives a question with ``schema``: it fills the field text would fill, and must fit it."""
    if isinstance(value, str):
        return read_text(value, schema)
    props = _properties(schema)
    if not props:
        return {"value": value}
    field = _field(schema)
    if field is None:
        raise Unreadable(
            "This question has several fields (" + ", ".join(props) + "): answer it with an object of them."
        )
    name, prop = field
    if isinstance(value, (dict, list)) and (_enum(prop) is not None or _type(prop) in _SIMPLE):
        raise Unreadable(f"{name} takes {_forms(prop)}, not an object or a list.")
    if _type(prop) == "string" and not isinstance(value, str) and not (value is None and _nullable(prop)):
        raise Unreadable(f"{name} takes text: reply with {_forms(prop)}.")
    return {name: _fits(value, name, prop)}
