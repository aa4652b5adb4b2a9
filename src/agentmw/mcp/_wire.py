"""JSON-RPC and Streamable HTTP plumbing shared by both eras: codes, statuses, and the response writer."""

from __future__ import annotations

import json
from typing import Any, Final

from .._types import Receive, Scope, Send

__all__ = [
    "HANDSHAKE_VERSIONS",
    "STATELESS_VERSIONS",
    "LATEST_HANDSHAKE",
    "JsonRpcError",
    "Exchange",
    "dumps",
    "error_body",
    "plain_response",
    "json_response",
    "status_for",
]

HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
STATELESS_VERSIONS: Final = ("2026-07-28",)
LATEST_HANDSHAKE: Final = "2025-11-25"

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
SESSION_NOT_FOUND: Final = -32001
RESOURCE_NOT_FOUND_2025: Final = -32002
HEADER_MISMATCH: Final = -32020
MISSING_CAPABILITY: Final = -32021
UNSUPPORTED_VERSION: Final = -32022

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION: Final = "io.modelcontextprotocol/subscriptionId"

_STATELESS_STATUS: Final = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_CAPABILITY: 400,
    UNSUPPORTED_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}

SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_JSON_CT: Final = (b"content-type", b"application/json")


class JsonRpcError(Exception):
    """An error answer to a JSON-RPC request."""

    def __init__(self, code: int, message: str, data: Any = None, *, status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.status = status

    def body(self, request_id: Any) -> dict[str, Any]:
        return error_body(request_id, self.code, self.message, self.data)


def status_for(code: int, stateless: bool) -> int:
    """The HTTP status of a JSON-RPC error: the 2026 table, or 200 in the handshake era."""
    return _STATELESS_STATUS.get(code, 200) if stateless else 200


_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def dumps(value: Any) -> bytes:
    return _encoder.encode(value).encode("utf-8")


def error_body(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


async def plain_response(send: Send, status: int, headers: list[tuple[bytes, bytes]] | None = None,
                         body: bytes = b"") -> None:
    all_headers = list(headers or [])
    all_headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body})


async def json_response(send: Send, status: int, payload: Any,
                        headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = dumps(payload)
    all_headers = [_JSON_CT, (b"content-length", str(len(body)).encode())]
    if headers:
        all_headers.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body})


def sse_frame(message: Any, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: message\ndata: ".encode() + dumps(message) + b"\n\n"


class Exchange:
    """One HTTP response that starts as JSON and turns into SSE on the first message sent before the answer.

    A fast handler that emits nothing is answered with plain JSON (and the mapped status), which is both
    faster and what clients and the SDK expect; progress, logs and server-to-client requests commit the
    response to ``text/event-stream``.
    """

    __slots__ = ("_send", "_headers", "streaming", "closed", "stateless")

    def __init__(self, send: Send, headers: list[tuple[bytes, bytes]] | None = None, *, stateless: bool) -> None:
        self._send = send
        self._headers = headers or []
        self.streaming = False
        self.closed = False
        self.stateless = stateless

    async def start_stream(self) -> None:
        if not self.streaming:
            self.streaming = True
            await self._send({"type": "http.response.start", "status": 200,
                              "headers": [*SSE_HEADERS, *self._headers]})

    async def message(self, message: Any) -> None:
        """Send a notification or a server-to-client request on this response's stream."""
        if self.closed:
            return
        await self.start_stream()
        await self._send({"type": "http.response.body", "body": sse_frame(message), "more_body": True})

    async def keepalive(self) -> None:
        """A ``: ping`` comment; a call silent this long commits to SSE first, as the SDK does at 15 s."""
        if not self.closed:
            await self.start_stream()
            await self._send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})

    async def finish(self, payload: dict[str, Any]) -> None:
        if self.closed:
            return
        self.closed = True
        if self.streaming:
            await self._send({"type": "http.response.body", "body": sse_frame(payload), "more_body": False})
            return
        status = 200
        error = payload.get("error")
        if error is not None:
            status = status_for(error.get("code", 0), self.stateless)
        await json_response(self._send, status, payload, self._headers)


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None when it is larger than ``limit``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionAbortedError
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def header_map(scope: Scope) -> tuple[dict[str, str], set[str] | None]:
    """Headers by name (ASGI servers send them lowercased), and the names that were repeated.

    A repeated header keeps its values joined by ", "; the set of repeated names is None when there is none.
    """
    headers: dict[str, str] = {}
    repeated: set[str] | None = None
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1")
        value = raw_value.decode("latin-1")
        if name in headers:
            headers[name] = f"{headers[name]}, {value}"
            repeated = (repeated or set()) | {name}
        else:
            headers[name] = value
    return headers, repeated
