"""Refusals at the identity boundary (400, 401, 403, 421, 429, 503) in each protocol's shape, with the request's id.

A face admits a request (``Access.admit``) before it reads the body, so a refusal there does not know the
JSON-RPC id yet. :func:`peek_request_id` reads it from a small body (at most :data:`PEEK_LIMIT` bytes, declared
or counted; a larger body is not read and the answer's id is null), only when the refusal is answered and the
body is never read again. A refusal after the body was read takes the id from the parsed body
(:func:`request_id_of`). The ``WWW-Authenticate`` challenge, ``Retry-After`` and the HTTP status stay as they are.
"""

from __future__ import annotations

from typing import Any, Final

from .._transport import ClientDisconnected, ProtocolError, identity_error, loads, read_body, send_json
from .._types import Receive, Scope, Send

__all__ = [
    "A2A_STATUS",
    "PEEK_LIMIT",
    "a2a_refusal",
    "peek_body",
    "peek_request_id",
    "request_id_of",
    "send_a2a_refusal",
]

_ERROR_INFO: Final = "type.googleapis.com/google.rpc.ErrorInfo"  # google.rpc's type URL, as a2a.wire names it

PEEK_LIMIT: Final = 64 * 1024
"""The largest body a refusal reads to find the request's id (bytes)."""

A2A_STATUS: Final = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    421: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}
"""The ``google.rpc`` status name of each HTTP status a refusal has; any other is ``PERMISSION_DENIED``."""


def request_id_of(body: Any) -> Any:
    """The JSON-RPC id of a decoded request body: a string or a number, else None (a batch, a notification)."""
    if not isinstance(body, dict):
        return None
    found = body.get("id")
    if isinstance(found, bool) or not isinstance(found, (str, int, float)):
        return None
    return found


async def peek_body(scope: Scope, receive: Receive, limit: int = PEEK_LIMIT) -> Any:
    """The decoded body of a refused request that is still unread, when it is small JSON; None otherwise. The
    caller answers the request next and reads nothing more from ``receive``."""
    if scope.get("method") != "POST":
        return None
    for name, value in scope.get("headers", ()):
        if name == b"content-length" and (not value.isdigit() or int(value) > limit):
            return None  # large (or unreadable): not worth reading to answer a refusal
    try:
        return loads(await read_body(receive, limit))
    except (ProtocolError, ClientDisconnected):
        return None


async def peek_request_id(scope: Scope, receive: Receive, limit: int = PEEK_LIMIT) -> Any:
    """The JSON-RPC id of a refused request whose body is still unread (:func:`peek_body`)."""
    return request_id_of(await peek_body(scope, receive, limit))


def a2a_refusal(exc: Exception, *, jsonrpc: bool, request_id: Any = None) -> tuple[int, dict[str, Any], Any]:
    """``(status, body, headers)`` of an A2A refusal: a JSON-RPC error carrying the request's id on the JSON-RPC
    binding, a ``google.rpc.Status`` on HTTP+JSON; both with an ``ErrorInfo`` naming the status."""
    error = identity_error(exc)
    status = error.status or 403
    reason = A2A_STATUS.get(status, "PERMISSION_DENIED")
    details = [{"@type": _ERROR_INFO, "reason": reason, "domain": "a2a-protocol.org", "metadata": {}}]
    if jsonrpc:
        body: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": error.code, "message": error.message, "data": details},
        }
    else:
        body = {"error": {"code": status, "status": reason, "message": error.message, "details": details}}
    return status, body, error.headers


async def send_a2a_refusal(send: Send, exc: Exception, *, jsonrpc: bool, request_id: Any = None) -> None:
    status, body, headers = a2a_refusal(exc, jsonrpc=jsonrpc, request_id=request_id)
    await send_json(send, status, body, headers)
