"""The MCP handshake era spoken in raw HTTP: the ``initialize`` request and the headers of the session it opens."""

from __future__ import annotations

from typing import Any

import httpx

HANDSHAKE = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
JSON = {"accept": ACCEPT, "content-type": "application/json"}


def initialize_request(
    *,
    revision: str = HANDSHAKE,
    capabilities: dict[str, Any] | None = None,
    client: str = "t",
    request_id: int = 0,
) -> dict[str, Any]:
    """The JSON-RPC ``initialize`` request of a client called ``client``."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": revision,
            "capabilities": capabilities or {},
            "clientInfo": {"name": client, "version": "0"},
        },
    }


async def initialize(
    http: httpx.AsyncClient,
    url: str = "",
    *,
    revision: str = HANDSHAKE,
    capabilities: dict[str, Any] | None = None,
    client: str = "t",
    headers: dict[str, str] | None = None,
    request_id: int = 0,
) -> httpx.Response:
    """POST ``initialize`` to ``{url}/mcp`` (``headers`` added to the JSON ones); asserts it was answered 200."""
    response = await http.post(
        f"{url}/mcp",
        headers={**JSON, **(headers or {})},
        json=initialize_request(
            revision=revision, capabilities=capabilities, client=client, request_id=request_id
        ),
    )
    assert response.status_code == 200, response.text
    return response


def session_headers(response: httpx.Response, *, revision: str = HANDSHAKE) -> dict[str, str]:
    """The headers of every later request of the session that ``response`` (to ``initialize``) opened."""
    return {**JSON, "mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": revision}


async def open_session(
    http: httpx.AsyncClient,
    url: str = "",
    *,
    revision: str = HANDSHAKE,
    capabilities: dict[str, Any] | None = None,
    client: str = "t",
) -> dict[str, str]:
    """Initialize a session at ``{url}/mcp``; the headers of its later requests."""
    response = await initialize(http, url, revision=revision, capabilities=capabilities, client=client)
    return session_headers(response, revision=revision)
