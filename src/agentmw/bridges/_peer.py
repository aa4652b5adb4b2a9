"""What every bridged peer shares: settings, outbound identity, framing, the circuit breaker, and start-up.

A peer (an :class:`~agentmw.bridges.A2APeer` or :class:`~agentmw.bridges.McpPeer`) is registered with
``agent.bridge(peer)``, which does no I/O. The first request to any face of the agent (or an explicit
``await agent.start_bridges()``) connects it: the protocol version it offers is checked against the pinned
one, its skills or tools are read, and each becomes a :class:`~agentmw.capability.Capability` of the agent.
From then on a bridged call runs through ``runtime.invoke`` like any local one.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from ..egress import Egress, EgressRefused
from ..errors import RegistrationError, Rejected, Retryable
from ..safety.framing import frame_text
from ..settings import Limits

if TYPE_CHECKING:
    from .._types import ASGIApp, Receive, Scope, Send
    from ..capability import Capability, CapabilityKind
    from ..context import Context
    from ..state import State

__all__ = [
    "Breaker",
    "BridgeError",
    "Bridged",
    "Bridges",
    "Peer",
    "ServiceAccount",
    "TokenExchange",
    "VersionMismatch",
]

logger = logging.getLogger("agentmw.bridges")

TokenExchange = Callable[[str | None, "Peer"], Awaitable["Mapping[str, str] | ServiceAccount"]]
Authorize = Callable[[str | None, str], "bool | Awaitable[bool]"]
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-]+")
_RETRY_START_SECONDS = 5.0


class _Traced(Protocol):
    def outbound_headers(self) -> dict[str, str]: ...


class Bridged(Protocol):
    """What a bridge reads from the agent it serves (``agent.py`` passes itself): the registry its peers'
    capabilities join, the shared state, the default text budget and the telemetry an outbound call continues."""

    @property
    def state(self) -> State: ...
    @property
    def limits(self) -> Limits: ...
    @property
    def telemetry(self) -> _Traced | None: ...
    def register(self, cap: Capability) -> Capability: ...
    def remove(self, kind: CapabilityKind, key: str) -> None: ...


class BridgeError(Exception):
    """A peer could not be connected (unreachable, refused by the egress policy, missing a feature)."""

    permanent = False


class VersionMismatch(BridgeError):
    """The peer does not offer the pinned protocol version. Never downgraded; never retried."""

    permanent = True

    def __init__(self, peer: str, protocol: str, expected: str, offered: Any) -> None:
        super().__init__(
            f"{protocol} peer {peer!r} offers protocol version {offered}, but this bridge is pinned to "
            f"{protocol} {expected}; it does not downgrade. Pin the version the peer offers, or "
            "upgrade the peer."
        )
        self.peer = peer
        self.expected = expected
        self.offered = offered


@dataclass(frozen=True, slots=True)
class ServiceAccount:
    """The outbound identity of a bridge: a name (for the log) and the headers that prove it."""

    name: str
    headers: Mapping[str, str] = field(default_factory=dict)


class Breaker:
    """A circuit breaker that opens on the *error rate* of a peer, never on its latency.

    Calls are counted over the last ``window_seconds``; when at least ``min_calls`` were made and
    ``failure_rate`` of them failed, the breaker opens for ``open_seconds``: calls fail at once as retryable.
    Then one trial call goes through (half-open); its success closes the breaker, its failure opens it again.
    A trial that never reports (its caller went away) is given up with :meth:`abandon`, and in any case expires
    after ``open_seconds``, so a lost trial cannot keep the peer cut off for every caller.
    A slow call that succeeds is a success, so a peer that is slow but working is never cut off. The defaults
    are wide on purpose.
    """

    def __init__(
        self,
        *,
        failure_rate: float = 0.5,
        min_calls: int = 20,
        window_seconds: float = 60.0,
        open_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < failure_rate <= 1:
            raise ValueError("failure_rate is a fraction in (0, 1]")
        self.failure_rate = failure_rate
        self.min_calls = min_calls
        self.window_seconds = window_seconds
        self.open_seconds = open_seconds
        self._clock = clock
        self._calls: deque[tuple[float, bool]] = deque()
        self._failures = 0
        self._open_until: float | None = None
        self._trial = False
        self._trial_at = 0.0

    @property
    def state(self) -> str:
        if self._open_until is None:
            return "closed"
        return "open" if self._clock() < self._open_until else "half-open"

    def check(self) -> float | None:
        """None when a call may go now; else the seconds until one may."""
        if self._open_until is None:
            return None
        now = self._clock()
        if now < self._open_until:
            return self._open_until - now
        if self._trial and now - self._trial_at < self.open_seconds:
            return 1.0  # one trial call is already out
        self._trial, self._trial_at = True, now
        return None

    def abandon(self) -> None:
        """The call let through ended without an answer from the peer (cancelled, or failed on our side): a
        trial it was is given up, so the next call may try."""
        self._trial = False

    def record(self, ok: bool) -> None:
        now = self._clock()
        if self._open_until is not None and self._trial:  # the half-open trial decides
            self._trial = False
            if ok:
                self._open_until = None
                self._calls.clear()
                self._failures = 0
            else:
                self._open_until = now + self.open_seconds
            return
        self._calls.append((now, ok))
        if not ok:
            self._failures += 1
        horizon = now - self.window_seconds
        while self._calls and self._calls[0][0] < horizon:
            if not self._calls.popleft()[1]:
                self._failures -= 1
        if len(self._calls) >= self.min_calls and self._failures >= self.failure_rate * len(self._calls):
            self._open_until = now + self.open_seconds
            logger.warning(
                "circuit breaker opened: %d of the last %d calls failed", self._failures, len(self._calls)
            )


def safe_name(text: str, limit: int = 64) -> str:
    """``text`` as a capability name (MCP's name rule), for names that come from a peer."""
    name = _NAME_CHARS.sub("_", text).strip("_.-")[:limit]
    return name or "peer"


class Peer(ABC):
    """Settings every bridged peer takes (see :class:`~agentmw.bridges.A2APeer`, :class:`~agentmw.bridges.McpPeer`).

    Args:
        url: the peer's address.
        name: the peer's name in capability names, logs and frames (default: derived from the peer).
        prefix: put before every capability name taken from the peer (``"legal."``), to keep them apart from
            local ones and other peers'.
        credential: the outbound identity: a :class:`ServiceAccount`, or a token-exchange hook
            ``async (identity, peer) -> headers | ServiceAccount`` called per call with the inbound caller's
            identity. None sends no credential. The inbound caller's own token is never passed on.
        authorize: ``(identity, capability) -> bool`` (may be async): whether this inbound caller may use the
            bridged capability; None lets every caller the agent serves.
        allow: the egress policy for every URL of this peer (:class:`agentmw.egress.Egress`); default: public
            addresses only.
        timeout: seconds for one request to the peer (connect, read).
        breaker: the circuit breaker (:class:`Breaker`); one per peer.
        retries: retries of a call that failed in transport; 0 (the default) never retries. Retries carry an
            idempotency key, so a peer that honours it runs the call once.
        budget_chars: remote text is framed and cut to this many characters (default: the agent's
            ``untrusted_budget_chars``).
        description_budget: remote descriptions (card, tool lists) are framed and cut to this many characters.
        max_response_bytes: the largest answer (a response body, one stream event) read from an A2A peer; a
            larger one is refused as a fault of the peer, so a peer cannot exhaust memory. (The ``mcp`` client
            reads an MCP peer's answers itself.)

    Starting the peer (reading its card or tool lists) has an overall deadline of ``timeout`` seconds, so a peer
    that answers one byte at a time cannot hold the agent's faces, which wait for the first start.
    """

    protocol = "peer"

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        prefix: str = "",
        credential: Any = None,
        authorize: Authorize | None = None,
        allow: Egress | None = None,
        timeout: float = 30.0,
        breaker: Breaker | None = None,
        retries: int = 0,
        budget_chars: int | None = None,
        description_budget: int = 2000,
        max_response_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        if not isinstance(url, str) or not urlsplit(url).scheme:
            raise ValueError(f"a peer needs an absolute URL, not {url!r}")
        if credential is not None and not isinstance(credential, ServiceAccount) and not callable(credential):
            raise TypeError("credential is a ServiceAccount or an async (identity, peer) -> headers hook")
        self.url = url.rstrip("/")
        self.name = safe_name(name) if name else None
        self.prefix = prefix
        self.credential = credential
        self.authorize = authorize
        self.allow = allow or Egress()
        self.timeout = timeout
        self.breaker = breaker or Breaker()
        self.retries = retries
        self.budget_chars = budget_chars
        self.description_budget = description_budget
        self.max_response_bytes = max_response_bytes
        self.agent: Bridged | None = None
        self.capabilities: list[Capability] = []
        self.error: BaseException | None = None
        self.started = False
        self.attempted = False
        self._retry_at = 0.0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r}, name={self.name!r})"

    # --- start-up ------------------------------------------------------------------------------------
    @abstractmethod
    async def _connect(self) -> list[Capability]:
        """Check the version, read the peer's capabilities and build them (no registration)."""

    async def start(self) -> None:
        """Connect, check the pinned version and register the peer's capabilities with the agent."""
        if self.started:
            return
        if self.error is not None and getattr(self.error, "permanent", False):
            raise self.error
        self.attempted = True
        try:
            await self.allow.acheck(self.url, f"{self.protocol} peer")
            async with asyncio.timeout(self.timeout):
                capabilities = await self._connect()
        except TimeoutError as exc:  # a peer that trickles its answer: tried again later, like a down one
            self.error = BridgeError(
                f"{self.protocol} peer at {self.url} did not finish answering within {self.timeout:g} s"
            )
            self._retry_at = time.monotonic() + _RETRY_START_SECONDS
            raise self.error from exc
        except EgressRefused as exc:
            self.error = BridgeError(str(exc))
            self.error.permanent = True
            raise self.error from exc
        except BridgeError as exc:
            self.error = exc
            self._retry_at = time.monotonic() + _RETRY_START_SECONDS
            raise
        except (
            Exception
        ) as exc:  # a peer that answers something unexpected: tried again later, like a down one
            self.error = BridgeError(f"{self.protocol} peer at {self.url}: {type(exc).__name__}: {exc}")
            self._retry_at = time.monotonic() + _RETRY_START_SECONDS
            raise self.error from exc
        assert self.agent is not None
        added: list[Capability] = []
        try:
            for capability in capabilities:
                added.append(self.agent.register(capability))
        except RegistrationError as exc:
            for capability in added:
                self.agent.remove(
                    capability.kind, capability.uri_template or capability.uri or capability.name
                )
            self.error = BridgeError(f"{self.protocol} peer {self.name!r}: {exc}; give it a prefix=")
            self.error.permanent = True
            raise self.error from exc
        self.capabilities = added
        self.error = None
        self.started = True
        logger.info(
            "bridged %s peer %s (%s): %d capabilities", self.protocol, self.name, self.url, len(added)
        )

    @property
    def due(self) -> bool:
        """Whether a start should be tried now (not started, not failed for good, not waiting to retry)."""
        if self.started:
            return False
        if self.error is not None:
            return not getattr(self.error, "permanent", False) and time.monotonic() >= self._retry_at
        return True

    # --- per call ------------------------------------------------------------------------------------
    def budget(self) -> int:
        if self.budget_chars is not None:
            return self.budget_chars
        return self.agent.limits.max_untrusted_chars if self.agent is not None else 20_000

    def source(self, what: str) -> str:
        return f"{self.protocol} peer {self.name} {what}"

    def frame(self, text: str, what: str, budget: int | None = None) -> str:
        """Remote text as untrusted data: escaped, cut to the budget, framed with its source (peer and what)."""
        return frame_text(text, self.source(what), self.budget() if budget is None else budget)

    def describe(self, text: str, what: str) -> str:
        """A remote description (card, tool list) framed and cut to ``description_budget``."""
        return self.frame(text, what, self.description_budget) if text else ""

    async def outbound_headers(self, ctx: Context, what: str) -> dict[str, str]:
        """The headers of one outbound call for ``ctx``'s caller, after the caller is allowed; logs who calls as
        whom (logger ``agentmw.bridges``). Only the configured credential is sent, never the inbound one."""
        credential, trace = await self.outbound(ctx, what)
        return {**credential, **trace}

    async def outbound(self, ctx: Context, what: str) -> tuple[dict[str, str], dict[str, str]]:
        """:meth:`outbound_headers` in two: the credential's headers (who the bridge calls as) and the trace's
        (this call's own), for a connection kept per credential."""
        identity = ctx.caller
        if self.authorize is not None:
            allowed: Any = self.authorize(identity, what)
            if inspect.isawaitable(allowed):
                allowed = await allowed
            if not allowed:
                logger.info(
                    "bridge refused: %s may not use %s peer %s %s", identity, self.protocol, self.name, what
                )
                raise Rejected(
                    f"{identity or 'this caller'} may not use {what} of the {self.protocol} peer "
                    f"{self.name}. Nothing was sent."
                )
        credential = self.credential
        if credential is None:
            as_whom, headers = "nobody (no credential)", {}
        elif isinstance(credential, ServiceAccount):
            as_whom, headers = f"service account {credential.name}", dict(credential.headers)
        else:
            exchanged = await credential(identity, self)
            if isinstance(exchanged, ServiceAccount):
                as_whom, headers = f"service account {exchanged.name}", dict(exchanged.headers)
            else:
                as_whom, headers = (
                    f"token exchange ({getattr(credential, '__name__', 'hook')})",
                    dict(exchanged),
                )
        telemetry = self.agent.telemetry if self.agent is not None else None
        # the call continues the caller's trace (docs/observability.md)
        trace = telemetry.outbound_headers() if telemetry is not None else {}
        logger.info(
            "bridge identity: %s calls as %s to %s peer %s, %s",
            identity or "anonymous",
            as_whom,
            self.protocol,
            self.name,
            what,
            extra={
                "bridge_caller": identity,
                "bridge_as": as_whom,
                "bridge_peer": self.name,
                "bridge_target": what,
            },
        )
        return headers, trace

    def check_breaker(self) -> None:
        wait = self.breaker.check()
        if wait is not None:
            raise Retryable(
                f"The {self.protocol} peer {self.name} is failing too often; the bridge stopped "
                "calling it for a while.",
                retry_after=round(wait, 1),
            )


class _Gate:
    """The faces' endpoints behind this: the first request starts the agent's bridges (no lifespan needed)."""

    __slots__ = ("app", "bridges")

    def __init__(self, app: ASGIApp, bridges: Bridges) -> None:
        self.app = app
        self.bridges = bridges

    def __getattr__(self, name: str) -> Any:  # the endpoint's own attributes (sessions, ops) stay reachable
        return getattr(self.app, name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.bridges.pending:
            await self.bridges.admit()
        await self.app(scope, receive, send)


class Bridges:
    """The peers of one agent and their start-up."""

    def __init__(self, agent: Bridged) -> None:
        self.agent = agent
        self.peers: list[Peer] = []
        self._lock: asyncio.Lock | None = None
        self._lock_loop: Any = None
        self._retrying: asyncio.Future[None] | None = None

    @property
    def pending(self) -> bool:
        return any(peer.due for peer in self.peers)

    async def admit(self) -> None:
        """Before a request: a peer never tried yet is started first (bounded by its deadline), so the first
        request sees its capabilities; a retry after a failure runs in the background, so a peer that is down
        or slow never holds the requests of the rest of the agent."""
        if any(peer.due and not peer.attempted for peer in self.peers):
            await self.start(quiet=True)
            return
        retrying = self._retrying
        if retrying is None or retrying.done() or retrying.get_loop() is not asyncio.get_running_loop():
            self._retrying = asyncio.ensure_future(self.start(quiet=True))

    def add(self, peer: Peer) -> Peer:
        if not isinstance(peer, Peer):
            raise TypeError(f"agent.bridge() takes an A2APeer or an McpPeer, not {peer!r}")
        if peer.agent is not None:
            raise ValueError(f"{peer!r} is already bridged to an agent")
        peer.agent = self.agent
        self.peers.append(peer)
        return peer

    def gate(self, app: ASGIApp) -> ASGIApp:
        return app if isinstance(app, _Gate) else _Gate(app, self)

    async def start(self, *, quiet: bool = False) -> None:
        """Start every peer that is due, concurrently. Raises the first failure unless ``quiet`` (then each is
        logged; a peer that could not be reached is tried again on a later request, a version mismatch never)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        async with self._lock:
            due = [peer for peer in self.peers if peer.due]
            if not due:
                failed = [p.error for p in self.peers if p.error is not None and not p.started]
                if failed and not quiet:
                    raise failed[0]
                return
            results = await asyncio.gather(*(peer.start() for peer in due), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for peer, result in zip(due, results, strict=True):
            if isinstance(result, BaseException):
                logger.error(
                    "could not bridge %s peer %s (%s): %s",
                    peer.protocol,
                    peer.name or peer.url,
                    peer.url,
                    result,
                    exc_info=result if not isinstance(result, BridgeError) else None,
                )
        if errors and not quiet:
            raise errors[0]
