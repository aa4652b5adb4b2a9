"""The agent card: generated from the registry as a strict A2A 1.0 card; 0.3 readers get the SDK's merged card.

The a2a-sdk server (``agent_card_to_dict``) serves one document to everyone: the 1.0 card with the 0.3 fields
(``to_compat_agent_card``, built from the card's 0.3 interfaces) merged in wherever the 1.0 card has no such
key. That document fails a strict 1.0 validator, so agentmw serves the plain 1.0 card by default and builds the
same merged card (:func:`with_v03_fields`) only for a 0.3 reader: see :func:`wants_v03`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import OrderedDict
from email.utils import formatdate, parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from .settings import A2ASettings
from .surfaces import card_extension, declares_a2ui

if TYPE_CHECKING:
    from .._wiring import FaceHost

__all__ = [
    "V03_CARD_PATH",
    "CardClock",
    "base_url",
    "build_card",
    "card_etag",
    "etag_matches",
    "not_modified_since",
    "wants_v03",
    "with_v03_fields",
]

V03_CARD_PATH = "/.well-known/agent.json"  # the 0.2/0.3-era name; a2a-sdk 0.3 knew it as the previous path

_SCHEME_TYPES_V03 = {
    "apiKeySecurityScheme": "apiKey",
    "httpAuthSecurityScheme": "http",
    "oauth2SecurityScheme": "oauth2",
    "openIdConnectSecurityScheme": "openIdConnect",
    "mtlsSecurityScheme": "mutualTLS",
}


def base_url(scope: Any, headers: dict[str, str]) -> str:
    """The public base URL of the agent as the caller reached it: proxies, ``root_path`` and mounts included."""
    forwarded = headers.get("forwarded", "")
    proto = host = None
    for item in forwarded.split(",")[0].split(";"):
        key, _, value = item.strip().partition("=")
        if key.lower() == "proto":
            proto = value.strip('"')
        elif key.lower() == "host":
            host = value.strip('"')
    proto = proto or headers.get("x-forwarded-proto", "").split(",")[0].strip() or scope.get("scheme", "http")
    host = (
        host or headers.get("x-forwarded-host", "").split(",")[0].strip() or headers.get("host", "localhost")
    )
    prefix = headers.get("x-forwarded-prefix", "").rstrip("/") + scope.get("root_path", "").rstrip("/")
    return f"{proto}://{host}{prefix}"


def _skill_entry(agent: FaceHost, name: str) -> dict[str, Any]:
    cap = agent.skills[name]
    entry: dict[str, Any] = {
        "id": name,
        "name": cap.title or name,
        "description": cap.summary or name,
        "tags": list(cap.tags) or [name],
    }
    if cap.examples:
        entry["examples"] = list(cap.examples)
    if cap.input_modes:
        entry["inputModes"] = list(cap.input_modes)
    if cap.output_modes:
        entry["outputModes"] = list(cap.output_modes)
    return entry


def _requirement(req: Any) -> dict[str, Any]:
    """A 1.0 SecurityRequirement in canonical protobuf JSON: an empty scope list is ``{}``."""
    return {"schemes": {name: ({"list": list(scopes)} if scopes else {}) for name, scopes in req.items()}}


def build_card(
    agent: FaceHost, settings: A2ASettings, base: str, *, extended: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The A2A 1.0 AgentCard, in canonical protobuf JSON (camelCase, nothing outside the 1.0 schema)."""
    url = base + settings.path
    card: dict[str, Any] = {
        "name": agent.name,
        "description": settings.description or agent.instructions or agent.name,
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        "version": agent.version,
        "capabilities": {
            "streaming": True,
            "pushNotifications": settings.push_enabled,
            "extendedAgentCard": settings.extended_card is not None,
        },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [_skill_entry(agent, name) for name in agent.skills],
    }
    if declares_a2ui(agent):  # a skill answers with A2UI surfaces (docs/a2ui.md)
        card["capabilities"]["extensions"] = [card_extension()]
    if settings.provider:
        card["provider"] = dict(settings.provider)
    if settings.documentation_url:
        card["documentationUrl"] = settings.documentation_url
    if settings.security_schemes:
        card["securitySchemes"] = {name: dict(scheme) for name, scheme in settings.security_schemes.items()}
    if settings.security_requirements:
        card["securityRequirements"] = [_requirement(req) for req in settings.security_requirements]
    if extended:
        for key, value in extended.items():
            if key == "skills":
                card["skills"] = card["skills"] + list(value)
            else:
                card[key] = value
    return card


def with_v03_fields(card: dict[str, Any]) -> dict[str, Any]:
    """The 1.0 card with the 0.3 fields merged in, as the a2a-sdk server's ``agent_card_to_dict`` builds it.

    The 0.3 view comes from the card's own 0.3 interfaces (the first is ``url``/``preferredTransport``/
    ``protocolVersion``, the rest ``additionalInterfaces``); with none, the card is returned unchanged, as the
    SDK does. A 0.3 key never overwrites a 1.0 one; objects merge key by key (a ``type`` on each security scheme).
    """
    legacy = [
        i
        for i in card.get("supportedInterfaces", [])
        if not i.get("protocolVersion") or str(i["protocolVersion"]).startswith("0.")
    ]
    if not legacy:
        return card
    compat: dict[str, Any] = {
        "url": legacy[0]["url"],
        "preferredTransport": legacy[0]["protocolBinding"],
        "protocolVersion": legacy[0].get("protocolVersion") or "0.3",
    }
    if len(legacy) > 1:
        compat["additionalInterfaces"] = [
            {"url": i["url"], "transport": i["protocolBinding"]} for i in legacy[1:]
        ]
    if card.get("capabilities", {}).get("extendedAgentCard"):
        compat["supportsAuthenticatedExtendedCard"] = True
    if card.get("securitySchemes"):
        compat["securitySchemes"] = {
            name: _v03_scheme(scheme) for name, scheme in card["securitySchemes"].items()
        }
    if card.get("securityRequirements"):
        compat["security"] = [
            {name: list(scopes.get("list", [])) for name, scopes in req.get("schemes", {}).items()}
            for req in card["securityRequirements"]
        ]
    return _merge(json.loads(json.dumps(card)), compat)


def _merge(into: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if key not in into:
            into[key] = value
        elif isinstance(value, dict) and isinstance(into[key], dict):
            _merge(into[key], value)
    return into


def _v03_scheme(scheme: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 security scheme's fields flattened with the 0.3 ``type``, so both versions read it."""
    for key, kind in _SCHEME_TYPES_V03.items():
        if key in scheme:
            flat = {k: v for k, v in scheme[key].items() if k != "location"}
            if "location" in scheme[key]:
                flat["in"] = scheme[key]["location"]
            return {"type": kind, **flat}
    return {}


def wants_v03(path: str, headers: dict[str, str], query: str) -> bool:
    """Whether a card request comes from a 0.3 reader: the old path, or an explicit ``A2A-Version: 0.3`` (header,
    or the ``A2A-Version`` query parameter; the patch is ignored).

    Unlike the methods, a card request *without* a version gets the 1.0 card: the card is how a client learns
    the versions, so it cannot be expected to send one first.
    """
    if path == V03_CARD_PATH:
        return True
    raw = headers.get("a2a-version")
    if raw is None:
        match = re.search(r"(?:^|&)A2A-Version=([^&]*)", query)
        raw = match.group(1) if match else ""
    return raw.strip().split(".")[:2] == ["0", "3"]


def card_etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def etag_matches(header: str, etag: str) -> bool:
    """Whether ``If-None-Match`` selects this card: a list, ``*``, and weak comparison (RFC 9110 13.1.2)."""
    candidates = [candidate.strip() for candidate in header.split(",")]
    return "*" in candidates or any(c.removeprefix("W/") == etag.removeprefix("W/") for c in candidates)


def not_modified_since(header: str, last_modified: float) -> bool:
    """Whether ``If-Modified-Since`` shows the caller's copy is current; an unreadable date never matches."""
    try:
        since = parsedate_to_datetime(header)
    except (TypeError, ValueError, IndexError):
        return False
    if since is None or since.tzinfo is None:
        return False
    return int(last_modified) <= since.timestamp()


class CardClock:
    """When each distinct card body was first served by this process: the card's ``Last-Modified``.

    The card only changes when the registry or the settings do (or per caller, for extended cards), so the
    first time a body is seen is when it last changed, as far as this process can tell. Bounded: the oldest
    bodies are forgotten past ``size`` (a forgotten one simply gets a newer date).
    """

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._seen: OrderedDict[str, float] = OrderedDict()

    def last_modified(self, etag: str) -> float:
        when = self._seen.get(etag)
        if when is None:
            when = float(int(time.time()))
            self._seen[etag] = when
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)
        else:
            self._seen.move_to_end(etag)
        return when

    @staticmethod
    def http_date(when: float) -> str:
        return formatdate(when, usegmt=True)


def dump(card: dict[str, Any]) -> bytes:
    return json.dumps(card, separators=(",", ":"), ensure_ascii=False).encode()
