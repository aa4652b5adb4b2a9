"""What a test needs to observe or disturb a peer, and nothing that changes how the peer serves.

- :class:`Counter` behind ``GET /_test/counter``: ``{"count": n}``, how many side-effecting executions the peer
  started. A test reads it before and after and compares (:func:`tests.bridges.conftest.side_effects`). A2A
  peers also say ``cancels`` (cancel requests that reached a task's executor) and ``tasks`` (the ids of the
  tasks they started, oldest first), so a test can ask the peer itself how a task ended.
- :class:`StreamCut` with ``POST /_test/cut``: arms a one-shot fault; the next ``text/event-stream`` response is
  cut after its second event, the way a dropped connection cuts it (the client sees an incomplete body, not a
  clean end of stream). The work behind the stream goes on; only the connection dies.
- ``GET /health``: 200 once the process serves (what the fixtures wait for).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

__all__ = ["Counter", "StreamCut", "StreamCutError", "control_routes"]

Scope = dict[str, Any]
Receive = Any
Send = Any

# One SSE event ends at a blank line; sse-starlette separates lines with CRLF, other servers with LF.
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n")


@dataclass
class Counter:
    """Side-effecting executions started (``count``) and, for peers with interrupted tasks, the follow-ups
    that resumed one (``resumes``)."""

    count: int = 0
    resumes: int = 0
    sessions: int = 0  # MCP peers: the sessions the server opened
    cancels: int = 0  # A2A peers: cancel requests that reached a running task's executor
    tasks: list[str] = field(default_factory=list)  # A2A peers: the ids of the tasks started, oldest first

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "resumes": self.resumes, "cancels": self.cancels, "tasks": self.tasks}


class StreamCutError(Exception):
    """Raised into the streaming app's ``send``: the server drops the connection, as on a broken pipe."""


class StreamCut:
    """ASGI middleware: once armed, cuts the next event-stream response after ``after`` complete events (armed
    ``times`` times, the next ``times`` event-stream responses, one after the other).

    Only events that carry data count (an SSE comment such as ``: ping`` does not). The bytes of the events
    before the cut are delivered whole; then ``send`` raises, so uvicorn closes the connection mid-body.
    """

    def __init__(self, app: Any, *, after: int = 2) -> None:
        self.app = app
        self.after = after
        self.armed = 0  # how many of the next event-stream responses are cut

    def arm(self, times: int = 1) -> None:
        self.armed = times

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.armed:
            await self.app(scope, receive, send)
            return
        streaming = False
        buffer = b""
        scanned = 0  # the buffer before this offset has been split into events already
        events = 0

        async def cutting_send(message: dict) -> None:
            nonlocal streaming, buffer, scanned, events
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                if headers.get(b"content-type", b"").startswith(b"text/event-stream") and self.armed:
                    self.armed -= 1  # only this response, of the ones it was armed for
                    streaming = True
            elif message["type"] == "http.response.body" and streaming:
                chunk = message.get("body", b"")
                start = len(buffer)
                buffer += chunk
                while (end := _EVENT_END.search(buffer, scanned)) is not None:
                    event, scanned = buffer[scanned : end.start()], end.end()
                    if b"data:" not in event:
                        continue
                    events += 1
                    if events == self.after:
                        if scanned > start:
                            await send(
                                {
                                    "type": "http.response.body",
                                    "body": chunk[: scanned - start],
                                    "more_body": True,
                                }
                            )
                        raise StreamCutError(f"the test cut this stream after {self.after} events")
            await send(message)

        await self.app(scope, receive, cutting_send)


def control_routes(counter: Counter, cut: StreamCut | None = None) -> list[Route]:
    """``GET /health``, ``GET /_test/counter`` and, with ``cut``, ``POST /_test/cut``."""

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def read_counter(request: Request) -> Response:
        return JSONResponse(counter.as_dict())

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/_test/counter", read_counter, methods=["GET"]),
    ]
    if cut is not None:
        armed_cut = cut

        async def arm(request: Request) -> Response:
            armed_cut.arm(int(request.query_params.get("times", "1")))
            return JSONResponse({"armed": armed_cut.armed, "after": armed_cut.after})

        routes.append(Route("/_test/cut", arm, methods=["POST"]))
    return routes
