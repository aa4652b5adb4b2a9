"""An in-process client for tests: speaks MCP to an ASGI app with no server and no socket.

Needs ``httpx`` (the ``test`` extra)::

    async with McpTestClient(app) as mcp:                      # stateless era (2026-07-28)
        result = await mcp.call_tool("add", {"a": 1, "b": 2})
    async with McpTestClient(app, era="2025-11-25") as mcp:    # handshake era, with a session
        tools = await mcp.request("tools/list")
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

from ._types import ASGIApp

__all__ = ["McpTestClient", "McpError", "parse_sse"]

MODERN = "2026-07-28"


class McpError(Exception):
    def __init__(self, status: int, error: Mapping[str, Any]) -> None:
        super().__init__(f"HTTP {status}: {error.get('code')} {error.get('message')}")
        self.status = status
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data")


def parse_sse(text: str) -> list[Any]:
    """The JSON messages of an SSE body, in order."""
    messages = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")]
        if data:
            messages.append(json.loads("\n".join(data)))
    return messages


class McpTestClient:
    """A small MCP client over ``httpx.ASGITransport``; ``notifications`` collects what streamed back."""

    def __init__(self, app: ASGIApp, *, path: str = "/mcp", era: str = MODERN,
                 base_url: str = "http://127.0.0.1:8000", headers: Mapping[str, str] | None = None,
                 capabilities: Mapping[str, Any] | None = None) -> None:
        import httpx

        self.era = era
        self.path = path
        self.capabilities = dict(capabilities or {})
        self.session_id: str | None = None
        self.notifications: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url,
                                       headers=dict(headers or {}), timeout=30)

    async def __aenter__(self) -> McpTestClient:
        if self.era != MODERN:
            result = await self.request("initialize", {
                "protocolVersion": self.era, "capabilities": self.capabilities,
                "clientInfo": {"name": "agentmw-testing", "version": "0"}})
            self.era = result["protocolVersion"]
            await self.notify("notifications/initialized")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.session_id:
            await self._http.delete(self.path, headers={"mcp-session-id": self.session_id})
        await self._http.aclose()

    def headers_for(self, method: str, params: Mapping[str, Any] | None) -> dict[str, str]:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json",
                   "mcp-protocol-version": self.era}
        if self.era == MODERN:
            headers["mcp-method"] = method
            name = (params or {}).get("uri" if method == "resources/read" else "name")
            if method in ("tools/call", "prompts/get", "resources/read") and isinstance(name, str):
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

    async def request(self, method: str, params: Mapping[str, Any] | None = None, **extra_headers: str) -> Any:
        """Send one request; returns its result or raises :class:`McpError`."""
        params = self.envelope(params) if method != "initialize" else dict(params or {})
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        headers = self.headers_for(method, params)
        headers.update({k.replace("_", "-"): v for k, v in extra_headers.items()})
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

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        return await self.request("tools/call", {"name": name, "arguments": dict(arguments or {})})
