"""Plain JSON for what a call produced, and back: how an :class:`~agentmw.outcomes.Outcome` crosses processes.

An outcome kept under an idempotency key is read back on another replica, which renders it onto its own
wire. So the parts faces look at by type (content parts, messages, artifacts, questions) come back as the
same dataclasses; bytes and tuples come back as bytes and tuples. Anything else (a pydantic model, a
custom object) comes back as its JSON form: faces render such a value from ``content`` and
``structured``, which hold JSON already. Only the classes registered with :func:`storable` (by the modules that
define them) are ever built from stored data.
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = ["from_json", "storable", "to_json"]

_TAG = "$t"
T = TypeVar("T", bound=type)

_known: dict[str, type] = {}
"""The dataclasses a stored value may hold, by name: each module that defines one registers it here
(:func:`storable`), so that this module, below them all, imports none of them."""


def storable(*classes: T) -> T:
    """Let :func:`from_json` rebuild these dataclasses from stored data (their names must be unique); returns the
    last, so that it can decorate one class."""
    for cls in classes:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls!r} is not a dataclass")
        found = _known.setdefault(cls.__name__, cls)
        if found is not cls:
            raise TypeError(f"two storable classes are named {cls.__name__}: {found!r} and {cls!r}")
    return classes[-1]


def to_json(value: Any, _depth: int = 0) -> Any:
    """``value`` as strict JSON (dicts, lists, str, finite numbers, bools, None), tagged where a type matters."""
    if _depth > 200:
        raise ValueError("value nested too deeply to store")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {_TAG: "bytes", "v": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, tuple):
        return {_TAG: "tuple", "v": [to_json(v, _depth + 1) for v in value]}
    if isinstance(value, list):
        return [to_json(v, _depth + 1) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and _TAG not in value:
            return {k: to_json(v, _depth + 1) for k, v in value.items()}
        return {
            _TAG: "dict",
            "v": [[to_json(k, _depth + 1), to_json(v, _depth + 1)] for k, v in value.items()],
        }
    cls = type(value)
    if dataclasses.is_dataclass(value) and _known.get(cls.__name__) is cls:
        return {
            _TAG: cls.__name__,
            "v": {
                f.name: to_json(getattr(value, f.name), _depth + 1)
                for f in dataclasses.fields(value)
                if f.init
            },
        }
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # a pydantic model: its JSON form
        try:
            return to_json(dump(mode="json"), _depth + 1)
        except Exception:  # noqa: BLE001  (its own serializer failed: keep what JSON would show)
            return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(dataclasses.asdict(value), _depth + 1)
    if isinstance(value, (set, frozenset)):
        return [to_json(v, _depth + 1) for v in value]
    if isinstance(value, Mapping):
        return to_json(dict(value), _depth + 1)
    return str(value)  # what the faces' JSON encoder would write for it


def from_json(data: Any) -> Any:
    """The value :func:`to_json` wrote."""
    if isinstance(data, list):
        return [from_json(v) for v in data]
    if not isinstance(data, dict):
        return data
    tag = data.get(_TAG)
    if tag is None:
        return {k: from_json(v) for k, v in data.items()}
    inner = data.get("v")
    if tag == "bytes" and isinstance(inner, str):
        return base64.b64decode(inner)
    if tag == "tuple" and isinstance(inner, list):
        return tuple(from_json(v) for v in inner)
    if tag == "dict" and isinstance(inner, list):
        return {_hashable(from_json(k)): from_json(v) for k, v in inner}
    cls = _known.get(tag)
    if cls is None or not isinstance(inner, dict):
        raise ValueError(f"unknown stored type {tag!r}")
    return cls(**{k: from_json(v) for k, v in inner.items()})


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key
