"""The official ``mcp`` client with its OAuth support, driven as a user's browser would drive it."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

__all__ = ["Storage", "a2a_refusal", "bearer_client", "oauth_client"]

REDIRECT = "http://127.0.0.1:1/callback"  # never reached: the "browser" reads the code off the redirect


class Storage:
    """Where the client keeps its tokens and its registration (memory)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def oauth_client(agent_url: str, mode: str, storage: Storage | None = None, **kwargs: Any) -> Client:
    """A client that logs in with the authorization code flow (PKCE, dynamic registration) when it gets a 401,
    and steps up when it gets a 403 ``insufficient_scope``."""
    redirected: dict[str, str] = {}

    async def browser(url: str) -> None:
        async with httpx.AsyncClient() as http:  # the authorization server consents and redirects back
            response = await http.get(url)
        assert response.status_code == 302, response.text
        query = parse_qs(urlsplit(response.headers["location"]).query)
        redirected.clear()
        redirected.update({k: v[0] for k, v in query.items()})

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirected.get("code", ""), state=redirected.get("state"))

    provider = OAuthClientProvider(
        f"{agent_url}/mcp",
        OAuthClientMetadata(
            redirect_uris=[REDIRECT],
            client_name="agentmw auth test",
            response_types=["code"],
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="none",
        ),
        storage or Storage(),
        redirect_handler=browser,
        callback_handler=callback,
    )
    http = httpx2.AsyncClient(auth=provider, timeout=30)
    return Client(
        streamable_http_client(f"{agent_url}/mcp", http_client=http), mode=mode, cache=None, **kwargs
    )


def bearer_client(agent_url: str, mode: str, token: str | None) -> Client:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    return Client(streamable_http_client(f"{agent_url}/mcp", http_client=http), mode=mode, cache=None)


def a2a_refusal(response: httpx.Response, request_id: Any = 1) -> str:
    """The ``google.rpc`` status name of an A2A refusal: on the JSON-RPC binding a JSON-RPC error with the
    request's id and an ``ErrorInfo`` naming it, on HTTP+JSON a ``google.rpc.Status``."""
    body = response.json()
    if "jsonrpc" in body:
        assert body["id"] == request_id and set(body["error"]) == {"code", "message", "data"}, body
        return str(body["error"]["data"][0]["reason"])
    return str(body["error"]["status"])
