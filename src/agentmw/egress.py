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
A name that changes its answer between this check and the connection (DNS rebinding) is not covered here:
put such peers behind an allowlisted name or network.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Egress", "EgressRefused", "check_url", "is_private"]

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
    return not ip.is_global or ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or \
        ip.is_multicast or ip.is_unspecified


def _networks(values: Iterable[str | _Network]) -> tuple[_Network, ...]:
    return tuple(v if isinstance(v, (ipaddress.IPv4Network, ipaddress.IPv6Network))
                 else ipaddress.ip_network(v, strict=False) for v in values)


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


def _judge(url: str, host: str, addresses: set[str], *, allow_networks: Sequence[_Network], allow_private: bool,
           public_hosts: bool, what: str) -> str:
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if any(ip in network for network in allow_networks):
            continue
        if is_private(address):
            if allow_private:
                continue
            raise EgressRefused(f"{what} url {url!r} points to a private, loopback or link-local address; allow it "
                                "explicitly to use it")
        if not public_hosts:
            raise EgressRefused(f"{what} url {url!r} is not on the egress allowlist (hosts and networks)")
    return url


def check_url(url: Any, *, allow_hosts: Iterable[str] = (), allow_networks: Iterable[str | _Network] = (),
              allow_private: bool = False, public_hosts: bool = True, what: str = "outbound") -> str:
    """``url`` if the policy allows a request to it; :class:`EgressRefused` otherwise. Resolves the name
    (blocking: use :meth:`Egress.acheck` on an event loop)."""
    host, _, port = _split(url, what)
    if _host_allowed(host, allow_hosts) or (allow_private and public_hosts):
        return url  # nothing the name resolves to could be refused
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)}
    except socket.gaierror as exc:
        raise EgressRefused(f"{what} host {host!r} does not resolve") from exc
    return _judge(url, host, addresses, allow_networks=_networks(allow_networks), allow_private=allow_private,
                  public_hosts=public_hosts, what=what)


class Egress:
    """Where outbound requests may go (docs/bridges.md, "Egress and identity").

    Args:
        allow_hosts: host names (or ``*.suffix`` patterns) allowed whatever they resolve to.
        allow_networks: CIDR networks (``"10.20.0.0/16"``, ``"127.0.0.1/32"``) whose addresses are allowed.
        allow_private: allow private, loopback and link-local addresses everywhere (development only).
        public_hosts: allow any host whose addresses are all public; ``False`` makes the allowlist the only way.
    """

    __slots__ = ("allow_hosts", "allow_networks", "allow_private", "public_hosts")

    def __init__(self, *, allow_hosts: Iterable[str] = (), allow_networks: Iterable[str | _Network] = (),
                 allow_private: bool = False, public_hosts: bool = True) -> None:
        self.allow_hosts = frozenset(h.lower() for h in allow_hosts)
        self.allow_networks = _networks(allow_networks)
        self.allow_private = allow_private
        self.public_hosts = public_hosts

    def __repr__(self) -> str:
        return (f"Egress(allow_hosts={sorted(self.allow_hosts)!r}, allow_networks={[str(n) for n in self.allow_networks]!r}, "
                f"allow_private={self.allow_private!r}, public_hosts={self.public_hosts!r})")

    def names(self, host: str) -> bool:
        """Whether ``host`` is named in ``allow_hosts`` (exactly or by a ``*.suffix`` pattern)."""
        return _host_allowed(host.lower(), self.allow_hosts)

    def check(self, url: Any, what: str = "outbound") -> str:
        """``url`` if allowed, else :class:`EgressRefused`; resolves the host name, blocking."""
        return check_url(url, allow_hosts=self.allow_hosts, allow_networks=self.allow_networks,
                         allow_private=self.allow_private, public_hosts=self.public_hosts, what=what)

    async def acheck(self, url: Any, what: str = "outbound") -> str:
        """:meth:`check` for an event loop: the name is resolved without blocking it."""
        host, _, port = _split(url, what)
        if _host_allowed(host, self.allow_hosts) or (self.allow_private and self.public_hosts):
            return url
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise EgressRefused(f"{what} host {host!r} does not resolve") from exc
        return _judge(url, host, {info[4][0] for info in infos}, allow_networks=self.allow_networks,
                      allow_private=self.allow_private, public_hosts=self.public_hosts, what=what)
