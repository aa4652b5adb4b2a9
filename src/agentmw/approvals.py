"""The out-of-band approvals endpoint: a different person (the budget admin) decides a pending approval.

``GET <approvals_path>/<id>`` shows the exact action; ``POST <approvals_path>/<id>`` with
``{"approve": true|false, "note": "..."}`` decides it.

Who a person is comes only from the app's authentication: the ``Agent(identify=...)`` hook or the host
app's authenticated ``scope["user"]``, never from a header's value. With neither configured, out-of-band
approval is off and this endpoint answers 403 "no approver configured". Who may decide is
``Agent(approver=fn(identity, approval))``; by default any authenticated caller other than the requester.
Reading an approval needs the same right, or being its requester.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import HTTPConnection

from ._scope import route_path
from ._transport import ClientDisconnected, ProtocolError, identity_error, loads, read_body, send_json
from ._types import Receive, Scope, Send
from .errors import AccessRefused
from .identity import authenticated_identity, has_identity_source
from .safety.gate import ApprovalProblem

if TYPE_CHECKING:
    from .identity import IdentifyFn
    from .safety import Approvals

__all__ = ["NO_APPROVER", "ApprovalsEndpoint"]

NO_APPROVER = (
    "Out-of-band approval is off: no approver configured. It needs the app's authentication to know "
    "who decides: the app's current-user dependency (Agent(identify=get_current_user)), an "
    "identify(connection) hook, or an authentication middleware that sets the user."
)
MAX_DECISION_BYTES = 65536


class ApprovalsHost(Protocol):
    """What the approvals endpoint reads of its agent: who the caller is, who may decide, and the approvals."""

    identify: IdentifyFn | None
    approver: Callable[[str, Any], bool] | None
    approvals_path: str
    approvals: Approvals


class ApprovalsEndpoint:
    def __init__(self, agent: ApprovalsHost) -> None:
        self.agent = agent

    def may_decide(self, identity: str, approval: Any) -> bool:
        """Whether ``identity`` (an authenticated one) may decide ``approval``; the same right reads it."""
        if self.agent.approver is not None:
            return bool(self.agent.approver(identity, approval))
        requester: str | None = approval.requested_by
        return identity != requester

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        if method not in ("GET", "POST"):
            await send_json(send, 405, {"detail": "GET or POST"}, [(b"allow", b"GET, POST")])
            return
        if not has_identity_source(scope, self.agent.identify):
            await send_json(send, 403, {"detail": NO_APPROVER})
            return
        try:
            identity = await authenticated_identity(HTTPConnection(scope, receive), self.agent.identify)
        except AccessRefused as exc:
            error = identity_error(exc)
            await send_json(send, error.status or 401, {"detail": error.message}, error.headers)
            return
        if identity is None:
            await send_json(
                send,
                401,
                {"detail": "Authentication required to see or decide an approval"},
                [(b"www-authenticate", b"Bearer")],
            )
            return
        approval_id = route_path(scope)[len(self.agent.approvals_path) :].strip("/")
        approval = await self.agent.approvals.get(approval_id) if approval_id else None
        if approval is None:
            await send_json(
                send, 404, {"detail": f"No pending approval {approval_id!r} (unknown, expired or used)"}
            )
            return
        may_decide = self.may_decide(identity, approval)
        if method == "GET":
            if not may_decide and identity != approval.requested_by:
                await send_json(
                    send,
                    403,
                    {"detail": "Only its requester and those who may decide it can see this approval"},
                )
                return
            await send_json(send, 200, approval.public())
            return
        if not may_decide:
            await send_json(
                send,
                403,
                {
                    "detail": "This caller may not decide this approval (the requester cannot "
                    "approve their own action)"
                },
            )
            return
        try:
            body = await read_body(receive, MAX_DECISION_BYTES)
            decision = loads(body) if body.strip() else {}
        except ClientDisconnected:
            return
        except ProtocolError as exc:
            await send_json(send, exc.status or 400, {"detail": exc.message})
            return
        if not isinstance(decision, dict) or not isinstance(decision.get("approve"), bool):
            await send_json(
                send, 422, {"detail": 'The body must be {"approve": true|false, "note"?: string}'}
            )
            return
        try:
            decided = await self.agent.approvals.decide(
                approval_id, identity, decision["approve"], str(decision.get("note", ""))
            )
        except ApprovalProblem as exc:
            await send_json(send, 409, {"detail": str(exc)})
            return
        await send_json(send, 200, decided.public())
