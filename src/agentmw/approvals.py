"""The out-of-band approvals endpoint: a different person (the budget admin) decides a pending approval.

``GET <approvals_path>/<id>`` shows the exact action; ``POST <approvals_path>/<id>`` with
``{"approve": true|false, "note": "..."}`` decides it. Who may decide is ``Agent(approver=...)``; by
default any identified caller other than the one who asked.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from starlette.requests import HTTPConnection

from ._http import send_json
from ._types import Receive, Scope, Send
from .identity import Unauthenticated, resolve_caller
from .middleware import route_path
from .safety.gate import ApprovalProblem

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["ApprovalsEndpoint"]


class ApprovalsEndpoint:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def may_decide(self, identity: str, approval: Any) -> bool:
        if self.agent.approver is not None:
            return bool(self.agent.approver(identity, approval))
        return identity != "anonymous" and identity != approval.requested_by

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        approval_id = route_path(scope)[len(self.agent.approvals_path):].strip("/")
        approval = self.agent.approvals.get(approval_id) if approval_id else None
        if approval is None:
            await send_json(send, 404, {"detail": f"No pending approval {approval_id!r} (unknown, expired or used)"})
            return
        connection = HTTPConnection(scope, receive)
        try:
            identity = await resolve_caller(connection, self.agent.identify)
        except Unauthenticated as exc:
            await send_json(send, 401, {"detail": str(exc)}, [(b"www-authenticate", exc.challenge.encode())])
            return
        if scope["method"] == "GET":
            await send_json(send, 200, approval.public())
            return
        if scope["method"] != "POST":
            await send_json(send, 405, {"detail": "GET or POST"}, [(b"allow", b"GET, POST")])
            return
        if not self.may_decide(identity, approval):
            await send_json(send, 403, {"detail": "This caller may not decide this approval (the requester cannot "
                                              "approve their own action)"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > 65536:
                await send_json(send, 413, {"detail": "Body too large"})
                return
            if not message.get("more_body", False):
                break
        try:
            decision = json.loads(body or b"{}")
        except ValueError:
            decision = None
        if not isinstance(decision, dict) or not isinstance(decision.get("approve"), bool):
            await send_json(send, 422, {"detail": 'The body must be {"approve": true|false, "note"?: string}'})
            return
        try:
            decided = self.agent.approvals.decide(approval_id, identity, decision["approve"],
                                                  str(decision.get("note", "")))
        except ApprovalProblem as exc:
            await send_json(send, 409, {"detail": str(exc)})
            return
        await send_json(send, 200, decided.public())
