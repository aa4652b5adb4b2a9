"""The exception tree (docs/errors.md): one base, groups a caller can catch, and refusals that carry the HTTP
status and headers every face answers with."""

from __future__ import annotations

import pytest

from agentmw import NeedsInput, Permanent, RegistrationError, Rejected, Retryable
from agentmw._host import HostDependencyError
from agentmw._shape import ShapeError
from agentmw._transport import ClientDisconnected, ProtocolError, identity_error
from agentmw.a2a.wire import A2AError
from agentmw.auth import AuthUnavailable, InsufficientScope, MisdirectedRequest, RateLimited
from agentmw.auth.errors import InvalidRequest
from agentmw.errors import (
    AccessRefused,
    AgentError,
    AgentmwError,
    ConfigurationError,
    Forbidden,
    SafetyViolation,
    Unauthenticated,
)
from agentmw.identity import Forbidden as IdentityForbidden
from agentmw.identity import Unauthenticated as IdentityUnauthenticated
from agentmw.safety import RootViolation
from agentmw.safety.gate import ApprovalProblem
from agentmw.safety.idempotency import KeyReused


@pytest.mark.parametrize(
    ("cls", "group"),
    [
        (ConfigurationError, AgentmwError),
        (RegistrationError, ConfigurationError),
        (Retryable, AgentError),
        (Permanent, AgentError),
        (Rejected, AgentError),
        (NeedsInput, AgentError),
        (AgentError, AgentmwError),
        (Unauthenticated, AccessRefused),
        (Forbidden, AccessRefused),
        (InsufficientScope, AccessRefused),
        (InvalidRequest, AccessRefused),
        (MisdirectedRequest, AccessRefused),
        (RateLimited, AccessRefused),
        (AuthUnavailable, AccessRefused),
        (AccessRefused, AgentmwError),
        (RootViolation, SafetyViolation),
        (KeyReused, SafetyViolation),
        (ApprovalProblem, SafetyViolation),
        (SafetyViolation, AgentmwError),
        (ShapeError, ProtocolError),
        (A2AError, ProtocolError),
        (ProtocolError, AgentmwError),
        (ClientDisconnected, AgentmwError),
        (HostDependencyError, AgentmwError),
    ],
)
def test_each_exception_is_in_its_group(cls: type[Exception], group: type[Exception]) -> None:
    assert issubclass(cls, group)


def test_the_errors_that_were_value_errors_still_are() -> None:
    for cls in (
        ConfigurationError,
        RegistrationError,
        SafetyViolation,
        RootViolation,
        KeyReused,
        ApprovalProblem,
    ):
        assert issubclass(cls, ValueError), cls


def test_a_scope_to_step_up_to_is_forbidden() -> None:
    assert issubclass(InsufficientScope, IdentityForbidden)


def test_identity_raises_the_refusals_of_the_tree() -> None:
    assert IdentityForbidden is Forbidden and IdentityUnauthenticated is Unauthenticated


@pytest.mark.parametrize("cls", [InvalidRequest, MisdirectedRequest, RateLimited, AuthUnavailable])
def test_a_refusal_that_is_not_a_403_is_not_forbidden(cls: type[AccessRefused]) -> None:
    """``except Forbidden`` does not catch a rate limit, an issuer outage, a foreign Host or a bad credential."""
    assert not issubclass(cls, Forbidden)


@pytest.mark.parametrize(
    ("refusal", "status", "headers"),
    [
        (
            Unauthenticated("no token", challenge='Bearer realm="x"'),
            401,
            [(b"www-authenticate", b'Bearer realm="x"')],
        ),
        (Forbidden("no"), 403, None),
        (
            InsufficientScope("more", scopes=["a"], challenge="Bearer scope=a"),
            403,
            [(b"www-authenticate", b"Bearer scope=a")],
        ),
        (InvalidRequest("two", challenge="Bearer"), 400, [(b"www-authenticate", b"Bearer")]),
        (MisdirectedRequest(), 421, None),
        (RateLimited("slow down", retry_after=1.2), 429, [(b"retry-after", b"2")]),
        (AuthUnavailable("issuer down", retry_after=0.1), 503, [(b"retry-after", b"1")]),
    ],
)
def test_a_refusal_answers_with_its_status_and_headers(
    refusal: AccessRefused, status: int, headers: list[tuple[bytes, bytes]] | None
) -> None:
    assert (refusal.status, refusal.headers) == (status, headers)
    error = identity_error(refusal)
    assert (error.status, error.headers, error.message) == (status, headers, str(refusal))


@pytest.mark.parametrize(
    ("refusal", "status", "message"),
    [
        (IdentityUnauthenticated(challenge="Bearer"), 401, "Authentication required"),
        (IdentityForbidden(), 403, "Forbidden"),
        (Unauthenticated(""), 401, "Authentication required"),
        (Forbidden(), 403, "Forbidden"),
    ],
)
def test_a_refusal_without_a_message_says_what_it_is(refusal: Exception, status: int, message: str) -> None:
    error = identity_error(refusal)
    assert (error.status, error.message) == (status, message)
