"""Auth and access control: the agent as an OAuth 2.1 protected resource, pluggable token verification,
per-capability scopes and roles, per-caller visibility, and rate limits in the shared state (docs/auth.md).

PyJWT (with ``cryptography``) and httpx are the ``auth`` extra, imported when the first token is verified.
"""

from starlette.requests import Request

from .access import Access, Policy
from .errors import AuthUnavailable, InsufficientScope, MisdirectedRequest, RateLimited
from .principal import Principal, principal_of
from .ratelimit import RateLimit
from .resource import ProtectedResource
from .verifiers import (
    CallableVerifier,
    IntrospectionVerifier,
    InvalidToken,
    JWTVerifier,
    TokenVerifier,
    VerifierUnavailable,
)

__all__ = [
    "Access",
    "AuthUnavailable",
    "CallableVerifier",
    "InsufficientScope",
    "IntrospectionVerifier",
    "InvalidToken",
    "JWTVerifier",
    "MisdirectedRequest",
    "Policy",
    "Principal",
    "ProtectedResource",
    "RateLimit",
    "RateLimited",
    "TokenVerifier",
    "VerifierUnavailable",
    "current_principal",
    "principal_of",
]


def current_principal(request: Request) -> Principal | None:
    """A FastAPI dependency: ``principal: Principal | None = Depends(current_principal)``. The caller agentmw
    verified for this request (MCP, A2A and AG-UI calls), or None (anonymous, or a plain HTTP request to the
    route that no agentmw face verified)."""
    return principal_of(request)
