"""In-process clients for tests: MCP, A2A and AG-UI spoken to an ASGI app with no server and no socket.

``McpTestClient.request`` needs ``httpx`` (the ``test`` extra; with ``on_notification`` it needs none); the A2A
client checks every answer with ``a2a-sdk``'s models (``validate=False`` without it); the AG-UI client checks
events with ``ag-ui-protocol``'s (a core dependency). All three are ``async``: run them under an async test runner
(``pytest-asyncio``, or anyio's pytest plugin on asyncio; see ``docs/testing.md``)::

    async with McpTestClient(app) as mcp:                      # stateless era (2026-07-28)
        result = await mcp.call_tool("add", {"a": 1, "b": 2})
    async with McpTestClient(app, era="2025-11-25") as mcp:    # handshake era, with a session
        tools = await mcp.request("tools/list")
    async with A2ATestClient(app) as a2a:                      # A2A 1.0, JSON-RPC
        task = (await a2a.send("laptop", skill="approve"))["task"]
        done = (await a2a.follow_up(task, data={"approved": True}))["task"]
    async with AguiTestClient(app) as agui:                    # AG-UI runs, one skill per agent
        run = await agui.run("approve", "laptop")
        resumed = await agui.resume(run, {"approved": True})

Unlike ``httpx.ASGITransport``, which returns a response only once the app has finished, the A2A and AG-UI
clients read a stream as the app writes it (:class:`AsgiExchange`), so a test can stop reading half way (a
client that leaves), reconnect, or cancel a run that is still going.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import urlsplit

from ._types import ASGIApp, Message

__all__ = [
    "A2ACallError",
    "A2ATestClient",
    "AguiHttpError",
    "AguiRun",
    "AguiStream",
    "AguiTestClient",
    "AsgiExchange",
    "McpError",
    "McpTestClient",
    "parse_sse",
]

MODERN = "2026-07-28"
_END = object()  # the app returned: nothing more will be sent
_CLOSE_GRACE_SECONDS = 5.0  # how long a closed exchange waits for the app to notice before cancelling it


class McpError(Exception):
    def __init__(self, status: int, error: Mapping[str, Any]) -> None:
        super().__init__(f"HTTP {status}: {error.get('code')} {error.get('message')}")
        self.status = status
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


def parse_sse(text: str) -> list[Any]:
    """The JSON messages of an SSE body, in order."""
    return [data for _, data in _SseParser().feed(text.encode() + b"\n\n")]


class _SseParser:
    """Incremental SSE: feed bytes as they arrive, get ``(id, json data)`` for every complete event."""

    def __init__(self) -> None:
        self._buffer = ""

    def feed(self, chunk: bytes) -> list[tuple[str | None, Any]]:
        self._buffer += chunk.decode().replace("\r\n", "\n")
        *blocks, self._buffer = self._buffer.split("\n\n")
        events = []
        for block in blocks:
            lines = block.split("\n")
            data = [line[5:].lstrip() for line in lines if line.startswith("data:")]
            ids = [line[3:].strip() for line in lines if line.startswith("id:")]
            if data:
                events.append((ids[-1] if ids else None, json.loads("\n".join(data))))
        return events


class AsgiExchange:
    """One HTTP request to an ASGI app in this process, its response read while the app writes it.

    ``await exchange.start()`` returns once the response has started (``status``, ``headers``); ``chunks()``
    yields the body as it is sent; ``close()`` tells the app the client left (``http.disconnect``) and waits for
    it to finish (cancelling it after a grace period). An exception the app raises reaches the reader.
    """

    def __init__(
        self,
        app: ASGIApp,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        body: bytes = b"",
    ) -> None:
        parts = urlsplit(url)
        host = parts.netloc or "127.0.0.1:8000"
        raw = [(b"host", host.encode())]
        raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items() if k.lower() != "host"]
        if body:
            raw.append((b"content-length", str(len(body)).encode()))
        hostname, _, port = host.partition(":")
        self.scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": method.upper(),
            "scheme": parts.scheme or "http",
            "path": parts.path or "/",
            "raw_path": (parts.path or "/").encode(),
            "query_string": parts.query.encode(),
            "root_path": "",
            "headers": raw,
            "client": ("127.0.0.1", 50000),
            "server": (hostname, int(port or 80)),
            "extensions": {},
            "state": {},
        }
        self.app = app
        self.body = body
        self.status = 0
        self.headers: dict[str, str] = {}
        self._queue: asyncio.Queue[Any] | None = None
        self._left: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._body_sent = False
        self._finished = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._left = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._serve())
        first = await self._queue.get()
        if first is _END:
            await self._task  # re-raises what the app raised
            raise RuntimeError("the app returned without sending a response")
        self.status = first["status"]
        self.headers = {k.decode().lower(): v.decode() for k, v in first.get("headers", [])}

    async def _serve(self) -> None:
        assert self._queue is not None
        try:
            await self.app(self.scope, self._receive, self._send)
        finally:
            self._queue.put_nowait(_END)

    async def _receive(self) -> dict[str, Any]:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        assert self._left is not None
        await self._left.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        assert self._queue is not None
        if message["type"] in ("http.response.start", "http.response.body"):
            self._queue.put_nowait(message)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, chunk by chunk, until the app sends its last one (or returns)."""
        assert self._queue is not None and self._task is not None
        while not self._finished:
            message = await self._queue.get()
            if message is _END:
                self._finished = True
                await self._task
                return
            if message.get("body"):
                yield message["body"]
            if not message.get("more_body", False):
                self._finished = True

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def close(self) -> None:
        if self._task is None or self._left is None:
            return
        self._left.set()
        if not self._task.done():
            done, _ = await asyncio.wait({self._task}, timeout=_CLOSE_GRACE_SECONDS)
            if not done:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
                return
        error = None if self._task.cancelled() else self._task.exception()
        if error is not None and self._finished:  # read to the end, then the app failed: a bug worth seeing
            raise error
        # (a failure after the client left early is the app noticing the disconnect: retrieved, not raised)


class McpTestClient:
    """A small MCP client over ``httpx.ASGITransport``; ``notifications`` collects what streamed back."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        path: str = "/mcp",
        era: str = MODERN,
        base_url: str = "http://127.0.0.1:8000",
        headers: Mapping[str, str] | None = None,
        capabilities: Mapping[str, Any] | None = None,
    ) -> None:
        self.app = app
        self.base_url = base_url
        self.extra_headers = dict(headers or {})
        self.era = era
        self.path = path
        self.capabilities = dict(capabilities or {})
        self.session_id: str | None = None
        self.notifications: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._client: Any = None

    @property
    def _http(self) -> Any:
        """An ``httpx.AsyncClient`` over ``httpx.ASGITransport``, made on first use (``on_notification`` calls
        need none, so the ``agentmw`` command runs without httpx)."""
        if self._client is None:
            import httpx  # the testing extra: the agentmw command's calls need none

            self._client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=self.app),
                base_url=self.base_url,
                headers=self.extra_headers,
                timeout=30,
            )
        return self._client

    async def __aenter__(self) -> Self:
        if self.era != MODERN:
            result = await self.request(
                "initialize",
                {
                    "protocolVersion": self.era,
                    "capabilities": self.capabilities,
                    "clientInfo": {"name": "agentmw-testing", "version": "0"},
                },
            )
            self.era = result["protocolVersion"]
            await self.notify("notifications/initialized")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.session_id:
            await self._http.delete(self.path, headers={"mcp-session-id": self.session_id})
        if self._client is not None:
            await self._client.aclose()

    def headers_for(self, method: str, params: Mapping[str, Any] | None) -> dict[str, str]:
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": self.era,
        }
        if self.era == MODERN:
            headers["mcp-method"] = method
            key = {
                "resources/read": "uri",
                "tasks/get": "taskId",
                "tasks/update": "taskId",
                "tasks/cancel": "taskId",
            }.get(method, "name")
            name = (params or {}).get(key)
            if method in (
                "tools/call",
                "prompts/get",
                "resources/read",
                "tasks/get",
                "tasks/update",
                "tasks/cancel",
            ) and isinstance(name, str):
                headers["mcp-name"] = name
        elif self.session_id:
            headers["mcp-session-id"] = self.session_id
        elif method == "initialize":
            headers.pop("mcp-protocol-version")
        return headers

    def envelope(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        params = dict(params or {})
        if self.era == MODERN:
            meta = dict(params.get("_meta") or {})
            meta.setdefault("io.modelcontextprotocol/protocolVersion", MODERN)
            meta.setdefault("io.modelcontextprotocol/clientCapabilities", self.capabilities)
            params["_meta"] = meta
        return params

    async def post(self, body: Any, headers: Mapping[str, str] | None = None) -> Any:
        """POST a raw body; returns the ``httpx.Response``."""
        return await self._http.post(self.path, content=json.dumps(body), headers=dict(headers or {}))

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = dict(params)
        response = await self.post(body, self.headers_for(method, params))
        response.raise_for_status()

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        on_notification: Callable[[dict[str, Any]], None] | None = None,
        **extra_headers: str,
    ) -> Any:
        """Send one request; returns its result or raises :class:`McpError`.

        With ``on_notification``, the answer is read as it streams and each notification is handed over as it
        arrives (progress, logs), besides being collected in ``notifications``.
        """
        params = self.envelope(params) if method != "initialize" else dict(params or {})
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        headers = self.headers_for(method, params)
        headers.update({k.replace("_", "-"): v for k, v in extra_headers.items()})
        if on_notification is not None:
            return await self._streamed(body, headers, on_notification)
        response = await self.post(body, headers)
        if method == "initialize" and "mcp-session-id" in response.headers:
            self.session_id = response.headers["mcp-session-id"]
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            messages = parse_sse(response.text)
            self.notifications.extend(m for m in messages if "id" not in m or "method" in m)
            reply = next(m for m in reversed(messages) if "id" in m and "method" not in m)
        else:
            reply = response.json()
        if "error" in reply:
            raise McpError(response.status_code, reply["error"])
        return reply["result"]

    async def _streamed(
        self, body: Any, headers: dict[str, str], on_notification: Callable[[dict[str, Any]], None]
    ) -> Any:
        exchange = AsgiExchange(
            self.app,
            "POST",
            self.base_url + self.path,
            headers={**self.extra_headers, **headers},
            body=json.dumps(body).encode(),
        )
        reply: Any = None
        async with exchange:
            if exchange.headers.get("content-type", "").startswith("text/event-stream"):
                parser = _SseParser()
                async for chunk in exchange.chunks():
                    for _, message in parser.feed(chunk):
                        if "id" in message and "method" not in message:
                            reply = message
                        else:
                            self.notifications.append(message)
                            on_notification(message)
            else:
                reply = json.loads(await exchange.read())
        if not isinstance(reply, dict):
            raise McpError(exchange.status, {"code": None, "message": "the stream ended without an answer"})
        if "error" in reply:
            raise McpError(exchange.status, reply["error"])
        return reply["result"]

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        return await self.request("tools/call", {"name": name, "arguments": dict(arguments or {})})


class _LiveStream:
    """A response read as SSE while the app writes it; ``async with`` opens it, leaving the block disconnects."""

    def __init__(self, exchange: AsgiExchange) -> None:
        self._exchange = exchange

    async def _refused(self) -> bytes | None:
        """Start the exchange; the body (the exchange closed) when the answer is no stream, else None."""
        await self._exchange.start()
        if self._exchange.status == 200 and self._exchange.headers.get("content-type", "").startswith(
            "text/event-stream"
        ):
            return None
        body = await self._exchange.read()
        await self._exchange.close()
        return body

    async def __aexit__(self, *exc: object) -> None:
        await self._exchange.close()

    async def _frames(self) -> AsyncIterator[tuple[str | None, Any]]:
        parser = _SseParser()
        async for chunk in self._exchange.chunks():
            for frame in parser.feed(chunk):
                yield frame


# --- A2A ------------------------------------------------------------------------------------------------


class A2ACallError(Exception):
    """A JSON-RPC error answered by the A2A endpoint (``code`` as the spec numbers it: -32001 task not found...)."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(f"{error.get('code')} {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


_A2A_RESULTS = {  # the official a2a-sdk model each 1.0 method answers with
    "SendMessage": "SendMessageResponse",
    "SendStreamingMessage": "StreamResponse",
    "SubscribeToTask": "StreamResponse",
    "GetTask": "Task",
    "CancelTask": "Task",
    "ListTasks": "ListTasksResponse",
}


def _a2a_check(model: str, value: Any) -> None:
    """Parse ``value`` strictly (unknown fields refused) as the a2a-sdk's protobuf ``model``."""
    from a2a.types import a2a_pb2
    from google.protobuf import json_format  # type: ignore[import-untyped]  # protobuf ships no hints

    json_format.ParseDict(value, getattr(a2a_pb2, model)())


class A2ATestClient:
    """An A2A 1.0 client (JSON-RPC binding) for tests; every answer and event is checked against the a2a-sdk's
    models, so a test fails when the agent sends anything the official client would not read
    (``validate=False`` skips that, for use without a2a-sdk).

    Results are the wire's JSON (camelCase, ``TASK_STATE_*``): ``send`` returns ``{"task": ...}`` or
    ``{"message": ...}``, ``get``/``cancel`` a task, ``stream`` the stream's events.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        path: str = "/a2a",
        base_url: str = "http://127.0.0.1:8000",
        headers: Mapping[str, str] | None = None,
        version: str = "1.0",
        validate: bool = True,
    ) -> None:
        self.app = app
        self.validate = validate
        self.path = path
        self.base_url = base_url
        self.headers = {"content-type": "application/json", "a2a-version": version, **dict(headers or {})}
        self._ids = itertools.count(1)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    # --- building messages ----------------------------------------------------------------------------
    def message(
        self,
        text: str | None = None,
        *,
        data: Any = None,
        skill: str | None = None,
        tool: str | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        parts: Sequence[Mapping[str, Any]] = (),
    ) -> dict[str, Any]:
        """A user message: text and/or a data part, naming the skill (and a tool it groups) in its metadata."""
        body: list[dict[str, Any]] = [dict(p) for p in parts]
        if text is not None:
            body.append({"text": text})
        if data is not None:
            body.append({"data": data})
        message: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": body}
        meta = dict(metadata or {})
        if skill is not None:
            meta["skill"] = skill
        if tool is not None:
            meta["tool"] = tool
        if meta:
            message["metadata"] = meta
        if task_id is not None:
            message["taskId"] = task_id
        if context_id is not None:
            message["contextId"] = context_id
        if self.validate:
            _a2a_check("Message", message)
        return message

    # --- calls ------------------------------------------------------------------------------------------
    def _body(self, method: str, params: Mapping[str, Any]) -> bytes:
        return json.dumps(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": dict(params)}
        ).encode()

    async def rpc(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """One JSON-RPC call; the result, checked against its a2a-sdk model, or :class:`A2ACallError`."""
        async with AsgiExchange(
            self.app, "POST", self.base_url + self.path, headers=self.headers, body=self._body(method, params)
        ) as exchange:
            raw = await exchange.read()
        reply = json.loads(raw)
        if "error" in reply:
            raise A2ACallError(reply["error"])
        result: dict[str, Any] = reply["result"]  # every A2A 1.0 result is an object
        if self.validate and method in _A2A_RESULTS:
            _a2a_check(_A2A_RESULTS[method], result)
        return result

    async def send(
        self,
        text: str | None = None,
        *,
        data: Any = None,
        skill: str | None = None,
        tool: str | None = None,
        task_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        configuration: Mapping[str, Any] | None = None,
        message: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``SendMessage``: ``{"task": ...}`` (waits until the task is done or needs input) or ``{"message": ...}``."""
        params: dict[str, Any] = {
            "message": dict(message)
            if message is not None
            else self.message(text, data=data, skill=skill, tool=tool, task_id=task_id, metadata=metadata)
        }
        if configuration:
            params["configuration"] = dict(configuration)
        return await self.rpc("SendMessage", params)

    async def follow_up(
        self,
        task: Mapping[str, Any] | str,
        text: str | None = None,
        *,
        data: Any = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A follow-up on a task (an answer to its question, or the arguments it asked for)."""
        task_id = task if isinstance(task, str) else task["id"]
        return await self.send(text, data=data, task_id=task_id, metadata=metadata)

    async def get(self, task_id: str, *, history_length: int | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"id": task_id}
        if history_length is not None:
            params["historyLength"] = history_length
        return await self.rpc("GetTask", params)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return await self.rpc("CancelTask", {"id": task_id})

    async def list_tasks(self, **params: Any) -> dict[str, Any]:
        return await self.rpc("ListTasks", params)

    async def card(self) -> dict[str, Any]:
        """The agent card, checked as an a2a-sdk ``AgentCard``."""
        async with AsgiExchange(
            self.app,
            "GET",
            self.base_url + "/.well-known/agent-card.json",
            headers={k: v for k, v in self.headers.items() if k != "content-type"},
        ) as exchange:
            card: dict[str, Any] = json.loads(await exchange.read())
        if self.validate:
            _a2a_check("AgentCard", card)
        return card

    def stream(
        self,
        text: str | None = None,
        *,
        data: Any = None,
        skill: str | None = None,
        tool: str | None = None,
        task_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        message: Mapping[str, Any] | None = None,
    ) -> A2AStream:
        """``SendStreamingMessage``, read live: ``async with a2a.stream(...) as events: async for e in events``.

        Leaving the block before the stream ends disconnects, as a client that goes away."""
        params = {
            "message": dict(message)
            if message is not None
            else self.message(text, data=data, skill=skill, tool=tool, task_id=task_id, metadata=metadata)
        }
        return A2AStream(self, "SendStreamingMessage", params)

    def subscribe(self, task_id: str) -> A2AStream:
        """``SubscribeToTask``, read live, like :meth:`stream`."""
        return A2AStream(self, "SubscribeToTask", {"id": task_id})


class A2AStream(_LiveStream):
    """A live A2A stream: iterate it for each ``StreamResponse`` (checked); ``events`` keeps what was read."""

    def __init__(self, client: A2ATestClient, method: str, params: Mapping[str, Any]) -> None:
        super().__init__(
            AsgiExchange(
                client.app,
                "POST",
                client.base_url + client.path,
                headers=client.headers,
                body=client._body(method, params),
            )
        )
        self.events: list[dict[str, Any]] = []
        self.validate = client.validate

    async def __aenter__(self) -> Self:
        body = await self._refused()
        if body is not None:
            reply = json.loads(body or b"{}")
            raise A2ACallError(reply.get("error") or {"code": None, "message": f"not a stream: {reply}"})
        return self

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        async for _, reply in self._frames():
            if "error" in reply:
                raise A2ACallError(reply["error"])
            if self.validate:
                _a2a_check("StreamResponse", reply["result"])
            self.events.append(reply["result"])
            yield reply["result"]

    async def collect(self) -> list[dict[str, Any]]:
        """Read to the end of the stream; every event."""
        async for _ in self:
            pass
        return self.events


# --- AG-UI ----------------------------------------------------------------------------------------------


class AguiHttpError(Exception):
    """The AG-UI endpoint refused the request before any stream (422 bad input, 404, 409 a duplicate run...)."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


_event_adapter: Any = None


def _agui_check(event: Any) -> None:
    """Validate one event against ``ag_ui.core.Event`` (the official models: type, fields, no stray keys)."""
    global _event_adapter
    if _event_adapter is None:
        from ag_ui.core import Event  # only for AG-UI runs: kept off the MCP and A2A clients' import
        from pydantic import TypeAdapter

        _event_adapter = TypeAdapter(Event)
    _event_adapter.validate_python(event)


@dataclass
class AguiRun:
    """One AG-UI run as a client saw it: its events (each validated), and what they add up to."""

    skill: str
    thread_id: str
    run_id: str
    events: list[dict[str, Any]] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    """Each event's sequence number (the SSE ``id:``), for ``Last-Event-ID``."""

    @property
    def types(self) -> list[str]:
        return [e["type"] for e in self.events]

    @property
    def last_event_id(self) -> int:
        return self.ids[-1] if self.ids else 0

    @property
    def text(self) -> str:
        return "".join(e.get("delta", "") for e in self.events if e["type"] == "TEXT_MESSAGE_CONTENT")

    @property
    def finished(self) -> dict[str, Any] | None:
        return next((e for e in reversed(self.events) if e["type"] == "RUN_FINISHED"), None)

    @property
    def error(self) -> dict[str, Any] | None:
        """The ``RUN_ERROR`` event, when the run ended with one."""
        return next((e for e in reversed(self.events) if e["type"] == "RUN_ERROR"), None)

    @property
    def outcome(self) -> dict[str, Any] | None:
        finished = self.finished
        return finished.get("outcome") if finished else None

    @property
    def result(self) -> Any:
        finished = self.finished
        return finished.get("result") if finished else None

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        """The open interrupts the run ended with (questions, confirmations); answer them with ``resume``."""
        outcome = self.outcome or {}
        return list(outcome.get("interrupts", ())) if outcome.get("type") == "interrupt" else []

    @property
    def state(self) -> Any:
        """The shared state as the events leave it: the last snapshot with the deltas after it applied."""
        import jsonpatch  # only for a run with state deltas

        state: Any = None
        for event in self.events:
            if event["type"] == "STATE_SNAPSHOT":
                state = event["snapshot"]
            elif event["type"] == "STATE_DELTA" and state is not None:
                state = jsonpatch.apply_patch(state, event["delta"])
        return state


class AguiStream(_LiveStream):
    """A run read live: ``async with agui.stream(...) as live: async for event in live``. ``run`` collects what
    was read; leaving the block early disconnects (a run that is not ``detached`` is then cancelled)."""

    def __init__(self, exchange: AsgiExchange, run: AguiRun) -> None:
        super().__init__(exchange)
        self.run = run

    async def __aenter__(self) -> Self:
        body = await self._refused()
        if body is not None:
            detail = json.loads(body).get("detail") if body else None
            raise AguiHttpError(self._exchange.status, detail)
        return self

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        async for seq, event in self._frames():
            _agui_check(event)
            if seq is not None:
                if self.run.ids and int(seq) <= self.run.ids[-1]:
                    raise AssertionError(f"sequence numbers must rise: {seq} after {self.run.ids[-1]}")
                self.run.ids.append(int(seq))
            self.run.events.append(event)
            yield event

    async def collect(self) -> AguiRun:
        async for _ in self:
            pass
        return self.run


class AguiTestClient:
    """An AG-UI client for tests: runs, interrupts and resumes, reconnects (``Last-Event-ID``) and cancels; every
    event is validated against ``ag_ui.core``'s models and its sequence number checked to rise."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        path: str = "/agui",
        base_url: str = "http://127.0.0.1:8000",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.app = app
        self.path = path.rstrip("/")
        self.base_url = base_url
        self.headers = dict(headers or {})
        self._messages: dict[str, list[dict[str, Any]]] = {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def _url(self, skill: str, *rest: str) -> str:
        return "/".join([self.base_url + self.path, skill, *rest])

    def stream(
        self,
        skill: str,
        text: str | None = None,
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        state: Any = None,
        resume: Sequence[Mapping[str, Any]] | None = None,
        detached: bool = False,
        forwarded_props: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> AguiStream:
        """Start a run and read it live. ``text`` is a user message; ``arguments`` go in
        ``forwardedProps.arguments``; ``detached`` keeps the run going when the client leaves."""
        thread_id = thread_id or f"thread-{uuid.uuid4()}"
        run_id = run_id or f"run-{uuid.uuid4()}"
        messages = self._messages.setdefault(thread_id, [])
        if text is not None:
            messages.append({"id": f"msg-{uuid.uuid4()}", "role": "user", "content": text})
        props = dict(forwarded_props or {})
        if arguments is not None:
            props["arguments"] = dict(arguments)
        if detached:
            props["detached"] = True
        body: dict[str, Any] = {
            "threadId": thread_id,
            "runId": run_id,
            "messages": list(messages),
            "tools": [],
            "context": [],
            "forwardedProps": props,
        }
        if state is not None:
            body["state"] = state
        if resume is not None:
            body["resume"] = [dict(r) for r in resume]
        from ag_ui.core import RunAgentInput  # only for AG-UI runs

        RunAgentInput.model_validate(body)  # what we send is a valid input too
        exchange = AsgiExchange(
            self.app,
            "POST",
            self._url(skill),
            body=json.dumps(body).encode(),
            headers={
                **self.headers,
                **dict(headers or {}),
                "content-type": "application/json",
                "accept": "text/event-stream",
            },
        )
        return AguiStream(exchange, AguiRun(skill, thread_id, run_id))

    async def run(self, skill: str, text: str | None = None, **options: Any) -> AguiRun:
        """A whole run: every event until ``RUN_FINISHED`` or ``RUN_ERROR``."""
        async with self.stream(skill, text, **options) as live:
            return await live.collect()

    async def resume(
        self,
        run: AguiRun,
        payload: Any = None,
        *,
        status: str = "resolved",
        run_id: str | None = None,
        **options: Any,
    ) -> AguiRun:
        """A new run on the same thread that answers every open interrupt of ``run`` with ``payload``
        (``status="cancelled"`` cancels them instead)."""
        if not run.interrupts:
            raise ValueError(f"run {run.run_id} ended with no open interrupt to resume")
        answers = []
        for interrupt in run.interrupts:
            entry: dict[str, Any] = {"interruptId": interrupt["id"], "status": status}
            if status == "resolved":
                entry["payload"] = payload
            answers.append(entry)
        return await self.run(run.skill, thread_id=run.thread_id, run_id=run_id, resume=answers, **options)

    def reconnect(self, run: AguiRun, *, after: int | None = None) -> AguiStream:
        """Follow ``run`` again from after event ``after`` (default: the last one read), with ``Last-Event-ID``;
        read live like :meth:`stream`."""
        last = run.last_event_id if after is None else after
        exchange = AsgiExchange(
            self.app,
            "GET",
            self._url(run.skill, "runs", run.run_id, "events"),
            headers={**self.headers, "accept": "text/event-stream", "last-event-id": str(last)},
        )
        return AguiStream(exchange, AguiRun(run.skill, run.thread_id, run.run_id))

    async def cancel(self, run: AguiRun) -> dict[str, Any]:
        """``POST …/runs/<id>/cancel``: cancels the run's coroutine, wherever it runs."""
        return await self._json("POST", self._url(run.skill, "runs", run.run_id, "cancel"))

    async def capabilities(self, skill: str) -> dict[str, Any]:
        """The skill's ``AgentCapabilities``, validated against ``ag_ui.core``."""
        caps = await self._json("GET", self._url(skill, "capabilities"))
        from ag_ui.core import AgentCapabilities

        AgentCapabilities.model_validate(caps)
        return caps

    async def _json(self, method: str, url: str) -> dict[str, Any]:
        async with AsgiExchange(self.app, method, url, headers=self.headers) as exchange:
            body = json.loads(await exchange.read() or b"null")
        if exchange.status != 200 or not isinstance(body, dict):
            raise AguiHttpError(exchange.status, body.get("detail") if isinstance(body, dict) else body)
        return body
