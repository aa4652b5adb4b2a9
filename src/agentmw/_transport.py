"""The transport layer every face uses: bodies in, JSON in and out, the JSON-RPC envelope, JSON and SSE out.

One place decides how a body is read (with its size limit; a disconnect is an exception), what JSON is
accepted (strict: no ``NaN``/``Infinity``, no overflowing floats, UTF-8 only), what JSON is written
(``allow_nan=False``; a lone surrogate is escaped, never handed to the UTF-8 codec), what a JSON-RPC
message looks like, and how SSE streams are framed, kept alive and ended when the client leaves or the
server shuts down. Faces raise :class:`ProtocolError` anywhere and render it once at their boundary.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import sys
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from . import _memory
from ._types import Receive, Scope, Send
from .errors import AccessRefused, AgentmwError, StoreUnavailable, retry_after_header

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "SSE_HEADERS",
    "ClientDisconnected",
    "ProtocolError",
    "RpcMessage",
    "classify_rpc",
    "dumps",
    "dumps_finite",
    "identity_error",
    "loads",
    "read_body",
    "read_json",
    "request_id_of",
    "retryable_data",
    "send_bytes",
    "send_json",
    "shutting_down",
    "sse_comment",
    "sse_data",
    "store_fault",
    "store_unavailable",
    "stream_sse",
    "to_json_text",
    "wait_for_exit",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603

SSE_HEADERS: Final = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
)
KEEPALIVE_SECONDS: Final = 15.0
_JSON_CT: Final = (b"content-type", b"application/json")


class ProtocolError(AgentmwError):
    """A request the face must refuse: a JSON-RPC ``code``, a message, and the HTTP ``status`` it implies.

    ``status`` is None where the face's own table decides (JSON-RPC errors answer 200 in some bindings).
    ``request_id`` is the id of the request it answers, once the envelope was found valid (else null).
    """

    request_id: Any = None

    def __init__(
        self,
        code: int,
        message: str,
        data: Any = None,
        *,
        status: int | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.status = status
        self.headers = headers

    def body(self, request_id: Any) -> dict[str, Any]:
        """The JSON-RPC error response for ``request_id``."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": request_id, "error": error}


class ClientDisconnected(AgentmwError):
    """The client went away before its request body arrived: nothing is owed to it."""


def identity_error(exc: Exception) -> ProtocolError:
    """The identity boundary: an :class:`~agentmw.errors.AccessRefused` answers with its own status and headers
    (``Unauthenticated`` 401 with its challenge, ``Forbidden`` 403, ...), on every face."""
    if isinstance(exc, AccessRefused):
        return ProtocolError(
            INVALID_REQUEST, str(exc) or exc.default_message, status=exc.status, headers=exc.headers
        )
    return ProtocolError(INVALID_REQUEST, str(exc) or "Forbidden", status=403)  # not a refusal: a 403


# --- store faults: every face's retryable answer ---------------------------------------------------


def store_fault(exc: BaseException | None) -> StoreUnavailable | None:
    """The :class:`~agentmw.errors.StoreUnavailable` behind ``exc``: itself, its cause or context, or one in an
    exception group (a task group's), searched a few levels deep; None when the failure is something else."""
    seen = 0
    todo: list[BaseException] = [exc] if exc is not None else []
    while todo and seen < 32:
        current = todo.pop()
        seen += 1
        if isinstance(current, StoreUnavailable):
            return current
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)
    return None


def retryable_data(fault: StoreUnavailable) -> dict[str, Any]:
    """The mark a JSON-RPC error carries when the same request may succeed later: ``{"retryable": true,
    "retryAfter": seconds}`` (MCP; A2A puts the same in google.rpc details)."""
    return {"retryable": True, "retryAfter": fault.retry_after if fault.retry_after is not None else 1.0}


def store_unavailable(fault: StoreUnavailable) -> ProtocolError:
    """A store fault as a face's error: HTTP 503 with ``Retry-After``, JSON-RPC ``-32603`` (the code the
    specifications allow for a server-side failure) marked retryable in its data."""
    seconds = fault.retry_after if fault.retry_after is not None else 1.0
    return ProtocolError(
        INTERNAL_ERROR,
        fault.message,
        retryable_data(fault),
        status=503,
        headers=[retry_after_header(seconds)],
    )


# --- bodies ----------------------------------------------------------------------------------------


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body; :class:`ProtocolError` (413) past ``limit``, :class:`ClientDisconnected` if the
    client leaves first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise ProtocolError(
                    INVALID_REQUEST, f"Request body too large (the limit is {limit} bytes)", status=413
                )
            chunks.append(chunk)
        if not message.get("more_body", False):
            if size >= _memory.LARGE:
                _memory.note(
                    size
                )  # a large body: its memory is given back once such bodies stop (_memory.py)
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def read_json(receive: Receive, limit: int) -> Any:
    """Read and strictly decode a JSON body."""
    return loads(await read_body(receive, limit))


# --- strict JSON in ------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError("number out of range")
    return value


_decoder = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_SURROGATE_ESCAPE_TEXT = re.compile(r"\\u[dD][89abcdefABCDEF]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def loads(raw: bytes | str) -> Any:
    """Strict JSON: UTF-8 only, no ``NaN``/``Infinity``/overflowing floats, depth bounded by the recursion limit.

    Lone surrogate escapes (``"\\ud800"``) are replaced by U+FFFD, so no string that cannot be written as
    UTF-8 ever enters the core. Raises :class:`ProtocolError` with ``PARSE_ERROR`` (HTTP 400).
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else raw
        value, end = _decoder.raw_decode(text, 0 if text[:1] in "{[" and text else _skip_ws(text, 0))
        if end != len(text) and _skip_ws(text, end) != len(text):
            raise ValueError("extra data after the JSON value")
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ProtocolError(PARSE_ERROR, "Parse error: the body is not valid JSON", status=400) from exc
    if isinstance(raw, (bytes, bytearray)):
        suspect = b"\\u" in raw and _SURROGATE_ESCAPE.search(raw) is not None
    else:
        suspect = _SURROGATE_ESCAPE_TEXT.search(raw) is not None or _LONE_SURROGATE.search(raw) is not None
    if suspect:
        try:
            value = _replace_surrogates(value)
        except RecursionError as exc:
            raise ProtocolError(
                PARSE_ERROR, "Parse error: the body is nested too deeply", status=400
            ) from exc
    return value


_WS = re.compile(r"[ \t\n\r]*")


def _skip_ws(text: str, at: int) -> int:
    match = _WS.match(text, at)
    return match.end() if match else at


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    return value


# --- strict JSON out -----------------------------------------------------------------------------

_SAFE_C_DEPTH = 10_000  # recursion limits up to this keep a cycle's RecursionError far from the C stack's end


def compact_encoder(*, ensure_ascii: bool, default: Callable[[Any], Any] | None) -> Callable[[Any], str]:
    """A compact JSON encoder that refuses NaN and infinities, made once and safe to share between threads.

    It keeps no record of the containers it is inside (``check_circular=False``): that bookkeeping, a dict
    insert and delete per container, was a sixth of the time of encoding a task. A value that contains itself
    then fails as one nested too deeply does, with ValueError (not an endless loop): RecursionError, caught
    and turned into it here. ``default``: what an object JSON cannot hold becomes (None: TypeError).
    """

    def refuse(value: Any) -> Any:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    make = getattr(json.encoder, "c_make_encoder", None)
    if make is not None:
        # the C quoting functions json.encoder uses itself (not in its stubs: they may be None without _json)
        quote = getattr(json.encoder, "c_encode_basestring_ascii" if ensure_ascii else "c_encode_basestring")
        chunks = make(None, default or refuse, quote, None, ":", ",", False, False, False)
        checked = json.JSONEncoder(
            ensure_ascii=ensure_ascii, allow_nan=False, separators=(",", ":"), default=default
        ).encode
        # On 3.11 the C encoder's depth follows sys.setrecursionlimit: with a limit raised far enough, a cycle
        # would overflow the C stack before RecursionError; such a process keeps the circular check.
        raised = sys.version_info < (3, 12)

        def encode_with_c(value: Any) -> str:
            if raised and sys.getrecursionlimit() > _SAFE_C_DEPTH:
                return checked(value)
            try:
                return "".join(chunks(value, 0))
            except RecursionError as exc:
                raise ValueError(
                    "a value nested too deeply, or one that contains itself, is not JSON"
                ) from exc

        return encode_with_c
    encoder = json.JSONEncoder(
        ensure_ascii=ensure_ascii,
        allow_nan=False,
        separators=(",", ":"),
        default=default,
        check_circular=False,
    )

    def encode_in_python(value: Any) -> str:
        try:
            return encoder.encode(value)
        except RecursionError as exc:
            raise ValueError("a value nested too deeply, or one that contains itself, is not JSON") from exc

    return encode_in_python


_encode = compact_encoder(ensure_ascii=False, default=str)
_encode_ascii = compact_encoder(ensure_ascii=True, default=str)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON. Raises ValueError for NaN or infinities (never writes non-JSON), and for a value
    nested too deeply; a lone surrogate from a function's return value is written as its ``\\uXXXX`` escape,
    which is valid JSON."""
    text = _encode(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _encode_ascii(value).encode("ascii")


def dumps_finite(value: Any) -> bytes:
    """Like :func:`dumps`, but NaN and infinities are written as ``null`` (as JavaScript's ``JSON.stringify``
    does) instead of failing: for event streams, where one odd float must not cut the stream."""
    try:
        return dumps(value)
    except ValueError:
        return dumps(_finite(value))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {
            (str(k) if isinstance(k, float) and not math.isfinite(k) else k): _finite(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "model_dump"):
        return _finite(value.model_dump(mode="json"))
    return value


def to_json_text(value: Any) -> str:
    """JSON text for any return value (plain data, models, dataclasses), never with NaN or Infinity in it."""
    if isinstance(value, (dict, list, str, int, float, bool)) or value is None:
        return dumps_finite(value).decode()
    from pydantic import TypeAdapter

    global _any_adapter
    if _any_adapter is None:
        _any_adapter = TypeAdapter(Any)
    return _any_adapter.dump_json(value).decode()  # pydantic writes NaN and infinities as null


_any_adapter: TypeAdapter[Any] | None = None


# --- the JSON-RPC envelope -----------------------------------------------------------------------


class RpcMessage:
    """One valid JSON-RPC 2.0 message: a request (``id`` set), a notification, or a response."""

    __slots__ = ("body", "id", "kind", "method", "params")

    def __init__(
        self,
        kind: str,
        request_id: Any,
        method: str | None,
        params: dict[str, Any] | None,
        body: dict[str, Any],
    ) -> None:
        self.kind = kind
        self.id = request_id
        self.method = method
        self.params = params
        self.body = body


def _valid_id(value: Any, allow_null: bool) -> bool:
    if value is None:
        return allow_null
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def request_id_of(body: Any) -> str | int | None:
    """The id to put on an error answer: the request's own when it is a valid id, else null."""
    if isinstance(body, dict):
        value = body.get("id")
        if _valid_id(value, False):
            return value
    return None


def classify_rpc(
    body: Any, *, responses: bool = False, notifications: bool = True, null_id: bool = False
) -> RpcMessage:
    """Check one JSON-RPC message; raises :class:`ProtocolError` (``INVALID_REQUEST``, 400) when it is not one.

    Batches are refused. ``responses`` admits response objects (a client answering a server request);
    ``notifications`` admits messages without an id; ``null_id`` admits ``"id": null`` on requests.
    """
    if isinstance(body, list):
        raise ProtocolError(INVALID_REQUEST, "Batches are not supported", status=400)
    if not isinstance(body, dict):
        raise ProtocolError(INVALID_REQUEST, "Expected a JSON-RPC 2.0 message object", status=400)
    has_id = "id" in body
    request_id = body.get("id")

    def refused(code: int, message: str) -> ProtocolError:
        error = ProtocolError(code, message, status=400)
        # A request's valid id goes on its error, for the client to match it by. Not a response's: its id is
        # one of the server's own requests, and the client may have a request of that id in flight.
        if "method" in body and _valid_id(request_id, null_id):
            error.request_id = request_id
        return error

    if body.get("jsonrpc") != "2.0":
        raise refused(INVALID_REQUEST, "Expected a JSON-RPC 2.0 message object")
    if has_id and not _valid_id(request_id, null_id):
        raise ProtocolError(INVALID_REQUEST, "The id must be a string or an integer", status=400)
    method = body.get("method")

    if isinstance(method, str):
        params = body.get("params")
        if params is not None and not isinstance(params, dict):
            raise refused(INVALID_PARAMS if has_id else INVALID_REQUEST, "params must be an object")
        if has_id:
            return RpcMessage("request", request_id, method, params, body)
        if not notifications:
            raise refused(INVALID_REQUEST, "Expected a JSON-RPC request with an id")
        return RpcMessage("notification", None, method, params, body)
    if "method" in body:
        raise refused(INVALID_REQUEST, "method must be a string")
    if responses and has_id and request_id is not None and ("result" in body) != ("error" in body):
        return RpcMessage("response", request_id, None, None, body)
    raise refused(INVALID_REQUEST, "Expected a JSON-RPC request")


# --- JSON and SSE out ----------------------------------------------------------------------------


async def send_bytes(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*(headers or ()), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_json(
    send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = dumps(payload)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [_JSON_CT, (b"content-length", str(len(body)).encode()), *(headers or ())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def sse_data(payload: Any, *, event: str | None = None, event_id: str | int | None = None) -> bytes:
    """One SSE event carrying ``payload`` as JSON, framed with ``\\n`` (JSON never holds a raw newline)."""
    head = b""
    if event_id is not None:
        head += f"id: {event_id}\n".encode()
    if event is not None:
        head += f"event: {event}\n".encode()
    return head + b"data: " + dumps(payload) + b"\n\n"


def sse_comment(text: str = "ping") -> bytes:
    return f": {text}\n\n".encode()


def shutting_down() -> bool:
    """True once the ASGI server was told to stop (uvicorn's SIGTERM/SIGINT, seen through sse-starlette)."""
    from sse_starlette.sse import AppStatus

    return bool(AppStatus.should_exit) or _uvicorn_exiting()


def _uvicorn_exiting() -> bool:
    import signal

    handler = signal.getsignal(signal.SIGTERM)
    server = getattr(handler, "__self__", None)
    return bool(getattr(server, "should_exit", False))


async def wait_for_exit(poll: float = 0.25) -> None:
    """Return when the server starts shutting down; every waiting stream races this."""
    while not shutting_down():
        await asyncio.sleep(poll)


async def stream_sse(
    scope: Scope,
    receive: Receive,
    send: Send,
    frames: AsyncIterable[bytes],
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    status: int = 200,
    on_disconnect: Callable[[], Awaitable[None] | None] | None = None,
    keepalive: float = KEEPALIVE_SECONDS,
    first: bytes = b"",
) -> bool:
    """Stream ``frames`` (already framed SSE bytes) as one ``text/event-stream`` response.

    Built on sse-starlette's :class:`EventSourceResponse`, which sends the keep-alive comments, ends the
    stream when the client disconnects, and ends it when the server shuts down, so no waiting stream ever
    holds a shutdown. Returns True when the frames ran out (the stream completed), False when the client
    left or the server stopped first. ``on_disconnect`` runs when the client leaves. ``first`` (frames ready
    now) goes out with the headers, before any other task runs, so a producer that is already running cannot
    delay the first byte.
    """
    from sse_starlette import EventSourceResponse, ServerSentEvent

    completed = False
    left = False

    async def body() -> Any:
        nonlocal completed
        async for chunk in frames:
            yield chunk
        completed = True

    async def client_closed(message: Any) -> None:
        nonlocal left
        left = True
        if on_disconnect is not None:
            result = on_disconnect()
            if result is not None:
                await result

    response = EventSourceResponse(
        body(),
        status_code=status,
        headers=None,
        sep="\n",
        ping=int(keepalive) or 15,
        ping_message_factory=lambda: ServerSentEvent(comment="ping", sep="\n"),
        client_close_handler_callable=client_closed,
        media_type="text/event-stream",
    )
    response.raw_headers = [*SSE_HEADERS, *(headers or ())]
    if first:
        await send({"type": "http.response.start", "status": status, "headers": response.raw_headers})
        await send({"type": "http.response.body", "body": first, "more_body": True})
        send = _started(send)
    try:
        await response(scope, receive, send)
    except OSError:
        return False
    return completed and not left


def _started(send: Send) -> Send:
    """``send`` for a response whose start was already sent: the second start is dropped."""

    async def wrapped(message: Any) -> None:
        if message["type"] != "http.response.start":
            await send(message)

    return wrapped
