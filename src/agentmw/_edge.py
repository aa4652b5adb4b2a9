"""The HTTP edge in front of every face: ``Host`` and ``Origin`` (DNS rebinding), Content-Type, the declared size.

Each face's ASGI app (MCP, A2A with its card, AG-UI, approvals) is wrapped in one :class:`Edge` when the agent
makes it, so the checks hold however the face is reached: ``AgentMiddleware``, ``agent.asgi()``,
``agent.router()``/``agent.routes()``, or the bare app mounted by hand. Only the rendering of a refusal is the
face's own (a JSON-RPC error, a ``google.rpc`` status, FastAPI's ``{"detail": ...}``).

The rules (docs/fastapi-migration.md, "CORS, Origin and middleware order"):

- ``Host``: a local name (``localhost``, ``127.0.0.1``, ``[::1]``) at any port; an ``allowed_hosts`` entry
  ``name`` at the default port only (no port, ``:80`` or ``:443``); ``name:port`` at that port; ``name:*``
  at any port; ``"*"`` anything. Otherwise 421. A port is never dropped before comparing: with the audience
  built from ``Host`` (docs/auth.md), another server on the same name and another port is another resource.
- ``Origin`` (when sent): one in ``allowed_origins``; one whose host passes the ``Host`` rule; or one the host
  app's own ``CORSMiddleware`` lists (its ``allow_origins`` or ``allow_origin_regex``, never its ``"*"``).
  Otherwise 403.
- a body (POST, PUT, PATCH with one) that names a Content-Type names JSON (``application/json`` or
  ``application/<x>+json``), otherwise 415; one with no Content-Type is read as JSON, as FastAPI reads it.
  MCP: every POST names JSON, otherwise 400, as the MCP SDK answers.
- a declared ``Content-Length`` over the face's limit is 413 before anything is read; a body without one is
  counted as it is read (``_transport.read_body``), against the same limit.
- a :class:`~agentmw.errors.StoreUnavailable` that a face let through before its response started is 503 with
  ``Retry-After`` (``{"detail": ...}``), never a 500: the last line behind each face's own retryable answer.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, NamedTuple

from ._transport import INVALID_REQUEST, send_json, store_fault, store_unavailable
from ._types import ASGIApp, Receive, Scope, Send

__all__ = [
    "LOCAL_HOSTS",
    "Edge",
    "HostGuard",
    "Refusal",
    "Render",
    "cors_policy",
    "detail_refusal",
    "host_allowed",
    "origin_allowed",
    "split_host",
]

logger = logging.getLogger("agentmw")

LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
_DEFAULT_PORTS: Final = frozenset({None, "", "80", "443"})
_BODY_METHODS: Final = frozenset({"POST", "PUT", "PATCH"})
_EDGE_HEADERS: Final = frozenset(
    {b"host", b"origin", b"content-type", b"content-length", b"transfer-encoding"}
)
_MAX_VERDICTS: Final = (
    1024  # distinct (Host, Origin, app) triples remembered: arbitrary values must not grow memory
)


class Refusal(NamedTuple):
    """What the edge refuses: the HTTP status, a message for the caller, and the JSON-RPC code that carries it."""

    status: int
    message: str
    code: int = INVALID_REQUEST


Render = Callable[[Scope, Receive, Send, Refusal], Awaitable[None]]
"""Writes a refusal in the face's shape; the body is still unread (a JSON-RPC face may peek at its id)."""

FOREIGN_HOST: Final = Refusal(421, "Invalid Host header")
FOREIGN_ORIGIN: Final = Refusal(403, "Origin not allowed")


async def detail_refusal(scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
    """A refusal as FastAPI writes one, ``{"detail": message}``: AG-UI and the approvals endpoint."""
    await send_json(send, refusal.status, {"detail": refusal.message})


# --- Host and Origin ---------------------------------------------------------------------------------


def split_host(value: str) -> tuple[str, str | None]:
    """``Host`` (or an origin's authority) as its lower-case name and its port (None when it names none).

    ``[v6]:port`` keeps the brackets on the name; a value that is not ``name[:port]`` comes back whole,
    as a name no rule matches.
    """
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :] if end > 0 else "?"
        if not rest:
            return value, None
        if rest.startswith(":"):
            return value[: end + 1], rest[1:]
        return value, None
    if value.count(":") == 1:
        name, _, port = value.partition(":")
        return name, port
    return value, None


@functools.lru_cache(maxsize=64)
def _rules(
    allowed_hosts: tuple[str, ...],
) -> tuple[bool, frozenset[str], frozenset[str], frozenset[tuple[str, str]]]:
    """``allowed_hosts`` parsed once: (any host, names at any port, names at the default port, exact name:port)."""
    any_port: set[str] = set()
    default_port: set[str] = set()
    exact: set[tuple[str, str]] = set()
    for entry in allowed_hosts:
        name, port = split_host(entry)
        if port == "*":
            any_port.add(name)
        elif port:
            exact.add((name, port))
        else:
            default_port.add(name)
    return "*" in allowed_hosts, frozenset(any_port), frozenset(default_port), frozenset(exact)


def host_allowed(host: str, allowed_hosts: tuple[str, ...]) -> bool:
    """Whether a ``Host`` value passes: local names at any port, else the ``allowed_hosts`` entries (module doc)."""
    everything, any_port, default_port, exact = _rules(allowed_hosts)
    if everything:
        return True
    name, port = split_host(host)
    if port and not port.isdigit():
        return False
    if name in LOCAL_HOSTS or name in any_port:
        return bool(name)
    return (port in _DEFAULT_PORTS and name in default_port) or (name, port or "") in exact


def origin_allowed(origin: str, allowed_hosts: tuple[str, ...], allowed_origins: tuple[str, ...]) -> bool:
    """Whether an ``Origin`` passes on the agent's own settings: listed, or an http(s) origin whose host passes."""
    origin = origin.strip().rstrip("/").lower()
    if origin in allowed_origins:
        return True
    scheme, sep, authority = origin.partition("://")
    if not sep or scheme not in ("http", "https") or not authority or "/" in authority or "@" in authority:
        return False
    return host_allowed(authority, allowed_hosts)


def cors_policy(app: Any) -> Any:
    """The Starlette ``CORSMiddleware`` in ``app``'s built middleware stack, or in the chain below a middleware
    (``app`` itself, then each ``.app``); None when there is none (or nothing to look into)."""
    try:
        from starlette.middleware.cors import CORSMiddleware
    except ImportError:  # pragma: no cover - starlette is a dependency
        return None
    node = getattr(app, "middleware_stack", None) or app
    for _ in range(64):  # a middleware chain is short; a cycle must not hang the request
        if isinstance(node, CORSMiddleware):
            return node
        node = getattr(node, "app", None)
        if node is None:
            return None
    return None


def _cors_lists(cors: Any, origin: str) -> bool:
    """Whether the app's CORS policy names ``origin`` itself: its ``"*"`` does not widen the Origin check (any
    page could then drive the agent from its visitors' browsers), its list and its regex do."""
    if cors is None:
        return False
    regex = getattr(cors, "allow_origin_regex", None)
    if regex is not None and regex.fullmatch(origin):
        return True
    return origin in getattr(cors, "allow_origins", ())


class HostGuard:
    """The ``Host``/``Origin`` verdicts of one agent, shared by its faces and remembered per (Host, Origin, app):
    a server sees few distinct ones, and the host app's CORS policy is looked up once per app."""

    __slots__ = ("_cors", "_verdicts", "agent")

    def __init__(self, agent: Any) -> None:
        self.agent = agent  # read for allowed_hosts and allowed_origins, which may change after it is made
        self._verdicts: dict[tuple[bytes | None, bytes | None, Any], Refusal | None] = {}
        self._cors: dict[Any, Any] = {}

    def refusal(self, scope: Scope, host: bytes | None, origin: bytes | None) -> Refusal | None:
        app = scope.get("app")
        key = (host, origin, app)
        try:
            return self._verdicts[key]
        except KeyError:
            pass
        verdict = self._decide(app, host, origin)
        if len(self._verdicts) >= _MAX_VERDICTS:
            self._verdicts.clear()
        self._verdicts[key] = verdict
        return verdict

    def _decide(self, app: Any, host: bytes | None, origin: bytes | None) -> Refusal | None:
        agent = self.agent
        if host is None or not host_allowed(host.decode("latin-1"), agent.allowed_hosts):
            logger.debug(
                "refused Host %r: not a local name and not in Agent(allowed_hosts=...) (add it, with "
                "its port or ':*' when it is not 80 or 443)",
                host,
            )
            return FOREIGN_HOST
        if origin is None:
            return None
        text = origin.decode("latin-1")
        if origin_allowed(text, agent.allowed_hosts, agent.allowed_origins):
            return None
        if app is not None:
            if app not in self._cors:
                if len(self._cors) >= _MAX_VERDICTS:
                    self._cors.clear()
                self._cors[app] = cors_policy(app)
            if _cors_lists(self._cors[app], text.strip()):
                return None
        logger.debug(
            "refused Origin %r: not in Agent(allowed_origins=...) nor the app's CORS allow_origins", text
        )
        return FOREIGN_ORIGIN


# --- the edge -------------------------------------------------------------------------------------------


def _is_json(content_type: bytes) -> bool:
    if content_type == b"application/json":  # what every client sends: no split, no lower
        return True
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


class Edge:
    """One face's ASGI app behind the edge's checks; the face's own attributes stay reachable through it.

    ``render`` writes a refusal in the face's shape; ``body_limit`` is the face's size limit; ``json_posts``
    makes every POST need a JSON Content-Type, with or without a body, answered ``content_type_status``.
    """

    __slots__ = ("_limit_digits", "app", "body_limit", "content_type_status", "guard", "json_posts", "render")

    def __init__(
        self,
        app: ASGIApp,
        guard: HostGuard,
        render: Render,
        *,
        body_limit: int,
        json_posts: bool = False,
        content_type_status: int = 415,
    ) -> None:
        self.app = app
        self.guard = guard
        self.render = render
        self.body_limit = body_limit
        self.json_posts = json_posts
        self.content_type_status = content_type_status
        self._limit_digits = len(str(body_limit))

    def __getattr__(self, name: str) -> Any:  # sessions, ops, runs: the endpoint's own
        if name == "app":
            raise AttributeError(name)
        return getattr(self.app, name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.check(scope)
        if refusal is not None:
            await self.render(scope, receive, send, refusal)
            return
        try:
            await self.app(scope, receive, send)
        except Exception as exc:
            fault = store_fault(exc)
            if fault is None:
                raise
            logger.warning("agentmw: %s %s: %s", scope.get("method"), scope.get("path"), fault.message)
            try:  # refused by the server when the response had started: the original error goes on then
                await send_json(send, 503, {"detail": fault.message}, store_unavailable(fault).headers)
            except Exception:  # noqa: BLE001  (the response had started)
                raise exc from None
            return

    def check(self, scope: Scope) -> Refusal | None:
        """The first rule ``scope`` breaks, or None."""
        host = origin = content_type = length = None
        hosts = chunked = 0
        for name, value in scope["headers"]:  # names are lower-case bytes (ASGI); one pass, no dict built
            if name not in _EDGE_HEADERS:  # most headers: one set lookup instead of five comparisons
                continue
            if name == b"host":
                host = value
                hosts += 1
            elif name == b"origin":
                origin = value
            elif name == b"content-type":
                content_type = value
            elif name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = 1
        if hosts > 1:
            return FOREIGN_HOST  # two Host headers: which one the audience would be built from is ambiguous
        refusal = self.guard.refusal(scope, host, origin)
        if refusal is not None:
            return refusal
        method = scope.get("method")
        if method not in _BODY_METHODS:
            return None
        if self.json_posts and method == "POST":  # MCP: every POST says it is JSON, as the MCP SDK requires
            if content_type is None or not _is_json(content_type):
                return Refusal(self.content_type_status, "Content-Type must be application/json")
        elif (
            content_type is not None
            and not _is_json(content_type)
            and (chunked or (length is not None and length.strip() not in (b"", b"0")))
        ):
            # a body without a Content-Type is read as JSON, as FastAPI reads one; a form or text/plain is not,
            # which also keeps a browser's no-preflight "simple" request from carrying one
            return Refusal(self.content_type_status, "Content-Type must be application/json")
        if (
            length is not None
            and len(length) >= self._limit_digits
            and length.strip().isdigit()
            and int(length) > self.body_limit
        ):  # a shorter number is under the limit: no int() made
            return Refusal(413, f"Request body too large (the limit is {self.body_limit} bytes)")
        return None
