"""The streamable-HTTP transport of an MCP peer's connections: the official ``mcp`` client's own, with its own
errors told apart from the peer's.

The ``mcp`` 2.3.0 client reports a response stream cut before its answer ("SSE stream ended without a
response"), a stream it could not read, and a closed connection as JSON-RPC errors with code ``-32000``
(``CONNECTION_CLOSED``), the same shape as an error the peer itself sent: no type or attribute tells them
apart. A bridge must not take them for the peer's answer (a cut call may be re-issued, a peer that cannot be
reached is retryable and counts toward its breaker). So the transport here is the client's own
(:class:`~mcp.client.streamable_http.StreamableHTTPTransport`), marking every error it makes up with an
:class:`Own` in its ``data``: a Python object, which no peer can send over JSON.

It also turns a request that could not be sent at all (the peer refused the connection) into such an error
for that request alone, where the client's transport would end the whole connection.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["CUT", "TOO_LARGE", "UNSENT", "Own", "own_error", "transport"]

UNSENT = "unsent"
"""The request never reached the peer (the connection was refused): it did not run."""
CUT = "cut"
"""The request reached the peer, and its answer did not arrive: the call may have run."""
TOO_LARGE = "too_large"
"""The peer's answer was larger than the largest event the bridge accepts."""


class Own:
    """The ``data`` of an error the client made up itself (module docstring)."""

    __slots__ = ("kind", "limit")

    def __init__(self, kind: str, limit: int | None = None) -> None:
        self.kind = kind
        self.limit = limit

    def __repr__(self) -> str:
        return f"<the mcp client's own error: {self.kind}>"


def own_error(exc: BaseException) -> Own | None:
    """The :class:`Own` of an ``MCPError`` the client made up, or None for an error the peer sent. The
    dispatcher's own "Connection closed" (the transport ended while the request waited) carries no data of
    ours; it is the one message the dispatcher documents for that, with code ``-32000``."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    if not isinstance(exc, MCPError):
        return None
    if isinstance(exc.error.data, Own):
        return exc.error.data
    if (
        exc.error.code == CONNECTION_CLOSED
        and exc.error.data is None
        and exc.error.message == "Connection closed"
    ):
        return Own(CUT)
    return None


def _transport_class() -> type[Any]:
    import httpx2
    from mcp.client.streamable_http import StreamableHTTPTransport
    from mcp.shared.message import SessionMessage
    from mcp_types import CONNECTION_CLOSED, ErrorData, JSONRPCError, JSONRPCRequest

    class Transport(StreamableHTTPTransport):
        async def _resolve_abandoned_request(
            self, read_stream_writer: Any, request_id: Any, message: str, *, code: int = CONNECTION_CLOSED
        ) -> None:
            if code != CONNECTION_CLOSED:
                await super()._resolve_abandoned_request(read_stream_writer, request_id, message, code=code)
                return
            # called from the client's except clause: the exception in hand says whether an event was too large
            failure = sys.exc_info()[1]
            limit = self.max_sse_event_size
            too_large = (
                isinstance(failure, httpx2.SSEError)
                and limit is not None
                and f"{limit} byte limit" in str(failure)
            )
            own = Own(TOO_LARGE, limit) if too_large else Own(CUT)
            await _send_error(read_stream_writer, request_id, message, own)

        async def _handle_post_request(self, ctx: Any) -> None:
            try:
                await super()._handle_post_request(ctx)
            except httpx2.TransportError as exc:
                request = ctx.session_message.message
                if not isinstance(request, JSONRPCRequest):
                    raise
                unsent = isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout))
                own = Own(UNSENT if unsent else CUT)
                await _send_error(ctx.read_stream_writer, request.id, f"{type(exc).__name__}: {exc}", own)

    async def _send_error(read_stream_writer: Any, request_id: Any, message: str, own: Own) -> None:
        import anyio

        error = ErrorData(code=CONNECTION_CLOSED, message=message, data=own)
        try:
            await read_stream_writer.send(
                SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
            )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the connection is ending: its waiters are woken with "Connection closed"

    return Transport


_TRANSPORT: type[Any] | None = None


@asynccontextmanager
async def transport(url: str, http_client: Any, max_event_bytes: int | None) -> AsyncIterator[Any]:
    """What ``mcp.client.streamable_http.streamable_http_client`` does (mcp 2.3.0), with :class:`Own` errors
    and ``max_event_bytes`` as the largest server-sent event read (None: no limit)."""
    import anyio
    from mcp.shared._compat import resync_tracer
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage

    global _TRANSPORT
    if _TRANSPORT is None:
        _TRANSPORT = _transport_class()
    http = _TRANSPORT(url, max_sse_event_size=max_event_bytes)
    read_stream_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_stream_reader = create_context_streams[SessionMessage](0)
    async with (
        read_stream_writer,
        read_stream,
        write_stream,
        write_stream_reader,
        anyio.create_task_group() as tg,
    ):

        def start_get_stream() -> None:
            tg.start_soon(http.handle_get_stream, http_client, read_stream_writer)

        tg.start_soon(
            http.post_writer,
            http_client,
            write_stream_reader,
            read_stream_writer,
            write_stream,
            start_get_stream,
            tg,
        )
        try:
            yield read_stream, write_stream
        finally:
            if http.session_id:
                await http.terminate_session(http_client)
            tg.cancel_scope.cancel()
    await resync_tracer()
