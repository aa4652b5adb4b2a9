"""The shape of a request body, measured on its bytes before it is parsed: how many JSON values, how deep.

Decoding is the one cost of a request that grows with the body and cannot be stopped halfway: the JSON
decoder holds the event loop (and the GIL) for all of it, about 0.15 s for 4 MiB of short strings and 0.5 s
for 4 MiB of ``[],``; everything after it (validation, copies, encodings) costs about as much again per value.
So a body is counted first, at the speed of ``bytes.count``: a body within ``max_values`` and ``max_depth``
is then cheap to decode and to handle, and one past them is refused before any of that work.

What is counted, outside strings: each ``,``, ``[`` and ``{``. That is one per array item and one per object
member (an empty array or object counts one), at every level: the number of values, near enough. The depth is
how many arrays and objects are open at once (``{"a": [1]}`` is 2). Counting inside strings is avoided without
decoding them: escaped backslashes and quotes are dropped, and what lies between the remaining quotes is a
string. A body that is not JSON at all may be counted wrong, and is then refused either here or by the decoder.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Final

from ._transport import INVALID_REQUEST, ProtocolError, loads, request_id_of

__all__ = ["BodyShape", "ShapeError", "check_shape", "top_level_id"]

MAX_DEPTH_SETTING: Final = 128
"""The deepest ``max_depth`` that may be configured: the decoder, pydantic's serializer (255 levels) and the
state's encoder (200) must never meet a body deeper than they can handle, with the wrappers the faces add."""

_KEEP_BRACKETS: Final = bytes(c for c in range(256) if c not in b"[]{}")  # the bytes translate() deletes
_DEPTH_STEP: Final = [0] * 256
for _open in b"[{":
    _DEPTH_STEP[_open] = 1
for _close in b"]}":
    _DEPTH_STEP[_close] = -1


@dataclass(frozen=True, slots=True)
class BodyShape:
    """How many values (``max_values``) and how many levels (``max_depth``) one request body may hold."""

    max_values: int = 10_000
    max_depth: int = 64

    def __post_init__(self) -> None:
        if self.max_values < 1:
            raise ValueError("max_body_values must be at least 1")
        if not 1 <= self.max_depth <= MAX_DEPTH_SETTING:
            raise ValueError(f"max_body_depth must be between 1 and {MAX_DEPTH_SETTING}")


class ShapeError(ProtocolError):
    """A body with too many values or too many levels, refused before it was decoded.

    ``kind`` is ``"values"`` or ``"depth"``. ``request_id`` is the body's top-level ``"id"`` when a cheap scan
    found a valid one (:func:`top_level_id`; a string or an integer), so a JSON-RPC face can still answer the
    request it refuses; else None.
    """

    def __init__(self, kind: str, message: str, limit: int) -> None:
        super().__init__(INVALID_REQUEST, message, status=413 if kind == "values" else 400)
        self.kind = kind
        self.limit = limit


def check_shape(raw: bytes, shape: BodyShape) -> None:
    """Raise :class:`ShapeError` when ``raw`` holds more than ``shape`` allows; cheap when it does not.

    An upper bound comes first (every ``,``, ``[`` and ``{``, strings included): most bodies are under it and
    cost three ``bytes.count``. Only a body over it has its strings set aside, to be counted exactly.
    """
    opens = raw.count(b"[") + raw.count(b"{")
    if opens + raw.count(b",") <= shape.max_values and opens <= shape.max_depth:
        return
    text = raw
    if b"\\" in text:  # an escaped backslash, then an escaped quote: what is left of '"' delimits strings
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    strings = text.count(b'"') // 2
    # Every string is an object's key or a value, and a member holds at most two of them: so many strings are
    # so many values, and they need not be set aside one by one to know it.
    if strings > 2 * shape.max_values + 1:
        raise _too_many(raw, shape)
    outside = b"".join(text.split(b'"')[::2]) if strings else text
    brackets = outside.translate(None, _KEEP_BRACKETS)
    # The depth first, so that nesting is refused alike at every depth; its cost is bounded, since a body with
    # more brackets than this holds more values than allowed anyway (one per '[' or '{', and two brackets each).
    if (
        shape.max_depth < len(brackets) <= 4 * shape.max_values + 2
        and max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, brackets))) > shape.max_depth
    ):
        error = ShapeError(
            "depth", f"The body is nested more than {shape.max_depth} levels deep", shape.max_depth
        )
        _attach_id(error, raw)
        raise error
    if outside.count(b",") + brackets.count(b"[") + brackets.count(b"{") > shape.max_values:
        raise _too_many(raw, shape)


def _too_many(raw: bytes, shape: BodyShape) -> ShapeError:
    error = ShapeError(
        "values",
        f"The body holds more than {shape.max_values} JSON values (array items and "
        "object members, at every level)",
        shape.max_values,
    )
    _attach_id(error, raw)
    return error


def _attach_id(error: ShapeError, raw: bytes) -> None:
    found, value = top_level_id(raw)
    error.request_id = request_id_of({"id": value}) if found else None


# --- the request's id, without decoding the body -------------------------------------------------------------

_TOKEN: Final = re.compile(rb'["{}\[\]]')
_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SCALAR: Final = re.compile(rb"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
_SPACE: Final = re.compile(rb"[ \t\r\n]*")
_TOKEN_BUDGET: Final = 20_000
_WINDOW: Final = 1024 * 1024


def top_level_id(raw: bytes, budget: int = _TOKEN_BUDGET, window: int = _WINDOW) -> tuple[bool, Any]:
    """``(True, value)`` when ``raw`` is an object whose top-level ``"id"`` member holds a string, a number or
    null, found within ``budget`` brackets and strings and the first ``window`` bytes; else ``(False, None)``.

    It steps over strings and nested values without building them, so the id of a refused body costs little:
    the searches run at about 4 ns a byte and 0.7 us a token, so at most some 20 ms. JSON-RPC clients write the
    envelope's id before its params, where it is found at once; one written after 1 MiB or 20,000 brackets and
    strings of params is not looked for, and the refusal carries ``id: null``.
    """
    end = min(len(raw), window)
    at = _SPACE.match(raw, 0).end()  # type: ignore[union-attr]
    if raw[at : at + 1] != b"{":
        return False, None
    depth, at = 1, at + 1
    for _ in range(budget):
        token = _TOKEN.search(raw, at, end)
        if token is None:
            return False, None
        at = token.start()
        char = raw[at : at + 1]
        if char == b'"':
            string = _STRING.match(raw, at)
            if string is None:
                return False, None
            start, at = at, string.end()
            if depth == 1 and at - start == 4 and raw[start:at] == b'"id"':
                after = _SPACE.match(raw, at).end()  # type: ignore[union-attr]
                if raw[after : after + 1] == b":":
                    return _scalar_at(raw, _SPACE.match(raw, after + 1).end())  # type: ignore[union-attr]
        elif char in b"{[":
            depth, at = depth + 1, at + 1
        else:
            depth, at = depth - 1, at + 1
            if depth == 0:
                return False, None
    return False, None


def _scalar_at(raw: bytes, at: int) -> tuple[bool, Any]:
    match = _STRING.match(raw, at) or _SCALAR.match(raw, at)
    if match is None:  # an object or an array: not an id the envelope would accept
        return False, None
    try:
        return True, loads(match.group())
    except ProtocolError:
        return False, None
