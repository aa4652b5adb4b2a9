"""``requestState`` for 2026 multi-round-trip requests: the answers so far, signed so a client cannot forge them.

The state travels through the client, so it is HMAC-signed with the agent's secret and bound to the
method, the capability, a hash of the arguments and an expiry. A retry may land on any replica that shares
the secret (given to ``Agent(secret=...)``, or else one kept in the shared state); the only server-side
record is the used state (``stateless.UsedStates``), in the shared state too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from collections.abc import Mapping
from typing import Any

from ._host import McpHost

__all__ = ["Unverified", "arguments_digest", "seal", "unseal"]


class Unverified(ValueError):
    """A ``requestState`` whose signature none of the agent's secrets makes: forged, or signed with a secret
    this replica does not hold yet (the store's secret changed: ``Agent.refresh_secret`` may fix that)."""


def arguments_digest(arguments: Any) -> str:
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def caller_tag(caller: str | None) -> str:
    return hashlib.sha256((caller or "").encode()).hexdigest()[:24]


def seal(
    secret: bytes,
    *,
    target: str,
    digest: str,
    answers: dict[str, Any],
    ttl: float,
    asked: Any = (),
    caller: str | None = None,
) -> str:
    """Sign the answers so far, the keys this round asked (only those may be answered with it), and who
    was asked (no other caller may answer with it)."""
    payload = json.dumps(
        {
            "t": target,
            "d": digest,
            "a": answers,
            "e": int(time.time() + ttl),
            "q": sorted(asked),
            "c": caller_tag(caller),
            "n": os.urandom(8).hex(),
        },  # unique per round, so "used once" is per exchange
        separators=(",", ":"),
        default=str,
    ).encode()
    mac = hmac.new(secret, payload, hashlib.sha256).digest()
    return f"{_b64(payload)}.{_b64(mac)}"


async def seal_round(
    agent: McpHost,
    target: str,
    arguments: Any,
    answers: dict[str, Any],
    *,
    asked: Any = (),
    caller: str | None = None,
) -> str:
    """The ``requestState`` that ends an ``input_required`` round of ``target`` called with ``arguments``
    (signed with the agent's secret, read from the shared state the first time when none was given, and read
    again before signing: after a store wipe, every replica signs with the one secret
    the store holds now, which is the one the others check with)."""
    refresh = getattr(agent, "refresh_secret", None)  # a host of its own (a test's) may have none
    if refresh is not None and agent.secret_known:
        await refresh(0.0)
    return seal(
        await agent.signing_secret(),
        target=target,
        digest=arguments_digest(arguments),
        answers=answers,
        ttl=agent.timing.input_state_ttl_seconds,
        asked=asked,
        caller=caller,
    )


def open_round(
    agent: McpHost,
    method: str,
    params: Mapping[str, Any],
    target: str,
    *,
    caller: str | None = None,
    responses: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The answers of a retry: those its ``requestState`` carries, plus the ``responses`` to the questions that
    state asked (answers to anything else are ignored). ValueError when the state is forged, stale, for another
    call (the arguments it is bound to are the call's own: a tool's or prompt's ``arguments``, a template
    resource's URI variables) or, with ``caller`` given, for another caller. The agent's secret must be known
    (``await agent.signing_secret()`` first when it comes from the state).
    """
    if method == "resources/read":
        found = agent.find_resource(params.get("uri", ""))
        arguments = found[1] if found else None
    else:
        arguments = params.get("arguments")
    # a host of its own (a test's) may know one secret only
    secrets = getattr(agent, "verification_secrets", None) or (agent.secret,)
    data = _verified(
        secrets,
        params.get("requestState"),
        target=target,
        digest=arguments_digest(arguments),
    )
    if caller is not None and data.get("c") != caller_tag(caller):
        raise ValueError("requestState was issued to another caller")
    answers = data.get("a")
    answers = dict(answers) if isinstance(answers, dict) else {}
    asked = data.get("q")
    if responses and isinstance(asked, list):
        answers.update({key: value for key, value in responses.items() if key in asked})
    return answers


def unseal(secret: bytes, state: Any, *, target: str, digest: str) -> dict[str, Any]:
    """The answers recorded in ``state``; raises ValueError when it is forged, stale or for another call."""
    answers = _verified((secret,), state, target=target, digest=digest).get("a")
    return answers if isinstance(answers, dict) else {}


def _verified(secrets: tuple[bytes, ...], state: Any, *, target: str, digest: str) -> dict[str, Any]:
    """The signed payload of ``state``, after every check (its signature made by one of ``secrets``)."""
    if not isinstance(state, str) or state.count(".") != 1:
        raise ValueError("requestState is malformed")
    body, mac = state.split(".")
    try:
        payload, given = _unb64(body), _unb64(mac)
    except (ValueError, TypeError) as exc:
        raise ValueError("requestState is malformed") from exc
    if not any(
        hmac.compare_digest(hmac.new(secret, payload, hashlib.sha256).digest(), given) for secret in secrets
    ):
        raise Unverified("requestState failed its integrity check")
    data: dict[str, Any] = json.loads(payload)
    if data.get("t") != target or data.get("d") != digest:
        raise ValueError("requestState belongs to another request")
    if data.get("e", 0) < time.time():
        raise ValueError("requestState has expired; start the request again")
    return data


def expiry(state: Any) -> float | None:
    """The wall-clock expiry a ``requestState`` claims, unchecked; None when it is malformed.

    For the used-state table only (``stateless.UsedStates``): a claim read without the MAC can only make
    a state look used, never valid, since ``unseal`` still checks everything before a state is trusted.
    """
    if not isinstance(state, str) or state.count(".") != 1:
        return None
    try:
        data = json.loads(_unb64(state.split(".")[0]))
    except (ValueError, TypeError):
        return None
    value = data.get("e") if isinstance(data, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
