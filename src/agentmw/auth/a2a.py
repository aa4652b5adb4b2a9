"""Moved to :mod:`agentmw.a2a.auth` (A2A-specific auth lives in the A2A face). Kept only until ``auth/__init__``,
``auth/access`` and ``auth/wellknown`` import from there; then it goes."""

from ..a2a.auth import JWKS_PATH, PushSigner, check_task, security_schemes, skill_requirements

__all__ = ["JWKS_PATH", "PushSigner", "check_task", "security_schemes", "skill_requirements"]
