"""The HTTP edge's refusals (``_edge.py``) in A2A's shapes, as ``auth/refusals.py`` writes the identity ones.

- the JSON-RPC binding (``POST <a2a_path>``): a JSON-RPC error carrying the request's id when a small body names
  one (the edge answers before the body is read; past the size limit nothing is read and the id is null);
- the HTTP+JSON binding and the card: a ``google.rpc.Status`` (``{"error": {code, status, message, details}}``).

Both carry an ``ErrorInfo`` naming the ``google.rpc`` status, with the edge's HTTP status.
"""

from __future__ import annotations

from typing import Any, Final

from .._edge import Refusal, Render
from .._scope import route_path
from .._transport import send_json
from .._types import Receive, Scope, Send
from ..auth.refusals import A2A_STATUS, PEEK_LIMIT, peek_request_id
from .wire import ERROR_INFO

__all__ = ["edge_refusal"]

_CARD_PATHS: Final = frozenset({"/.well-known/agent-card.json", "/.well-known/agent.json"})
_STATUS: Final = {**A2A_STATUS, 413: "INVALID_ARGUMENT", 415: "INVALID_ARGUMENT"}  # else PERMISSION_DENIED


def edge_refusal(a2a_path: str) -> Render:
    """The renderer for an agent whose JSON-RPC binding is at ``a2a_path``."""

    async def render(scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
        reason = _STATUS.get(refusal.status, "PERMISSION_DENIED")
        details = [{"@type": ERROR_INFO, "reason": reason, "domain": "a2a-protocol.org", "metadata": {}}]
        path = route_path(scope)
        body: dict[str, Any]
        if path not in _CARD_PATHS and path.rstrip("/") == a2a_path:
            request_id = None if refusal.status == 413 else await peek_request_id(scope, receive, PEEK_LIMIT)
            body = {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": refusal.code, "message": refusal.message, "data": details},
            }
        else:
            body = {
                "error": {
                    "code": refusal.status,
                    "status": reason,
                    "message": refusal.message,
                    "details": details,
                }
            }
        await send_json(send, refusal.status, body)

    return render
