"""An audit log as an agentmw hook: one JSON line per attempted call, on every face, denials included.

    agent.use(AuditLog("audit.jsonl", deny_callers={"mallory"}))

``before`` refuses callers on a deny list (the call never runs, and the refusal is audited too); ``after``
appends who called what, with which arguments (secrets redacted), and how it ended. A failure to write the
audit line is logged by agentmw and does not change the outcome; a failure in ``before`` refuses the call.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path

from agentmw import Rejected
from agentmw.observability import Hook, Invocation
from agentmw.observability.logs import DEFAULT_REDACTED, redact_names
from agentmw.runtime import Outcome


class AuditLog(Hook):
    def __init__(self, path: str | Path, *, deny_callers: Iterable[str] = ()) -> None:
        self.path = Path(path)
        self.deny_callers = frozenset(deny_callers)

    async def before(self, invocation: Invocation) -> None:
        if invocation.caller in self.deny_callers:
            raise Rejected(f"{invocation.caller} may not call {invocation.name}.")

    async def after(self, invocation: Invocation, outcome: Outcome) -> None:
        line = {
            "at": round(time.time(), 3),
            "caller": invocation.caller,
            "protocol": invocation.protocol,
            "kind": invocation.kind,
            "capability": invocation.name,
            "arguments": redact_names(dict(invocation.arguments), DEFAULT_REDACTED),
            "outcome": str(outcome.status),
            "code": str(outcome.code) if outcome.code else None,
            "seconds": round(invocation.elapsed, 6),
        }
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
