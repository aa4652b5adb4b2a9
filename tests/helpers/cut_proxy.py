"""A real HTTP proxy that cuts SSE streams: an ASGI app served on its own socket (``tests.conftest.serve``) that
forwards every request to one of its upstreams with httpx and, for the event streams it is told to cut, stops
after ``after`` events.

- ``pick(method, headers) -> index`` chooses the upstream of each request (default: the first), so a test can
  send the POSTs to one replica and the resumptions (``GET`` with ``Last-Event-ID``) to another;
- ``cuts`` is how many event streams to cut (``POST`` responses that stream; with ``resumptions=True`` the
  resumption streams count too), each after ``after`` events that carry data;
- ``clean=False`` cuts the way a network does: the connection drops mid-response (the app raises, uvicorn
  aborts it), and the upstream connection is closed, so the server sees the client go; ``clean=True`` ends the
  response properly instead (a proxy's idle timeout, a load balancer draining), a stream that ends without
  its response.

``seen`` records what went through: ``(method, last-event-id header or None, status)`` for every request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import httpx

__all__ = ["CutProxy", "StreamCut"]

_EVENT_END = re.compile(rb"\r?\n\r?\n")
_HOP = {b"host", b"content-length", b"connection", b"transfer-encoding", b"keep-alive"}


class StreamCut(Exception):
    """Raised inside the proxy to drop a connection mid-stream."""


class CutProxy:
    def __init__(
        self,
        upstreams: list[str],
        *,
        after: int = 2,
        cuts: int = 1,
        resumptions: bool = False,
        clean: bool = False,
        pick: Callable[[str, Mapping[str, str]], int] | None = None,
    ) -> None:
        self.upstreams = [u.rstrip("/") for u in upstreams]
        self.after = after
        self.cuts = cuts
        self.resumptions = resumptions
        self.clean = clean
        self.pick = pick or (lambda method, headers: 0)
        self.cut = 0  # streams cut so far
        self.seen: list[tuple[str, str | None, int]] = []
        self._http: httpx.AsyncClient | None = None

    def _wants_cut(self, method: str, headers: Mapping[str, str]) -> bool:
        if self.cut >= self.cuts:
            return False
        return method == "POST" or (self.resumptions and "last-event-id" in headers)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if self._http is None:  # made on the proxy's own loop (serve() runs it in a thread)
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None))
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        method = scope["method"]
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        upstream = self.upstreams[self.pick(method, headers)]
        query = scope.get("query_string", b"").decode("latin-1")
        url = upstream + scope["path"] + (f"?{query}" if query else "")
        forwarded = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP]
        request = self._http.build_request(method, url, headers=forwarded, content=body)
        response = await self._http.send(request, stream=True)
        self.seen.append((method, headers.get("last-event-id"), response.status_code))
        try:
            out = [(k.lower(), v) for k, v in response.headers.raw if k.lower() not in _HOP]
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            streaming = response.headers.get("content-type", "").startswith("text/event-stream")
            if not (streaming and self._wants_cut(method, headers)):
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            self.cut += 1
            buffer, events = b"", 0
            async for chunk in response.aiter_raw():
                buffer += chunk
                while (end := _EVENT_END.search(buffer)) is not None:
                    event, buffer = buffer[: end.end()], buffer[end.end() :]
                    await send({"type": "http.response.body", "body": event, "more_body": True})
                    if b"data:" in event:
                        events += 1
                    if events >= self.after:
                        await response.aclose()  # the server sees its client go
                        if self.clean:
                            await send({"type": "http.response.body", "body": b"", "more_body": False})
                            return
                        raise StreamCut(f"cut after {events} events")
            await send({"type": "http.response.body", "body": buffer, "more_body": False})
        finally:
            await response.aclose()
