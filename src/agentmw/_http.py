"""Small ASGI response writers shared by the faces and the approvals endpoint."""

from __future__ import annotations

import json
from typing import Any

from ._types import Send

__all__ = ["send_bytes", "send_json"]

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode


async def send_bytes(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*(headers or []), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send_bytes(send, status, _encode(payload).encode(), [(b"content-type", b"application/json"),
                                                               *(headers or [])])
