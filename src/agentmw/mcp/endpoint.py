"""The MCP endpoint: the era each request asks for (transport security is the edge's: ``_edge.py``).

A request whose ``MCP-Protocol-Version`` names a version outside the handshake era is served by the
stateless (2026-07-28) path, so an unknown version is told which ones exist; anything else is the
handshake era, with ``initialize`` and ``Mcp-Session-Id``.
"""

from __future__ import annotations

import logging
from typing import Any

from .._edge import Refusal
from .._shape import BodyShape, check_shape
from .._transport import (
    ClientDisconnected,
    ProtocolError,
    identity_error,
    loads,
    read_body,
    store_fault,
    store_unavailable,
)
from .._types import Receive, Scope, Send
from ..auth.refusals import PEEK_LIMIT, peek_body, request_id_of
from ..errors import AccessRefused
from ..settings import Limits, Timing
from . import handshake, stateless
from ._host import McpHost
from ._wire import HANDSHAKE_VERSIONS, INTERNAL_ERROR, error_body, header_map, json_response
from .methods import Catalog
from .settings import McpSettings

__all__ = ["Incoming", "McpEndpoint", "refuse"]

logger = logging.getLogger("agentmw")


async def refuse(scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
    """The edge's refusal (_edge.py) as the MCP SDK answers it: the status with a JSON-RPC error, carrying the
    request's id when a small body names one (docs/auth.md: the refusal reads at most 64 KiB; past the size
    limit nothing is read and the id is null)."""
    request_id = None if refusal.status == 413 else request_id_of(await peek_body(scope, receive, PEEK_LIMIT))
    await json_response(send, refusal.status, error_body(request_id, refusal.code, refusal.message))


class Incoming:
    """A parsed POST: its headers and decoded body, or the error response already sent."""

    __slots__ = (
        "accept_json",
        "accept_sse",
        "body",
        "credential",
        "headers",
        "raw_headers",
        "repeated",
        "scope",
    )

    def __init__(self, scope: Scope) -> None:
        self.scope = (
            scope  # where the verified caller is (Agent(auth=...)): what a hidden tool is hidden from
        )
        self.raw_headers = scope["headers"]
        self.headers, self.repeated = header_map(scope)
        accept = self.headers.get("accept", "")
        wildcard = "*/*" in accept
        self.accept_json = wildcard or "application/json" in accept or "application/*" in accept
        self.accept_sse = wildcard or "text/event-stream" in accept or "text/*" in accept
        self.body: Any = None
        self.credential: str | None = None  # with Agent(auth=...): the verified caller a session is bound to


class McpEndpoint:
    """ASGI app serving one agent's MCP endpoint in both protocol eras.

    Built once by the agent with its settings, the shared limits and timing, and the handshake era's sessions
    (a lifecycle client of the agent's state, ``handshake.py``)."""

    def __init__(
        self,
        agent: McpHost,
        settings: McpSettings,
        limits: Limits,
        timing: Timing,
        sessions: handshake.SessionStore,
    ) -> None:
        self.agent = agent
        self.settings = settings
        self.timing = timing
        self.max_body_bytes = limits.max_body_bytes
        self.body_shape = BodyShape(limits.max_body_values, limits.max_body_depth)
        self.catalog = Catalog(agent)
        self.sessions = sessions
        self.listeners = stateless.ListenHub(agent)
        self.used_states = stateless.UsedStates(
            timing.input_state_ttl_seconds, limits.max_used_states, state=lambda: agent.state
        )
        self.server_info = {"name": agent.name, "version": agent.version}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        incoming: Incoming | None = None
        try:
            incoming = Incoming(scope)
            await self._serve(incoming, scope, receive, send)
        except ClientDisconnected:
            return
        except AccessRefused as exc:
            error = identity_error(exc)
            request_id = request_id_of(incoming.body if incoming is not None else None)  # docs/auth.md
            try:
                await json_response(send, error.status or 403, error.body(request_id), error.headers)
            except Exception:  # noqa: BLE001  (the response had started: nothing more can be said)
                logger.debug("could not answer %s: the response had started", error.status)
        except ProtocolError as exc:  # the request itself is malformed; raised before any response started
            logger.debug("MCP request refused: %s", exc.message)
            await json_response(
                send, exc.status or 400, exc.body(exc.request_id), exc.headers
            )  # null if unknown
        except Exception as exc:
            # The store failing (a session, a requestState check, ...): 503 with Retry-After and -32603 marked
            # retryable. A bug of ours must still get a protocol answer, never a traceback. Either carries the
            # request's id when the body was read. If the response had already started, the server refuses a
            # second start; the client then sees the stream end.
            request_id = request_id_of(incoming.body if incoming is not None else None)
            fault = store_fault(exc)
            if fault is not None:
                logger.warning("agentmw MCP endpoint: %s", fault.message)
                error = store_unavailable(fault)
                status, payload, headers = 503, error.body(request_id), error.headers
            else:
                logger.exception(
                    "agentmw MCP endpoint failed on %s %s", scope.get("method"), scope.get("path")
                )
                status, payload, headers = 200, error_body(request_id, INTERNAL_ERROR, "Internal error"), None
            try:
                await json_response(send, status, payload, headers)
            except Exception:  # noqa: BLE001  (the response had started: nothing more can be said)
                logger.debug("could not send the error: the response had started")

    async def _serve(self, incoming: Incoming, scope: Scope, receive: Receive, send: Send) -> None:
        # Host, Origin, Content-Type and the declared size were checked at the edge (_edge.py)
        headers = incoming.headers
        if self.agent.access is not None:  # bearer token, scopes, rate limits: 401/403/429 (docs/auth.md)
            try:
                principal = await self.agent.access.admit(scope, "mcp")
            except AccessRefused:  # refused before the body is read: its id, from a small one
                incoming.body = await peek_body(scope, receive, min(PEEK_LIMIT, self.max_body_bytes))
                raise
            if (
                principal is not None
            ):  # a session outlives a token (refresh, step-up): it is bound to the caller
                incoming.credential = handshake.VERIFIED + principal.identity
        version = headers.get("mcp-protocol-version")
        if version is not None and version.strip() not in HANDSHAKE_VERSIONS:
            await stateless.handle(self, incoming, scope, receive, send)
        else:
            await handshake.handle(self, incoming, scope, receive, send)

    async def read_json(self, incoming: Incoming, receive: Receive) -> Any:
        """The strictly decoded body (kept on ``incoming``); raises ProtocolError (400, 413) for a bad one, and
        for one past ``max_body_values`` or ``max_body_depth``, counted before it is decoded (docs/limits.md)."""
        raw = await read_body(receive, self.max_body_bytes)
        check_shape(raw, self.body_shape)
        incoming.body = loads(raw)
        return incoming.body
