"""A real HTTP proxy in front of an MCP peer that cuts the response streams of its tool calls, the way a network
drops a connection: an ASGI app (served on its own socket with ``tests.helpers.servers.serving``) that forwards
every request to the peer with httpx and, while armed, drops the connection of a ``tools/call`` response stream
after ``after`` events that carry data (the app raises mid-body, uvicorn aborts the connection, and the upstream
response is closed so the peer sees its client go).

Only ``tools/call`` streams are cut (the body is read to tell), and with ``arm(times, resumptions=True)`` the
streams that resume one (``GET`` with ``Last-Event-ID``), so the handshake, ``tools/list`` and the GET stream of
a 2025-11-25 session pass untouched. ``arm(times)`` cuts the next ``times`` of them; ``cut`` counts the streams
cut so far. Nothing is changed in what does pass: the bytes of the events before a cut arrive whole.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

__all__ = ["CuttingProxy"]

_EVENT_END = re.compile(rb"\r?\n\r?\n")
_HOP = {b"host", b"content-length", b"connection", b"transfer-encoding", b"keep-alive"}


class _Cut(Exception):
    """Raised inside the proxy to drop a connection mid-stream."""


class CuttingProxy:
    def __init__(self, upstream: str, *, after: int = 2) -> None:
        self.upstream = upstream.rstrip("/")
        self.after = after
        self.armed = 0
        self.resumptions = False
        self.cut = 0

    def arm(self, times: int = 1, *, resumptions: bool = False) -> None:
        self.armed = times
        self.resumptions = resumptions

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        # a client per request: none outlives the proxy's loop (serving() runs it in a thread)
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None)) as http:
            await self._forward(http, scope, receive, send)

    async def _forward(self, http: httpx.AsyncClient, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = scope.get("query_string", b"").decode("latin-1")
        url = self.upstream + scope["path"] + (f"?{query}" if query else "")
        forwarded = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP]
        request = http.build_request(scope["method"], url, headers=forwarded, content=body)
        response = await http.send(request, stream=True)
        try:
            out = [(k.lower(), v) for k, v in response.headers.raw if k.lower() not in _HOP]
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            streaming = response.headers.get("content-type", "").startswith("text/event-stream")
            resuming = scope["method"] == "GET" and any(
                k.lower() == b"last-event-id" for k, _ in scope["headers"]
            )
            wanted = _is_tool_call(body) or (self.resumptions and resuming)
            if not (streaming and self.armed and wanted):
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            self.armed -= 1
            self.cut += 1
            buffer, events = b"", 0
            async for chunk in response.aiter_raw():
                buffer += chunk
                while (end := _EVENT_END.search(buffer)) is not None:
                    event, buffer = buffer[: end.end()], buffer[end.end() :]
                    await send({"type": "http.response.body", "body": event, "more_body": True})
                    events += b"data:" in event
                    if events >= self.after:
                        await response.aclose()
                        raise _Cut(f"cut after {events} events")
            await send({"type": "http.response.body", "body": buffer, "more_body": False})
        finally:
            await response.aclose()


def _is_tool_call(body: bytes) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "tools/call"
