"""JSON-RPC and Streamable HTTP plumbing shared by both eras: codes, statuses, and the response writer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from .._transport import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SSE_HEADERS,
    ProtocolError,
    dumps,
    retryable_data,
    send_bytes,
    send_json,
    sse_data,
    store_fault,
)
from .._types import Scope, Send
from ..errors import retry_after_header

if TYPE_CHECKING:
    from .resume import StreamLog

logger = logging.getLogger("agentmw")

__all__ = [
    "HANDSHAKE_VERSIONS",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LATEST_HANDSHAKE",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "STATELESS_VERSIONS",
    "Exchange",
    "JsonRpcError",
    "dumps",
    "encode_or_error",
    "error_body",
    "fault_body",
    "header_map",
    "json_response",
    "plain_response",
    "sse_frame",
    "status_for",
]

HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
STATELESS_VERSIONS: Final = ("2026-07-28",)
LATEST_HANDSHAKE: Final = "2025-11-25"

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


# The MCP face's name for the transport's one error type: raised anywhere, rendered at the boundary.
JsonRpcError = ProtocolError


def status_for(code: int, stateless: bool) -> int:
    """The HTTP status of a JSON-RPC error: the 2026 table, or 200 in the handshake era."""
    return _STATELESS_STATUS.get(code, 200) if stateless else 200


def error_body(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def fault_body(request_id: Any, exc: BaseException, method: str) -> dict[str, Any]:
    """The answer to a request that failed with ``exc``: a store fault (``StoreUnavailable`` anywhere in it) is
    ``-32603`` marked retryable (``data: {"retryable": true, "retryAfter": s}``), which :meth:`Exchange.finish`
    sends as HTTP 503 with ``Retry-After``; anything else is a logged internal error. Both carry the request's
    id, so the client can match it (an answer with ``id: null`` leaves the official client waiting)."""
    fault = store_fault(exc)
    if fault is not None:
        logger.warning("agentmw MCP %s: %s", method, fault.message)
        return error_body(request_id, INTERNAL_ERROR, fault.message, retryable_data(fault))
    logger.error("agentmw MCP %s failed", method, exc_info=exc)
    return error_body(request_id, INTERNAL_ERROR, "Internal error")


def _retry_after(payload: dict[str, Any]) -> float | None:
    """The seconds of a retryable error's mark (:func:`fault_body`), None for any other payload."""
    error = payload.get("error")
    data = error.get("data") if isinstance(error, dict) else None
    if (
        isinstance(data, dict)
        and data.get("retryable") is True
        and isinstance(data.get("retryAfter"), (int, float))
    ):
        return float(data["retryAfter"])
    return None


async def plain_response(
    send: Send, status: int, headers: list[tuple[bytes, bytes]] | None = None, body: bytes = b""
) -> None:
    await send_bytes(send, status, body, headers)


json_response = send_json


def sse_frame(message: Any, event_id: str | None = None) -> bytes:
    return sse_data(message, event="message", event_id=event_id)


def encode_or_error(payload: dict[str, Any]) -> tuple[bytes, int | None]:
    """The response's JSON and its error code, if any. A result that cannot be written (NaN, infinity)
    becomes an internal error that keeps the request's id, so the client can match it to its call."""
    error = payload.get("error")
    try:
        return dumps(payload), (error.get("code", 0) if isinstance(error, dict) else None)
    except (ValueError, TypeError):
        logger.warning("MCP result for request %r could not be written as JSON", payload.get("id"))
        return dumps(
            error_body(
                payload.get("id"),
                INTERNAL_ERROR,
                "Internal error: the result could not be written as JSON (NaN or infinity)",
            )
        ), INTERNAL_ERROR


class Exchange:
    """One HTTP response that starts as JSON and turns into SSE on the first message sent before the answer.

    A fast handler that emits nothing is answered with plain JSON (and the mapped status), which is both
    faster and what clients and the SDK expect; progress, logs and server-to-client requests commit the
    response to ``text/event-stream``.

    With ``opener`` (the handshake era, ``resume.py``), the stream is resumable: its events carry ids and are
    kept in the shared state, the response is kept before it is sent, and a connection that is gone no longer
    stops the call's messages (a resumption picks them up).
    """

    __slots__ = ("_headers", "_send", "closed", "gone", "log", "opener", "stateless", "streaming")

    def __init__(
        self,
        send: Send,
        headers: list[tuple[bytes, bytes]] | None = None,
        *,
        stateless: bool,
        opener: Callable[[], StreamLog] | None = None,
    ) -> None:
        self._send = send
        self._headers = headers or []
        self.streaming = False
        self.closed = False
        self.stateless = stateless
        self.opener = opener
        self.log: StreamLog | None = None
        self.gone = False  # the connection failed under a resumable stream: its events are only kept now

    async def start_stream(self) -> None:
        if not self.streaming:
            self.streaming = True
            await self._send(
                {"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, *self._headers]}
            )

    async def message(self, message: Any) -> None:
        """Send a notification or a server-to-client request on this response's stream."""
        if self.closed:
            return
        if self.opener is None:
            await self.start_stream()
            await self._send({"type": "http.response.body", "body": sse_frame(message), "more_body": True})
            return
        if self.log is None:
            self.log = self.opener()
        framed = self.log.record(dumps(message))
        await self._deliver(framed, more=True)

    async def _deliver(self, body: bytes, *, more: bool) -> None:
        """Send on a resumable stream: a connection that fails is gone, and the stream goes on in the log."""
        if self.gone:
            return
        try:
            await self.start_stream()
            await self._send({"type": "http.response.body", "body": body, "more_body": more})
        except Exception:  # noqa: BLE001  (the client left; what it missed is kept for a resumption)
            self.gone = True
            logger.debug("MCP stream: the connection is gone; its events are kept for a resumption")

    async def keepalive(self) -> None:
        """A ``: ping`` comment; a call silent this long commits to SSE first, as the SDK does at 15 s."""
        if not self.closed:
            await self.start_stream()
            await self._send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})

    async def finish(self, payload: dict[str, Any]) -> None:
        if self.closed:
            return
        self.closed = True
        body, code = encode_or_error(payload)
        if self.streaming:
            if self.log is not None:  # kept before it is sent: from here on any replica can send it again
                try:
                    framed = await self.log.close(body)
                except Exception as exc:
                    if store_fault(exc) is None:
                        raise
                    # the store cannot keep it: sent as it is (no resumption can replay it, but this one is owed)
                    logger.warning("agentmw MCP: the answer could not be kept for resumption: %s", exc)
                    framed = b"event: message\ndata: " + body + b"\n\n"
                await self._deliver(framed or b"", more=False)
                return
            await self._send(
                {
                    "type": "http.response.body",
                    "body": b"event: message\ndata: " + body + b"\n\n",
                    "more_body": False,
                }
            )
            return
        status = 200 if code is None else status_for(code, self.stateless)
        headers = [(b"content-type", b"application/json"), *self._headers]
        seconds = _retry_after(payload) if code == INTERNAL_ERROR else None
        if seconds is not None:  # a store fault: 503 with Retry-After, which proxies and clients understand
            status = 503
            headers.append(retry_after_header(seconds))
        await send_bytes(self._send, status, body, headers)

    async def abandon(self) -> None:
        """No response is owed (the call was cancelled): the stream ends, and so does its log."""
        await self.start_stream()
        self.closed = True
        if self.log is not None:
            await self.log.close(None)
            await self._deliver(b"", more=False)
            return
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})


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
