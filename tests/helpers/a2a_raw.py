"""A2A 1.0 JSON-RPC spoken in raw HTTP: the request bodies tests post to ``/a2a``."""

from __future__ import annotations

import uuid
from typing import Any

V1 = {"a2a-version": "1.0"}


def send_message(
    parts: list[dict[str, Any]], *, message_id: str | None = None, request_id: Any = 1, **message: Any
) -> dict[str, Any]:
    """A ``SendMessage`` request of a user message with ``parts``; ``message`` adds fields to the message
    (``metadata``, ``taskId``...). A fresh ``messageId`` unless one is given."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": message_id or uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": parts,
                **message,
            }
        },
    }
