"""JSON text for arbitrary return values (models, dataclasses, plain data)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter

__all__ = ["to_json_text"]

_any: TypeAdapter[Any] = TypeAdapter(Any)


def to_json_text(value: Any) -> str:
    if isinstance(value, (dict, list, int, float, bool)) or value is None:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return _any.dump_json(value).decode()
