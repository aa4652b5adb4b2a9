"""Plain JSON for what a call produced, and back: how an :class:`~agentmw.runtime.Outcome` crosses processes.

An outcome kept under an idempotency key is read back on another replica, which renders it onto its own
wire. So the parts faces look at by type (content parts, messages, artifacts, questions) come back as the
same dataclasses; bytes and tuples come back as bytes and tuples. Anything else (a pydantic model, a
custom object) comes back as its JSON form: faces render such a value from ``content`` and
``structured``, which hold JSON already. Only the classes named here are ever built from stored data.
"""

from __future__ import annotations

import base64
import dataclasses
import math
from typing import Any

__all__ = ["from_json", "to_json"]

_TAG = "$t"


def _classes() -> dict[str, type]:
    from . import content, context, messages

    found: dict[str, type] = {}
    for module, names in (
        (content, ("Text", "Image", "Audio", "ResourceLink", "EmbeddedResource", "PromptMessage")),
        (messages, ("Message", "File", "Data", "Artifact")),
        (context, ("Ask", "Sample", "ListRoots", "Answer", "Sampled", "Root")),
    ):
        for name in names:
            cls = getattr(module, name, None)
            if isinstance(cls, type) and dataclasses.is_dataclass(cls):
                found[name] = cls
    return found


_known: dict[str, type] | None = None


def _registry() -> dict[str, type]:
    global _known
    if _known is None:
        _known = _classes()
    return _known


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
    if dataclasses.is_dataclass(value) and _registry().get(cls.__name__) is cls:
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
    from collections.abc import Mapping

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
    if tag == "bytes":
        return base64.b64decode(inner)
    if tag == "tuple":
        return tuple(from_json(v) for v in inner)
    if tag == "dict":
        return {_hashable(from_json(k)): from_json(v) for k, v in inner}
    cls = _registry().get(tag)
    if cls is None or not isinstance(inner, dict):
        raise ValueError(f"unknown stored type {tag!r}")
    return cls(**{k: from_json(v) for k, v in inner.items()})


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key
