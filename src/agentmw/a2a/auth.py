"""A2A's part of the agent's auth: the card's security schemes from the same configuration, the check a task
makes before it runs a skill, and push notifications signed by the agent (docs/auth.md)."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import TYPE_CHECKING, Any

from ..state import StoreLimits
from .wire import INVALID_PARAMS, A2AError

if TYPE_CHECKING:
    from collections.abc import Mapping, MutableMapping

    from .._wiring import FaceHost
    from ..auth.access import Access
    from ..auth.resource import ProtectedResource
    from ..capability import Capability
    from .settings import A2ASettings

__all__ = ["PushSigner", "check_task", "secured_card", "security_schemes", "skill_requirements"]

_KEY_NS = "agent.secret"
_KEY_TTL = 10 * 365 * 24 * 3600.0


async def security_schemes(resource: ProtectedResource) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The card's ``securitySchemes`` and ``securityRequirements`` (A2A 1.0 shapes) for a protected resource:
    OAuth 2.0 at its first authorization server (its RFC 8414 metadata URL and the authorization code ``flows``
    a2a.proto requires), and plain bearer tokens. While the flows cannot be known (the settings do not name the
    endpoints and the server's metadata cannot be fetched), only the bearer scheme: a scheme without ``flows``
    makes SDKs refuse the whole card."""
    flows = await resource.oauth_flows()
    scopes = list(resource.scopes)
    schemes: dict[str, Any] = {}
    requirements: list[dict[str, Any]] = []
    if flows is not None:
        schemes["oauth2"] = {
            "oauth2SecurityScheme": {
                "description": "OAuth 2.1 access tokens (authorization code with PKCE) for this agent",
                "flows": flows,
                "oauth2MetadataUrl": resource.server_metadata.url,
            }
        }
        requirements.append({"schemes": {"oauth2": {"list": scopes} if scopes else {}}})
    schemes["bearer"] = {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}
    requirements.append({"schemes": {"bearer": {"list": scopes} if scopes and flows is None else {}}})
    return schemes, requirements


async def secured_card(
    access: Access,
    settings: A2ASettings,
    skills: Mapping[str, Capability],
    card: dict[str, Any],
    scope: MutableMapping[str, Any],
) -> dict[str, Any]:
    """The A2A card as this caller may see it: its skills filtered by the agent's access rules, the security
    schemes of the protected resource (unless ``A2ASettings`` names its own), and each scoped skill's
    ``securityRequirements``."""
    await access.identify_softly(scope)
    card = dict(card)
    listed = access.visible_list("skills", card.get("skills", []), scope)
    resource = access.resource
    if resource is not None:
        if not settings.security_schemes:
            card["securitySchemes"], card["securityRequirements"] = await security_schemes(resource)
        scheme = "oauth2" if "oauth2" in card.get("securitySchemes", {}) else "bearer"
        listed = [skill_requirements(entry, skills.get(entry["id"]), scheme) for entry in listed]
    card["skills"] = listed
    return card


def skill_requirements(
    entry: dict[str, Any], capability: Capability | None, scheme: str = "oauth2"
) -> dict[str, Any]:
    """A card skill with the scopes its function needs, as its ``securityRequirements`` (of ``scheme``)."""
    policy = capability.policy if capability is not None else None
    if policy is None or not policy.scopes:
        return entry
    return {**entry, "securityRequirements": [{"schemes": {scheme: {"list": list(policy.scope_list)}}}]}


class PushSigner:
    """Signs each push notification with a JWT the receiver checks against the agent's published JWKS.

    ``A2ASettings(push=PushPolicy(signer=PushSigner()))``. The token goes in ``Authorization: Bearer`` (unless
    the push config names its own ``authentication``) with the claims ``iss`` (``issuer``, default the agent's
    name), ``aud`` (the push URL), ``iat``, ``exp`` (``lifetime_seconds`` later), ``jti`` (unique: receivers
    drop repeats), ``taskId`` and ``request_body_sha256`` (the hex SHA-256 of the exact body, so the token
    vouches for this event only). Signed ES256; the public key is served at ``/.well-known/jwks.json``
    (``auth.wellknown.JWKS_PATH``).

    Without ``private_key`` (PEM), one key is made and kept in the agent's shared state (made by whichever
    replica needs it first), so every replica signs with the same key and the JWKS is the same everywhere.
    Needs PyJWT with ``cryptography`` (the ``auth`` extra).
    """

    def __init__(
        self,
        private_key: str | bytes | None = None,
        *,
        kid: str | None = None,
        issuer: str | None = None,
        lifetime_seconds: float = 300.0,
    ) -> None:
        self._pem = private_key.encode() if isinstance(private_key, str) else private_key
        self._kid = kid
        self.issuer = issuer
        self.lifetime_seconds = lifetime_seconds
        self._key: Any = None

    async def _load(self, state: Any) -> tuple[Any, str]:
        if self._key is not None and self._kid is not None:
            return self._key, self._kid
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        pem = self._pem
        if pem is None:
            state.limit(_KEY_NS, StoreLimits(max_count=16, max_age=_KEY_TTL))
            while pem is None:
                found = await state.get_key(_KEY_NS, "pushKey")
                if found is None:
                    made = (
                        ec.generate_private_key(ec.SECP256R1())
                        .private_bytes(
                            serialization.Encoding.PEM,
                            serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption(),
                        )
                        .decode()
                    )
                    if await state.set_if_absent(_KEY_NS, "pushKey", {"pem": made}, _KEY_TTL):
                        pem = made.encode()
                    continue  # another replica made it first: read theirs
                pem = str(found["pem"]).encode()
        key = serialization.load_pem_private_key(pem, password=None)
        if self._kid is None:
            public = key.public_key().public_bytes(
                serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            self._kid = hashlib.sha256(public).hexdigest()[:16]
        self._key = key
        return key, self._kid

    async def jwks(self, state: Any) -> dict[str, Any]:
        """The JWKS receivers verify with."""
        import jwt

        key, kid = await self._load(state)
        jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
        return {"keys": [{**jwk, "kid": kid, "use": "sig", "alg": "ES256"}]}

    async def sign(self, state: Any, *, url: str, task_id: str | None, body: bytes, issuer: str) -> str:
        import jwt

        key, kid = await self._load(state)
        now = int(time.time())
        claims = {
            "iss": self.issuer or issuer,
            "aud": url,
            "iat": now,
            "exp": now + int(self.lifetime_seconds),
            "jti": secrets.token_urlsafe(16),
            "request_body_sha256": hashlib.sha256(body).hexdigest(),
        }
        if task_id:
            claims["taskId"] = task_id
        return jwt.encode(claims, key, algorithm="ES256", headers={"kid": kid, "typ": "JWT"})


def check_task(agent: FaceHost, record: Any, capability: Capability | None, connection: Any) -> None:
    """Before an A2A task runs ``capability``: a hidden skill (or grouped tool) is refused exactly as an unknown
    one is; a missing scope raises 401 or 403 (with the challenge) at the HTTP level, before any task exists."""
    access = agent.access
    if access is None or connection is None or record.skill is None:
        return
    scope = connection.scope
    skill = agent.skills.get(record.skill)
    if skill is not None and access.hides(skill, scope):
        raise A2AError(INVALID_PARAMS, f"Unknown skill {record.skill!r}; the agent card lists the skills")
    if capability is not None and capability is not skill and access.hides(capability, scope):
        raise A2AError(INVALID_PARAMS, f"Skill {record.skill!r} has no tool {record.tool!r}")
    for cap in (skill, capability):
        if cap is not None:
            access.check_call(cap, scope)
