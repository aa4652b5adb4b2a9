"""The agent card: generated from the registry, in 1.0 shape with the 0.3 fields merged in."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["build_card", "card_etag", "base_url"]

_SCHEME_TYPES_V03 = {"apiKeySecurityScheme": "apiKey", "httpAuthSecurityScheme": "http",
                     "oauth2SecurityScheme": "oauth2", "openIdConnectSecurityScheme": "openIdConnect",
                     "mtlsSecurityScheme": "mutualTLS"}


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
    host = host or headers.get("x-forwarded-host", "").split(",")[0].strip() or headers.get("host", "localhost")
    prefix = headers.get("x-forwarded-prefix", "").rstrip("/") + scope.get("root_path", "").rstrip("/")
    return f"{proto}://{host}{prefix}"


def _skill_entry(agent: Agent, name: str) -> dict[str, Any]:
    cap = agent.skills[name]
    entry: dict[str, Any] = {"id": name, "name": cap.title or name, "description": cap.summary or name,
                             "tags": list(cap.tags) or [name]}
    if cap.examples:
        entry["examples"] = list(cap.examples)
    if cap.input_modes:
        entry["inputModes"] = list(cap.input_modes)
    if cap.output_modes:
        entry["outputModes"] = list(cap.output_modes)
    return entry


def build_card(agent: Agent, base: str, *, extended: dict[str, Any] | None = None) -> dict[str, Any]:
    url = base + agent.a2a_path
    settings = agent.a2a
    card: dict[str, Any] = {
        "name": agent.name,
        "description": settings.description or agent.instructions or agent.name,
        "version": agent.version,
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        "capabilities": {"streaming": True, "pushNotifications": settings.push_enabled,
                         "extendedAgentCard": settings.extended_card is not None},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [_skill_entry(agent, name) for name in agent.skills],
    }
    if settings.provider:
        card["provider"] = dict(settings.provider)
    if settings.documentation_url:
        card["documentationUrl"] = settings.documentation_url
    if settings.security_schemes:
        card["securitySchemes"] = {
            name: {**scheme, **_v03_scheme(scheme)} for name, scheme in settings.security_schemes.items()}
    if settings.security_requirements:
        card["securityRequirements"] = [{"schemes": {n: {"list": list(s)} for n, s in req.items()}}
                                        for req in settings.security_requirements]
        card["security"] = [dict(req) for req in settings.security_requirements]
    if extended:
        for key, value in extended.items():
            if key == "skills":
                card["skills"] = card["skills"] + list(value)
            else:
                card[key] = value
    # 0.3 readers: the same document, their field names
    card.update({"url": url, "preferredTransport": "JSONRPC", "protocolVersion": "0.3.0",
                 "additionalInterfaces": [{"url": url, "transport": "JSONRPC"}, {"url": url, "transport": "HTTP+JSON"}]})
    if settings.extended_card is not None:
        card["supportsAuthenticatedExtendedCard"] = True
    return card


def _v03_scheme(scheme: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 security scheme's fields flattened with the 0.3 ``type``, so both versions read it."""
    for key, kind in _SCHEME_TYPES_V03.items():
        if key in scheme:
            flat = {k: v for k, v in scheme[key].items() if k != "location"}
            if "location" in scheme[key]:
                flat["in"] = scheme[key]["location"]
            return {"type": kind, **flat}
    return {}


def card_etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def dump(card: dict[str, Any]) -> bytes:
    return json.dumps(card, separators=(",", ":"), ensure_ascii=False).encode()
