"""The egress policy: where agentmw may send a request of its own (push notifications, bridged peers).

One rule for every outbound URL, so push notifications and bridges cannot drift apart:

- only absolute ``http``/``https`` URLs with a host;
- a host named in ``allow_hosts`` (exactly, or by a ``*.example.com`` suffix pattern) is allowed, whatever it
  resolves to: the operator named it;
- otherwise the name is resolved and *every* address it resolves to is checked: an address inside
  ``allow_networks`` is allowed; a private, loopback, link-local, reserved, multicast or unspecified address
  is refused unless ``allow_private``; a public one is allowed unless ``public_hosts=False`` (then only the
  allowlist passes).

Resolving the name is what stops a public-looking name that points inside the network (SSRF through DNS).
:meth:`Egress.resolve` returns the addresses it checked, so a caller can connect to exactly those: a name that
changes its answer between the check and the connection (DNS rebinding) then cannot move the request
(push notifications do this, ``agentmw.a2a.push``). A caller that lets its HTTP client resolve the name again
is not covered: put such peers behind an allowlisted name or network.

Names are resolved off the event loop, on a few daemon threads of this module's own (so a lookup that never
answers holds neither the loop nor the default executor, nor the process at exit), with a timeout.
"""

from __future__ import annotations

import asyncio
import ipaddress
import queue
import socket
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Egress", "EgressRefused", "Target", "check_url", "is_private", "resolve"]

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class EgressRefused(ValueError):
    """An outbound URL the egress policy does not allow; the message says which rule refused it."""


def is_private(address: str) -> bool:
    """Whether ``address`` (an IP literal) is anything but a public unicast address.

    Public means globally reachable in IANA's special-purpose registries (``is_global``): so the shared address
    space ``100.64.0.0/10`` (carrier-grade NAT, where Alibaba Cloud's metadata service lives), benchmarking and
    documentation networks are not public, besides the private, loopback and link-local ranges. An IPv6 address
    that carries an IPv4 one (IPv4-mapped, 6to4, Teredo) is judged by that IPv4 address too."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        teredo = ip.teredo
        for inner in (ip.ipv4_mapped, ip.sixtofour, *(teredo or ())):
            if inner is not None and is_private(str(inner)):
                return True
    return (
        not ip.is_global
        or ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


def _networks(values: Iterable[str | _Network]) -> tuple[_Network, ...]:
    return tuple(
        v
        if isinstance(v, (ipaddress.IPv4Network, ipaddress.IPv6Network))
        else ipaddress.ip_network(v, strict=False)
        for v in values
    )


def _host_allowed(host: str, allow_hosts: Iterable[str]) -> bool:
    for allowed in allow_hosts:
        if allowed == host or (allowed.startswith("*.") and host.endswith(allowed[1:])):
            return True
    return False


def _split(url: Any, what: str) -> tuple[str, str, int]:
    if not isinstance(url, str):
        raise EgressRefused(f"{what} url must be a string")
    try:  # urlsplit and .port raise ValueError for a malformed IPv6 literal or port
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise EgressRefused(f"{what} url is malformed: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EgressRefused(f"{what} url must be an absolute http(s) URL")
    return parts.hostname.lower(), parts.scheme, port or (443 if parts.scheme == "https" else 80)


def _refuse(
    url: str,
    addresses: Iterable[str],
    *,
    allow_networks: Sequence[_Network],
    allow_private: bool,
    public_hosts: bool,
    what: str,
) -> None:
    """Raise :class:`EgressRefused` unless every one of ``addresses`` (what the URL's host resolved to) is allowed."""
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if any(ip in network for network in allow_networks):
            continue
        if is_private(address):
            if allow_private:
                continue
            raise EgressRefused(
                f"{what} url {url!r} points to a private, loopback or link-local address; allow it "
                "explicitly to use it"
            )
        if not public_hosts:
            raise EgressRefused(f"{what} url {url!r} is not on the egress allowlist (hosts and networks)")


def check_url(
    url: Any,
    *,
    allow_hosts: Iterable[str] = (),
    allow_networks: Iterable[str | _Network] = (),
    allow_private: bool = False,
    public_hosts: bool = True,
    what: str = "outbound",
) -> str:
    """``url`` if the policy allows a request to it; :class:`EgressRefused` otherwise. Resolves the name
    (blocking: use :meth:`Egress.resolve` or :meth:`Egress.acheck` on an event loop)."""
    host, _, port = _split(url, what)
    checked: str = url  # _split refused anything but a string
    if _host_allowed(host, allow_hosts) or (allow_private and public_hosts):
        return checked  # nothing the name resolves to could be refused
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)}
    except (socket.gaierror, UnicodeError) as exc:
        raise EgressRefused(f"{what} host {host!r} does not resolve") from exc
    _refuse(
        url,
        addresses,
        allow_networks=_networks(allow_networks),
        allow_private=allow_private,
        public_hosts=public_hosts,
        what=what,
    )
    return checked


# --- resolving off the loop ------------------------------------------------------------------------------------

RESOLVE_TIMEOUT_SECONDS = 5.0  # the default wait for a name's addresses (Egress, PushPolicy)
_RESOLVER_THREADS = 4  # lookups at once; more wait in the queue (each still bounded by its caller's timeout)
_MAX_PENDING_LOOKUPS = 256  # past this many queued lookups, a new one is refused at once

_Job = tuple[str, int, asyncio.AbstractEventLoop, "asyncio.Future[list[Any]]"]


def _settle(future: asyncio.Future[list[Any]], infos: list[Any] | None, error: BaseException | None) -> None:
    if future.done():  # its caller stopped waiting (a timeout)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(infos or [])


class _Resolver:
    """``getaddrinfo`` on a few daemon threads, fed by a bounded queue.

    Not the loop's default executor: lookups that never answer would fill it, and ``asyncio.to_thread`` (file
    and database work) waits behind them; not pool threads the interpreter joins at exit, which would wait for
    the system resolver's own timeouts."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, job: _Job) -> None:
        if self._jobs.qsize() >= _MAX_PENDING_LOOKUPS:
            raise EgressRefused(
                f"too many name lookups are pending ({_MAX_PENDING_LOOKUPS}); try again later"
            )
        with self._lock:
            if self._idle == 0 and self._threads < _RESOLVER_THREADS:
                self._threads += 1
                self._idle += 1
                threading.Thread(
                    target=self._run, name=f"agentmw-resolver-{self._threads}", daemon=True
                ).start()
        self._jobs.put(job)

    def _run(self) -> None:
        while True:
            host, port, loop, future = self._jobs.get()
            with self._lock:
                self._idle -= 1
            try:
                if future.cancelled():  # its caller gave up while it waited in the queue
                    continue
                infos: list[Any] | None = None
                error: BaseException | None = None
                try:
                    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
                except BaseException as exc:  # noqa: BLE001  # handed to the caller, whatever it is
                    error = exc
                try:
                    loop.call_soon_threadsafe(_settle, future, infos, error)
                except RuntimeError:  # the loop is closed: nobody waits for the answer
                    pass
            finally:
                with self._lock:
                    self._idle += 1


_RESOLVER: _Resolver | None = None
_RESOLVER_LOCK = threading.Lock()


def _resolver() -> _Resolver:
    global _RESOLVER
    with _RESOLVER_LOCK:
        if _RESOLVER is None:
            _RESOLVER = _Resolver()
        return _RESOLVER


async def resolve(
    host: str, port: int, *, timeout: float = RESOLVE_TIMEOUT_SECONDS, what: str = "outbound"
) -> tuple[str, ...]:
    """The addresses ``host`` resolves to for TCP, in the resolver's order, without blocking the loop;
    :class:`EgressRefused` when it does not resolve, or not within ``timeout`` seconds."""
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    else:
        return (host,)  # a literal address: nothing to look up
    loop = asyncio.get_running_loop()
    future: asyncio.Future[list[Any]] = loop.create_future()
    _resolver().submit((host, port, loop, future))
    try:
        infos = await asyncio.wait_for(future, timeout)
    except TimeoutError as exc:
        raise EgressRefused(f"{what} host {host!r} did not resolve within {timeout:g} s") from exc
    except (socket.gaierror, UnicodeError) as exc:
        raise EgressRefused(f"{what} host {host!r} does not resolve") from exc
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise EgressRefused(f"{what} host {host!r} does not resolve")
    return addresses


@dataclass(frozen=True)
class Target:
    """Where a checked URL may be sent: ``addresses`` are the ones the policy checked, in the resolver's order,
    to connect to instead of resolving the name again; empty when the host is allowed by name (or nothing
    could be refused), so a client may connect to it as usual."""

    url: str
    host: str
    port: int
    addresses: tuple[str, ...] = ()


class Egress:
    """Where outbound requests may go (docs/bridges.md, "Egress and identity").

    Args:
        allow_hosts: host names (or ``*.suffix`` patterns) allowed whatever they resolve to.
        allow_networks: CIDR networks (``"10.20.0.0/16"``, ``"127.0.0.1/32"``) whose addresses are allowed.
        allow_private: allow private, loopback and link-local addresses everywhere (development only).
        public_hosts: allow any host whose addresses are all public; ``False`` makes the allowlist the only way.
        resolve_timeout_seconds: how long a name may take to resolve before the URL is refused.
    """

    __slots__ = ("allow_hosts", "allow_networks", "allow_private", "public_hosts", "resolve_timeout_seconds")

    def __init__(
        self,
        *,
        allow_hosts: Iterable[str] = (),
        allow_networks: Iterable[str | _Network] = (),
        allow_private: bool = False,
        public_hosts: bool = True,
        resolve_timeout_seconds: float = RESOLVE_TIMEOUT_SECONDS,
    ) -> None:
        self.allow_hosts = frozenset(h.lower() for h in allow_hosts)
        self.allow_networks = _networks(allow_networks)
        self.allow_private = allow_private
        self.public_hosts = public_hosts
        self.resolve_timeout_seconds = resolve_timeout_seconds

    def __repr__(self) -> str:
        return (
            f"Egress(allow_hosts={sorted(self.allow_hosts)!r}, allow_networks={[str(n) for n in self.allow_networks]!r}, "
            f"allow_private={self.allow_private!r}, public_hosts={self.public_hosts!r})"
        )

    def names(self, host: str) -> bool:
        """Whether ``host`` is named in ``allow_hosts`` (exactly or by a ``*.suffix`` pattern)."""
        return _host_allowed(host.lower(), self.allow_hosts)

    def check(self, url: Any, what: str = "outbound") -> str:
        """``url`` if allowed, else :class:`EgressRefused`; resolves the host name, blocking."""
        return check_url(
            url,
            allow_hosts=self.allow_hosts,
            allow_networks=self.allow_networks,
            allow_private=self.allow_private,
            public_hosts=self.public_hosts,
            what=what,
        )

    async def resolve(self, url: Any, what: str = "outbound") -> Target:
        """The :class:`Target` of ``url`` if allowed, else :class:`EgressRefused`: the name is resolved off the
        loop (within ``resolve_timeout_seconds``), and every address it resolves to is checked."""
        host, _, port = _split(url, what)
        if _host_allowed(host, self.allow_hosts) or (self.allow_private and self.public_hosts):
            return Target(url, host, port)
        addresses = await resolve(host, port, timeout=self.resolve_timeout_seconds, what=what)
        _refuse(
            url,
            addresses,
            allow_networks=self.allow_networks,
            allow_private=self.allow_private,
            public_hosts=self.public_hosts,
            what=what,
        )
        return Target(url, host, port, addresses)

    async def acheck(self, url: Any, what: str = "outbound") -> str:
        """:meth:`check` for an event loop: the name is resolved without blocking it."""
        return (await self.resolve(url, what)).url
