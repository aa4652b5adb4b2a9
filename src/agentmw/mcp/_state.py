"""``requestState`` for 2026 multi-round-trip requests: the answers so far, signed so a client cannot forge them.

The state travels through the client, so it is HMAC-signed with the agent's secret and bound to the
method, the capability, a hash of the arguments and an expiry. Nothing is kept on the server: a retry
may land on any replica that shares the secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from typing import Any

__all__ = ["seal", "unseal", "arguments_digest"]


def arguments_digest(arguments: Any) -> str:
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(secret: bytes, *, target: str, digest: str, answers: dict[str, Any], ttl: float) -> str:
    payload = json.dumps({"t": target, "d": digest, "a": answers, "e": int(time.time() + ttl),
                          "n": os.urandom(8).hex()},  # unique per round, so "used once" is per exchange
                         separators=(",", ":"), default=str).encode()
    mac = hmac.new(secret, payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(mac)}"


def unseal(secret: bytes, state: Any, *, target: str, digest: str) -> dict[str, Any]:
    """The answers recorded in ``state``; raises ValueError when it is forged, stale or for another call."""
    if not isinstance(state, str) or state.count(".") != 1:
        raise ValueError("requestState is malformed")
    body, mac = state.split(".")
    try:
        payload, given = _unb64(body), _unb64(mac)
    except (ValueError, TypeError) as exc:
        raise ValueError("requestState is malformed") from exc
    if not hmac.compare_digest(hmac.new(secret, payload, hashlib.sha256).digest(), given):
        raise ValueError("requestState failed its integrity check")
    data = json.loads(payload)
    if data.get("t") != target or data.get("d") != digest:
        raise ValueError("requestState belongs to another request")
    if data.get("e", 0) < time.time():
        raise ValueError("requestState has expired; start the request again")
    answers = data.get("a")
    return answers if isinstance(answers, dict) else {}
