"""The handshake era (2024-11-05 … 2025-11-25): ``initialize``, sessions, server-to-client requests.

Sessions are records in the agent's shared state (``agent.state``, see ``docs/state.md``), so any replica
that shares the store answers a session opened on another. Each replica keeps the sessions it served
lately in a small table (:class:`SessionStore`): a request on a session seen here less than
``SessionStore.cache_seconds`` ago reads nothing from the store; an older one, or a miss, costs one read.
What only the process that holds it can do (a running call, a question waiting for its answer, a GET
stream) stays local, and the replicas reach it through the store's bus: one channel per agent carries
list changes and resource updates, the end of a session, changed session records, cancellations, and the
client's answers to server-to-client requests. Each session is bound to the credential that opened it: a
request carrying another ``Authorization`` gets 404, exactly as an unknown session does. With
``Agent(auth=...)``, a session opened anonymously is claimed, once, by its first verified caller (who logged in
mid-session): a compare-and-set on the record, after which it is bound to that identity (docs/auth.md).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from .._bounded import BoundedTable
from .._transport import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    classify_rpc,
    dumps_finite,
    sse_comment,
    stream_sse,
    wait_for_exit,
)
from .._types import Receive, Scope, Send
from ..context import InputRequest
from ..errors import AccessRefused
from ..identity import caller_from_headers
from ..lifecycle import Background, BusListener, Leases, Records, every, limit, publish
from ..settings import Limits, Timing
from ..state import State, Versioned
from ._cancel import CallGuard
from ._wire import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE,
    SESSION_NOT_FOUND,
    Exchange,
    JsonRpcError,
    error_body,
    fault_body,
    json_response,
    plain_response,
)
from .apps import apps_extension
from .convert import input_request
from .methods import LOG_RANK, Call, ClientNotAnswered, dispatch, parse_input_response
from .resume import ResumeRefused, StreamLogs
from .skills import skills_extension

if TYPE_CHECKING:
    from .._wiring import Listener
    from ..safety import Budgets
    from .endpoint import Incoming, McpEndpoint

__all__ = ["Session", "SessionStore", "SessionsHost", "handle"]

logger = logging.getLogger("agentmw")
_SESSION_HEADER = b"mcp-session-id"
_CLIENT_ANSWER_TIMEOUT = 600.0
MAX_SUBSCRIPTIONS = 1000
"""Resource URIs one session may subscribe to (its record holds them all)."""
QUESTION_RESUME_SECONDS = 60.0
"""A question on a resumable stream whose connection was cut still waits this long for its answer."""
TAKEOVER_SECONDS = 5.0
"""A resumed GET stream waits this long for the stream it resumes to end (its replica to see the client gone)."""
TAKEOVER_POLL_SECONDS = 0.05
STREAM_LEASE_SECONDS = 30.0
"""A GET stream holds a lease on its session, renewed while it is open: a second GET on any replica gets
409 until the stream ends, or until this long after its replica died."""
_END = None  # put on a GET stream's queue: the stream ends


class SessionsHost(Protocol):
    """What a :class:`SessionStore` reads of the agent that builds it (``agentmw.Agent`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def state(self) -> State: ...
    @property
    def budgets(self) -> Budgets: ...
    @property
    def limits(self) -> Limits: ...
    @property
    def timing(self) -> Timing: ...

    def subscribe(self, listener: Listener) -> Callable[[], None]: ...


class _Shared(NamedTuple):
    """What a :class:`SessionStore` keeps in the shared state, made with it on first use."""

    state: State
    records: Records  # the session records (``mcp.sessions.<agent>``), compare-and-set on their versions
    streams: Leases  # a lease per open GET stream (``mcp.streams.<agent>``): one per session across replicas
    bus: BusListener  # the agent's channel (``agentmw.mcp.<agent>``), one listener per event loop
    logs: StreamLogs  # the resumable SSE streams' events (``mcp.events.<agent>``, resume.py)


def _fingerprint(headers: Mapping[str, str]) -> str:
    return hashlib.sha256(headers.get("authorization", "").encode()).hexdigest()


VERIFIED = "principal:"
"""How the credential of a session bound to a verified caller begins (``principal:<identity>``, endpoint.py)."""
ANONYMOUS = _fingerprint({})
"""The credential of a session opened without ``Authorization``: its first verified caller may claim it."""


def _put(queue: asyncio.Queue[Any], message: Any) -> None:
    try:
        queue.put_nowait(message)
    except asyncio.QueueFull:  # a stream this far behind loses notifications, never the server's memory
        if message is _END:
            while not queue.empty():
                queue.get_nowait()
            queue.put_nowait(_END)
        else:
            logger.debug("MCP GET stream full: a notification was dropped")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` on ``loop``: now when it is this thread's loop, else soon, thread-safely."""
    if loop is _running_loop():
        fn(*args)
    elif not loop.is_closed():
        loop.call_soon_threadsafe(fn, *args)


class Session:
    """One session as this replica knows it: the shared fields (a copy of the record, version ``rev``) and
    what only this process holds (running calls, questions waiting for answers, the GET stream)."""

    __slots__ = (
        "_ids",
        "_prefix",
        "bytes",
        "caller",
        "checked",
        "client_capabilities",
        "client_info",
        "closed",
        "credential",
        "id",
        "inflight",
        "last_seen",
        "log_level",
        "pending",
        "rev",
        "stream",
        "stream_loop",
        "subscriptions",
        "version",
        "written",
    )

    def __init__(
        self,
        version: str,
        client_capabilities: dict[str, Any],
        client_info: Any,
        credential: str,
        session_id: str | None = None,
        replica: str = "",
    ) -> None:
        self.id = session_id or secrets.token_hex(16)
        self.version = version
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        self.log_level: str | None = "debug"
        self.credential = credential
        self.last_seen = time.monotonic()
        self.pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.inflight: dict[Any, CallGuard] = {}
        self.stream: asyncio.Queue[dict[str, Any] | None] | None = None
        self.stream_loop: asyncio.AbstractEventLoop | None = None
        self.subscriptions: set[str] = set()
        self._ids = itertools.count(1)
        self._prefix = f"agentmw-{replica[:8]}-" if replica else "agentmw-"  # unique across replicas
        self.caller: str | None = None  # bound, like the session, to its credential
        self.rev = 0  # the record's version this copy reflects
        self.checked = self.written = self.last_seen  # when the record was last read / written (monotonic)
        self.closed = False
        self.bytes = 0  # its clientInfo and capabilities, encoded (SessionStore.oversized; docs/limits.md)

    def next_request_id(self) -> str:
        return f"{self._prefix}{next(self._ids)}"

    def record(self) -> dict[str, Any]:
        """The shared part, as stored."""
        return {
            "version": self.version,
            "capabilities": self.client_capabilities,
            "clientInfo": self.client_info,
            "logLevel": self.log_level,
            "credential": self.credential,
            "caller": self.caller,
            "subscriptions": sorted(self.subscriptions),
            "seen": time.time(),
        }

    @classmethod
    def from_record(cls, session_id: str, value: Mapping[str, Any], version: int, replica: str) -> Session:
        session = cls(
            str(value.get("version") or LATEST_HANDSHAKE),
            dict(value.get("capabilities") or {}),
            value.get("clientInfo"),
            str(value.get("credential") or ""),
            session_id,
            replica,
        )
        session.apply(value, version)
        seen = value.get("seen")
        if isinstance(seen, (int, float)):  # when it was written, on this replica's monotonic clock
            session.written = time.monotonic() - max(0.0, time.time() - seen)
        return session

    def apply(self, value: Mapping[str, Any], version: int) -> None:
        """Take the shared fields another replica may have changed."""
        level = value.get("logLevel")
        self.log_level = level if isinstance(level, str) else None
        self.subscriptions = {u for u in value.get("subscriptions") or () if isinstance(u, str)}
        caller = value.get("caller")
        self.caller = caller if isinstance(caller, str) else self.caller
        credential = value.get("credential")
        if isinstance(credential, str) and credential != self.credential:  # claimed on another replica
            self.credential = credential
            self.caller = caller if isinstance(caller, str) else None
            self.end_stream()
        self.rev = version
        self.checked = time.monotonic()

    def close(self) -> None:
        """The session ended: its running calls are cancelled, its questions fail, its GET stream ends."""
        self.closed = True
        for scope in self.inflight.values():
            _on_loop(scope.task.get_loop(), scope.cancel)
        for future in self.pending.values():
            if not future.done():
                _on_loop(future.get_loop(), future.cancel)
        self.pending.clear()
        self.end_stream()

    def end_stream(self) -> None:
        """End the GET stream, if one is open here (the client may open another)."""
        if self.stream is not None and self.stream_loop is not None:
            _on_loop(self.stream_loop, _put, self.stream, _END)


class SessionStore:
    """The sessions of one agent: records in ``agent.state``, a cache of those seen here, and the bus.

    Consistency: a replica serves a session from its cache for at most ``cache_seconds`` after it last
    read the record, then reads it again (one ``get``). A session ended (DELETE) or changed
    (``logging/setLevel``, ``resources/(un)subscribe``) on another replica is dropped or re-read here as
    soon as the bus message arrives, and at the latest ``cache_seconds`` later if that message is lost.
    A session unused everywhere for ``session_idle_seconds`` is gone from the store (its record is written
    again at most every ``touch_every`` seconds while it is used), so it is 404 on every replica within
    ``cache_seconds`` after that. ``max_sessions`` bounds both this replica's table (``initialize`` gets
    503 when it is full of live sessions) and the store (past it, the least recently written record goes).
    """

    cache_seconds: float = 1.0

    def __init__(self, agent: SessionsHost) -> None:
        self.agent = agent
        self.replica = secrets.token_hex(8)
        digest = hashlib.sha256(agent.name.encode()).hexdigest()[:16]
        self.ns = f"mcp.sessions.{digest}"
        self.streams_ns = f"mcp.streams.{digest}"
        self.channel = f"agentmw.mcp.{digest}"
        self.digest = digest
        idle = agent.timing.session_idle_seconds
        self.touch_every = min(idle / 4, 60.0)
        self.sweep_every = min(5.0, max(idle / 4, 0.05))
        # this replica's sessions: max_sessions, each dropped session_idle_seconds after its last use here,
        # unless a call runs or a GET stream is open
        self.sessions: BoundedTable[str, Session] = BoundedTable(
            agent.limits.max_sessions,
            idle,
            pinned=lambda s: bool(s.inflight) or s.stream is not None,
            on_evict=lambda _key, s, _early: s.close(),
            max_bytes=agent.budgets.sessions_bytes,
            size=lambda _key, s: s.bytes,
        )
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop whose bus listener is running
        self._listeners: dict[asyncio.AbstractEventLoop, tuple[asyncio.Task[None], asyncio.Future[None]]] = {}
        self._shared: _Shared | None = None
        self._background = Background()
        agent.subscribe(self._on_agent_event)

    @property
    def shared(self) -> _Shared:
        """What this store keeps in the shared state, made on first use (the agent's store opens only when
        first needed), with the namespaces' bounds."""
        shared = self._shared
        if shared is None:
            state, agent = self.agent.state, self.agent
            idle = agent.timing.session_idle_seconds + self.touch_every
            limit(state, [self.ns], max_count=agent.limits.max_sessions, max_age=idle)
            limit(
                state,
                [self.streams_ns],
                max_count=agent.limits.max_sessions,
                max_age=STREAM_LEASE_SECONDS * 2,
            )
            bus = BusListener(
                state,
                self.channel,
                self._on_bus,
                label="agentmw MCP sessions",
                replica=self.replica,
                max_queue=10_000,
                restart_seconds=None,  # the next request starts another (start())
            )
            streams = Leases(state, self.streams_ns, self.replica, STREAM_LEASE_SECONDS)
            logs = StreamLogs(state, self.digest, self.replica)
            shared = self._shared = _Shared(state, Records(state, self.ns), streams, bus, logs)
        return shared

    @property
    def state(self) -> State:
        return self.shared.state

    # -- the bus --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen to the agent's bus channel on this loop (once; again if the listener stopped)."""
        loop = asyncio.get_running_loop()
        entry = self._listeners.get(loop)
        if entry is None or entry[0].done():
            for other in [other for other in self._listeners if other.is_closed()]:
                del self._listeners[other]
            started: asyncio.Future[None] = loop.create_future()
            task = loop.create_task(self._listen_bus(started), name="agentmw-mcp-sessions")
            entry = self._listeners[loop] = (task, started)
        await asyncio.shield(entry[1])
        if not entry[0].done():
            self.loop = loop

    async def _listen_bus(self, started: asyncio.Future[None]) -> None:
        """This loop's bus listener (lifecycle.BusListener), and the GET streams' sweep alongside it."""
        loop = asyncio.get_running_loop()
        sweeper = loop.create_task(
            every(self.sweep_every, functools.partial(self._sweep, loop), label="agentmw MCP GET streams"),
            name="agentmw-mcp-streams",
        )
        try:
            await self.shared.bus.run(started)
        finally:
            sweeper.cancel()
            if self.loop is loop:
                self.loop = None  # the next request starts another

    async def _on_bus(self, message: dict[str, Any]) -> None:
        kind = message.get("k")
        if kind == "event":
            event, data = message.get("e"), message.get("d")
            if isinstance(event, str) and isinstance(data, dict):
                self._deliver(event, data)
            return
        session_id = message.get("s")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            return
        if kind == "close":
            self.forget(session.id)
        elif kind == "changed":
            session.checked = float("-inf")  # read again before it is used
            if session.stream is not None:  # its subscriptions filter what the stream gets: now
                await self._refresh(session)
        elif kind == "cancel":
            guard = session.inflight.get(message.get("i"))
            if guard is not None:
                _on_loop(guard.task.get_loop(), guard.cancel)
        elif kind == "answer":
            future = session.pending.pop(message.get("i"), None)
            body = message.get("b")
            if future is not None and isinstance(body, dict):
                _on_loop(future.get_loop(), _answer, future, body)

    async def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Keep the leases of this loop's GET streams (lifecycle.Leases), and end those whose session is gone."""
        now = time.monotonic()
        streamed: list[str] = []
        for session in self.sessions.values():
            if session.stream is None or session.stream_loop is not loop:
                continue
            try:
                if now - session.checked > self.cache_seconds and not await self._refresh(session):
                    continue
            except Exception:
                logger.warning("agentmw MCP: could not check session %s", session.id, exc_info=True)
            streamed.append(session.id)
        await self.shared.streams.renew_all(streamed)
        await self.shared.logs.renew(loop)

    async def publish(self, message: dict[str, Any]) -> None:
        """Send ``message`` to the other replicas; a failure is logged (the bus is at most once anyway)."""
        message["r"] = self.replica
        await publish(self.state, self.channel, message, label="agentmw MCP sessions")

    def _announce(self, message: dict[str, Any]) -> None:
        """Publish from synchronous code, on the loop the bus is used from."""
        loop = self.loop if self.loop is not None and not self.loop.is_closed() else _running_loop()
        if loop is None:
            return  # nothing is served yet: no replica can have a session of ours to tell

        def spawn() -> None:
            self._background.spawn(self.publish(message), "agentmw-mcp-announce")

        _on_loop(loop, spawn)

    def _on_agent_event(self, event: str, data: Mapping[str, Any]) -> None:
        self._deliver(event, data)
        self._announce({"k": "event", "e": event, "d": dict(data)})

    def _deliver(self, event: str, data: Mapping[str, Any]) -> None:
        """A list change or resource update, to this replica's GET streams that want it."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": f"notifications/{event}"}
        if data:
            message["params"] = dict(data)
        for session in self.sessions.values():
            if session.stream is None or session.stream_loop is None:
                continue
            if event == "resources/updated" and data.get("uri") not in session.subscriptions:
                continue
            _on_loop(session.stream_loop, _put, session.stream, message)

    # -- sessions -------------------------------------------------------------------------------------

    def oversized(self, session: Session) -> str | None:
        """Why a new session is refused for its size (``Budgets.session_bytes``), or None; measures it."""
        try:
            session.bytes = len(dumps_finite([session.client_capabilities, session.client_info]))
        except (TypeError, ValueError, RecursionError):
            return "initialize's 'capabilities' and 'clientInfo' must be JSON"
        cap = self.agent.budgets.session_bytes
        if session.bytes > cap:
            return f"initialize's 'capabilities' and 'clientInfo' are {session.bytes:,} bytes encoded; at most {cap:,}"
        return None

    async def open(self, session: Session) -> bool:
        if len(self.sessions) >= self.sessions.max_items:
            self.sessions.prune()  # the idle ones; a full table of live sessions refuses (503), evicts none
        if len(self.sessions) >= self.sessions.max_items:
            return False
        session.rev = await self.shared.records.put(session.id, session.record(), 0)
        session.written = session.checked = time.monotonic()
        self.sessions[session.id] = session
        return True

    def cached(self, session_id: str, credential: str) -> Session | None:
        """The hot path: a session read or written here within ``cache_seconds``, with nothing to write
        yet; None sends the caller to :meth:`find`."""
        session: Session | None = self.sessions.get(session_id)
        if session is None:
            return None
        now = time.monotonic()
        if (
            now - session.checked > self.cache_seconds
            or now - session.written > self.touch_every
            or session.credential != credential
        ):
            return None
        session.last_seen = now
        self.sessions.put(session_id, session)  # used now: renewed, and the newest
        return session

    async def find(self, session_id: str, credential: str) -> Session | None:
        """The session, read from the store when this replica has not seen it lately; None: 404."""
        session: Session | None = self.sessions.get(session_id)
        if session is None or time.monotonic() - session.checked > self.cache_seconds:
            found = await self.shared.records.get(session_id)
            if found is None:
                self.forget(session_id)
                return None
            session = self.sessions.get(session_id)  # another request may have loaded it meanwhile
            if session is None:
                session = Session.from_record(session_id, found.value, found.version, self.replica)
            elif found.version != session.rev:
                session.apply(found.value, found.version)
            else:
                session.checked = time.monotonic()
        if session.credential != credential and not await self._claim(session, credential):
            return None
        now = session.last_seen = time.monotonic()
        self.sessions.put(session_id, session)
        if now - session.written > self.touch_every and not await self.touch(session):
            return None
        return session

    async def _claim(self, session: Session, credential: str) -> bool:
        """A session opened anonymously, taken by its first verified caller (a client that logged in on a 401
        and retries with its token on the same session, whose id is unguessable). A compare-and-set on the
        record: of two claims at once, on any replicas, one wins, and the other is refused unless it is the
        same identity. A GET stream opened before the claim ends here, and on the other replicas when they
        read the record, so an anonymous listener does not receive the identified session's notifications.
        A session bound to an identity is never bound to another: False (404, as an unknown session)."""
        if not credential.startswith(VERIFIED):
            return False
        if session.credential != ANONYMOUS:
            return session.credential == credential

        def claimed() -> dict[str, Any]:
            return {**session.record(), "credential": credential, "caller": None}

        gone = False

        def merge(found: Versioned | None) -> dict[str, Any] | None:  # changed elsewhere (perhaps claimed)
            nonlocal gone
            gone = not self._adopt(session, found)
            return claimed() if not gone and session.credential == ANONYMOUS else None

        rev = await self.shared.records.save(session.id, claimed(), session.rev, merge)
        if rev is None:  # gone, or claimed meanwhile: by this identity, or by another
            return not gone and session.credential == credential
        session.rev = rev
        session.credential, session.caller = credential, None
        session.written = session.checked = time.monotonic()
        session.end_stream()
        await self.publish({"k": "changed", "s": session.id})
        return True

    def _adopt(self, session: Session, found: Versioned | None) -> bool:
        """Take the record as stored now; False (and the session is forgotten here) when it is gone."""
        if found is None:
            self.forget(session.id)
            return False
        session.apply(found.value, found.version)
        return True

    async def _refresh(self, session: Session) -> bool:
        return self._adopt(session, await self.shared.records.get(session.id))

    async def touch(self, session: Session, *, running: bool = False) -> bool:
        """Write the record again, so that the store's idle bound counts from now; False if it is gone.

        ``running``: a call of the session just ended here, so the session was in use even if the store
        forgot it meanwhile (a call longer than the idle bound): it is written back unless it was ended.
        """

        gone = False

        def merge(found: Versioned | None) -> dict[str, Any] | None:
            nonlocal gone
            if found is None and running and not session.closed:
                return session.record()  # written back
            gone = not self._adopt(session, found)  # or changed elsewhere, which renewed it too
            return None

        rev = await self.shared.records.save(session.id, session.record(), session.rev, merge)
        if gone:
            return False
        if rev is not None:
            session.rev = rev
        session.written = session.checked = time.monotonic()
        return True

    async def update(self, session: Session, change: Callable[[Session], None]) -> None:
        """Change the shared fields (compare-and-set on the record) and tell the other replicas."""

        def merge(found: Versioned | None) -> dict[str, Any]:
            if not self._adopt(session, found):
                raise JsonRpcError(SESSION_NOT_FOUND, "Session not found")
            change(session)
            return session.record()

        change(session)
        rev = await self.shared.records.save(session.id, session.record(), session.rev, merge)
        assert rev is not None  # merge never stops: it writes, or raises
        session.rev = rev
        session.written = session.checked = time.monotonic()
        await self.publish({"k": "changed", "s": session.id})

    def forget(self, session_id: str) -> None:
        """Drop the session here (and end what it holds here); the record is not touched."""
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()

    async def end(self, session_id: str) -> None:
        """DELETE: the session ends on every replica."""
        await self.state.delete(self.ns, session_id)
        self.forget(session_id)
        await self.publish({"k": "close", "s": session_id})


def _answer(future: asyncio.Future[dict[str, Any]], body: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(body)


async def _session_or_error(endpoint: McpEndpoint, incoming: Incoming, send: Send) -> Session | None:
    session_id = incoming.headers.get("mcp-session-id")
    if not session_id:
        await json_response(
            send, 400, error_body(None, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required")
        )
        return None
    sessions = endpoint.sessions
    credential = incoming.credential or _fingerprint(incoming.headers)
    session = None
    if len(session_id) <= 128:  # ours are 32 characters: a longer one is not looked up
        session = sessions.cached(session_id, credential) or await sessions.find(session_id, credential)
    if session is None:
        await json_response(send, 404, error_body(None, SESSION_NOT_FOUND, "Session not found"))
        return None
    return session


async def handle(
    endpoint: McpEndpoint, incoming: Incoming, scope: Scope, receive: Receive, send: Send
) -> None:
    verb = scope["method"]
    sessions = endpoint.sessions
    if sessions.loop is not asyncio.get_running_loop():
        await sessions.start()  # once per loop: this replica listens to the other replicas from now on
    if verb == "POST":
        await _post(endpoint, incoming, scope, receive, send)
    elif verb == "GET":
        if not incoming.accept_sse:
            await plain_response(send, 406, body=b"Not Acceptable: GET needs Accept: text/event-stream")
            return
        session = await _session_or_error(endpoint, incoming, send)
        if session is None:
            return
        credential = incoming.credential or _fingerprint(incoming.headers)
        last_event_id = incoming.headers.get("last-event-id")
        if last_event_id is not None:
            await _resume(sessions, session, last_event_id, scope, receive, send, credential)
            return
        await _listen(sessions, session, scope, receive, send, credential)
    elif verb == "DELETE":
        session = await _session_or_error(endpoint, incoming, send)
        if session is not None:
            await sessions.end(session.id)
            await plain_response(send, 200)
    else:
        await plain_response(send, 405, [(b"allow", b"GET, POST, DELETE")])


async def _post(
    endpoint: McpEndpoint, incoming: Incoming, scope: Scope, receive: Receive, send: Send
) -> None:
    if not (incoming.accept_json and incoming.accept_sse):
        await json_response(
            send,
            406,
            error_body(
                None,
                INVALID_REQUEST,
                "Not Acceptable: Accept must list application/json and text/event-stream",
            ),
        )
        return
    body = await endpoint.read_json(incoming, receive)
    message = classify_rpc(body, responses=True)
    what, request_id = message.kind, message.id
    if what == "request" and message.method == "initialize":
        await _initialize(endpoint, incoming, scope, body, send)
        return
    session = await _session_or_error(endpoint, incoming, send)
    if session is None:
        return
    if what == "notification":
        await _notification(endpoint.sessions, session, body)
        await plain_response(send, 202)
        return
    if what == "response":
        future = session.pending.pop(request_id, None)
        if future is not None:
            _answer(future, body)
        else:  # the question may wait on another replica: the answer goes there through the bus
            await endpoint.sessions.publish({"k": "answer", "s": session.id, "i": request_id, "b": body})
        await plain_response(send, 202)
        return
    if session.caller is None:
        session.caller = caller_from_headers(
            scope, incoming.headers.get("authorization"), endpoint.agent.identify
        )
    await _request(endpoint, session, scope, receive, send, body, request_id)


async def _initialize(
    endpoint: McpEndpoint, incoming: Incoming, scope: Scope, body: dict[str, Any], send: Send
) -> None:
    params = body.get("params") or {}
    request_id = body["id"]
    offered = params.get("protocolVersion")
    capabilities = params.get("capabilities")
    if not isinstance(offered, str) or not isinstance(capabilities, dict):
        await json_response(
            send,
            200,
            error_body(
                request_id,
                INVALID_PARAMS,
                "initialize needs 'protocolVersion' (string) and 'capabilities' (object)",
            ),
        )
        return
    version = offered if offered in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
    sessions = endpoint.sessions
    session = Session(
        version,
        capabilities,
        params.get("clientInfo"),
        incoming.credential or _fingerprint(incoming.headers),
        replica=sessions.replica,
    )
    session.caller = caller_from_headers(
        scope, incoming.headers.get("authorization"), endpoint.agent.identify
    )
    oversized = sessions.oversized(session)
    if oversized is not None:
        await json_response(send, 200, error_body(request_id, INVALID_PARAMS, oversized))
        return
    if not await sessions.open(session):
        await json_response(
            send, 503, error_body(request_id, INVALID_REQUEST, "Too many sessions; try again later")
        )
        return
    agent = endpoint.agent
    result: dict[str, Any] = {
        "protocolVersion": version,
        # every version gets the extensions (an unknown key is harmless to an older client); the tasks
        # capability is 2025-11-25's, so only a session of that version is told of it
        "capabilities": server_capabilities(agent, tasks=version == LATEST_HANDSHAKE),
        "serverInfo": {"name": agent.name, "version": agent.version},
    }
    if agent.instructions:
        result["instructions"] = agent.instructions
    await json_response(
        send,
        200,
        {"jsonrpc": "2.0", "id": request_id, "result": result},
        [(_SESSION_HEADER, session.id.encode())],
    )


def server_capabilities(agent: Any = None, *, stateless: bool = False, tasks: bool = True) -> dict[str, Any]:
    """What the server declares; with task tools, the tasks of the era (docs/mcp.md, "Tasks"): 2025's
    ``tasks`` capability, 2026's ``io.modelcontextprotocol/tasks`` extension. ``tasks=False``: none (a
    handshake version before 2025-11-25, which has no tasks); the other extensions are declared still."""
    capabilities: dict[str, Any] = {
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "logging": {},
        "completions": {},
    }
    if agent is None:
        return capabilities
    # SEP-2133 extensions, declared in both eras; each extension's module says what it advertises
    extensions: dict[str, Any] = {**apps_extension(agent), **skills_extension(agent)}
    if tasks and any(cap.task_support for cap in agent.tools.values()):
        if stateless:
            extensions["io.modelcontextprotocol/tasks"] = {}
        else:
            capabilities["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    if extensions:
        capabilities["extensions"] = extensions
    return capabilities


async def _notification(sessions: SessionStore, session: Session, body: dict[str, Any]) -> None:
    method = body["method"]
    params = body.get("params") or {}
    request_id = params.get("requestId")
    if method == "notifications/cancelled" and isinstance(request_id, (str, int)):
        scope = session.inflight.get(request_id)
        if scope is not None:
            scope.cancel()
        else:  # the call may run on another replica: it cancels its own, if it has it
            await sessions.publish({"k": "cancel", "s": session.id, "i": request_id})


async def _request(
    endpoint: McpEndpoint,
    session: Session,
    scope: Scope,
    receive: Receive,
    send: Send,
    body: dict[str, Any],
    request_id: Any,
) -> None:
    method = body["method"]
    params = body.get("params")
    exchange = Exchange(send, [(_SESSION_HEADER, session.id.encode())], stateless=False)
    if method in _SESSION_METHODS:
        try:
            result = await _SESSION_METHODS[method](endpoint.sessions, session, params or {})
            await exchange.finish({"jsonrpc": "2.0", "id": request_id, "result": result})
        except JsonRpcError as exc:
            await exchange.finish(exc.body(request_id))
        except Exception as exc:  # noqa: BLE001  (a store fault is retryable; a bug is logged: both with its id)
            await exchange.finish(fault_body(request_id, exc, method))
        return

    async def gather(call: Call, requests: Mapping[str, InputRequest], target: str) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        for key, request in requests.items():
            answers[key] = await _ask_client(session, call.exchange, request, receive)
        return answers

    call = Call(
        endpoint.agent,
        endpoint.catalog,
        stateless=False,
        version=session.version,
        client_capabilities=session.client_capabilities,
        log_level=session.log_level,
        exchange=exchange,
        scope=scope,
        params=params or {},
        gather=gather,
        caller=session.caller,
    )
    # the call's stream, if it has one, is resumable: its events are numbered and kept (resume.py)
    exchange.opener = functools.partial(endpoint.sessions.shared.logs.open, session.id, request_id)
    guard = CallGuard()  # a dropped connection does not cancel in this era; notifications/cancelled does
    session.inflight[request_id] = guard
    payload: dict[str, Any] | None = None
    try:
        payload = {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": await dispatch(call, method, params, request_id),
        }
    except JsonRpcError as exc:
        payload = exc.body(request_id)
    except AccessRefused:
        raise  # the identity boundary answers 401/403 at the HTTP level (endpoint.py)
    except Exception as exc:  # noqa: BLE001  (a store fault is retryable; a bug is logged: both with its id)
        payload = fault_body(request_id, exc, method)
    except asyncio.CancelledError:
        if not guard.absorb():
            raise
    finally:
        guard.finish()
        session.inflight.pop(request_id, None)
    if payload is None:  # cancelled by the client: no response is owed, but the HTTP exchange must end
        await exchange.abandon()
    else:
        await exchange.finish(payload)
    sessions = endpoint.sessions
    if time.monotonic() - session.written > sessions.touch_every:  # a long call: the session was in use
        await sessions.touch(session, running=True)


async def _ask_client(session: Session, exchange: Exchange, request: InputRequest, receive: Receive) -> Any:
    """Send a server-to-client request on the call's stream and wait for the answer, which the client POSTs.

    The wait ends without an answer when the client closes this stream (it can no longer see the question),
    when the server shuts down, or after ``_CLIENT_ANSWER_TIMEOUT``: each is a failed call, never a hang.
    """
    request_id = session.next_request_id()
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    session.pending[request_id] = future
    wire = input_request(request)
    gone = asyncio.ensure_future(_client_gone(receive))
    try:
        await exchange.message({"jsonrpc": "2.0", "id": request_id, **wire})
        either: set[asyncio.Future[Any]] = {future, gone}
        await asyncio.wait(either, timeout=_CLIENT_ANSWER_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        if not future.done() and gone.done() and exchange.log is not None and "shutting" not in gone.result():
            # a resumable stream: the client may resume it (GET with Last-Event-ID), see the question again and
            # answer; it has this long to
            await asyncio.wait({future}, timeout=QUESTION_RESUME_SECONDS)
        if not future.done():
            why = gone.result() if gone.done() else "did not answer in time"
            raise ClientNotAnswered(f"the client {why} before answering {wire['method']}")
        reply = future.result()
    finally:
        gone.cancel()
        session.pending.pop(request_id, None)
    if "error" in reply:
        error = reply["error"] if isinstance(reply["error"], dict) else {}
        said = error.get("message")
        said = said[:200] if isinstance(said, str) and said else "error"  # the client's words, bounded
        raise ClientNotAnswered(f"the client refused {wire['method']}: {said}")
    parsed = parse_input_response(request, reply.get("result"))
    if parsed is None:
        raise ClientNotAnswered(f"the client answered {wire['method']} with an invalid result")
    return parsed


async def _client_gone(receive: Receive) -> str:
    """Why this request's client can no longer answer: it closed the stream, or the server is stopping."""
    exiting = asyncio.ensure_future(wait_for_exit())
    try:
        while True:
            message = asyncio.ensure_future(receive())
            await asyncio.wait({message, exiting}, return_when=asyncio.FIRST_COMPLETED)
            if exiting.done():
                message.cancel()
                return "was cut off by the server shutting down"
            if message.result()["type"] == "http.disconnect":
                return "closed the stream"
    finally:
        exiting.cancel()


async def _set_level(sessions: SessionStore, session: Session, params: dict[str, Any]) -> dict[str, Any]:
    level = params.get("level")
    if (
        not isinstance(level, str) or level not in LOG_RANK
    ):  # a list or an object is not a level (nor hashable)
        raise JsonRpcError(
            INVALID_PARAMS, f"Unknown log level {repr(level)[:80]}; one of {', '.join(LOG_RANK)}"
        )

    def change(s: Session) -> None:
        s.log_level = level

    await sessions.update(session, change)
    return {}


def _subscription(
    subscribe: bool,
) -> Callable[[SessionStore, Session, dict[str, Any]], Awaitable[dict[str, Any]]]:
    async def change(sessions: SessionStore, session: Session, params: dict[str, Any]) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise JsonRpcError(INVALID_PARAMS, "resources/(un)subscribe needs a string 'uri'")
        if (uri in session.subscriptions) == subscribe:
            return {}  # nothing changes: nothing to write

        def apply(s: Session) -> None:
            if subscribe and uri not in s.subscriptions and len(s.subscriptions) >= MAX_SUBSCRIPTIONS:
                raise JsonRpcError(
                    INVALID_PARAMS, f"A session subscribes to at most {MAX_SUBSCRIPTIONS} resources"
                )
            (s.subscriptions.add if subscribe else s.subscriptions.discard)(uri)

        await sessions.update(session, apply)
        return {}

    return change


async def _ping(sessions: SessionStore, session: Session, params: dict[str, Any]) -> dict[str, Any]:
    return {}


_SESSION_METHODS: dict[str, Callable[[SessionStore, Session, dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "ping": _ping,
    "logging/setLevel": _set_level,
    "resources/subscribe": _subscription(True),
    "resources/unsubscribe": _subscription(False),
}


async def _resume(
    sessions: SessionStore,
    session: Session,
    last_event_id: str,
    scope: Scope,
    receive: Receive,
    send: Send,
    credential: str,
) -> None:
    """``GET`` with ``Last-Event-ID``: the rest of the stream that id belongs to, from the shared state, on any
    replica (resume.py); a GET stream's rest is followed by a live GET stream (``_listen``). 400 when this
    session has no such stream to resume."""
    try:
        replay = await sessions.shared.logs.replay(session.id, last_event_id)
    except ResumeRefused as refused:
        await json_response(send, 400, error_body(None, INVALID_REQUEST, f"Bad Request: {refused}"))
        return
    if replay.listen:  # what the lost GET stream sent after the id (read to its end), then a live one
        missed = [chunk async for chunk in replay.frames]
        await _listen(sessions, session, scope, receive, send, credential, replayed=missed)
        return
    await stream_sse(scope, receive, send, replay.frames, headers=[(_SESSION_HEADER, session.id.encode())])


async def _listen(
    sessions: SessionStore,
    session: Session,
    scope: Scope,
    receive: Receive,
    send: Send,
    credential: str,
    replayed: list[bytes] | None = None,
) -> None:
    """The GET stream: list changes and resource updates for this session, until the client leaves or the
    session ends (or is claimed by a verified caller). One per session across the replicas: it holds a lease on
    the session while it is open. Its events carry ids and are kept (resume.py): a client that reconnects with
    ``Last-Event-ID`` gets what it missed of the stream it lost (``replayed``), then this new stream. A
    resumption takes over from the stream it resumes, which may not have noticed yet that its client is gone: it
    waits up to ``TAKEOVER_SECONDS`` for that one to end (and its lease to go) before it is refused 409."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (TAKEOVER_SECONDS if replayed is not None else 0.0)
    while session.stream is not None:
        if loop.time() >= deadline:
            await plain_response(send, 409, body=b"Conflict: this session already has a GET stream")
            return
        await asyncio.sleep(TAKEOVER_POLL_SECONDS)
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=1000)
    session.stream = queue  # taken before the first await: a second GET here is refused at once
    session.stream_loop = loop
    leased = False
    try:
        while not (leased := await sessions.shared.streams.acquire(session.id)):
            if loop.time() >= deadline:
                await plain_response(send, 409, body=b"Conflict: this session already has a GET stream")
                return
            await asyncio.sleep(TAKEOVER_POLL_SECONDS)
        if not await sessions._refresh(session) or session.credential != credential:  # claimed meanwhile
            await json_response(send, 404, error_body(None, SESSION_NOT_FOUND, "Session not found"))
            return

        log = sessions.shared.logs.open(session.id, None, listen=True)

        async def frames() -> AsyncIterator[bytes]:
            yield sse_comment("stream open")
            for chunk in replayed or ():
                yield chunk
            while True:
                message = await queue.get()
                if message is _END:
                    return
                yield log.record(dumps_finite(message))

        try:
            await stream_sse(scope, receive, send, frames(), headers=[(_SESSION_HEADER, session.id.encode())])
        finally:
            if log.seq:
                await log.close(None)
    finally:
        if session.stream is queue:
            session.stream = None
            session.stream_loop = None
        if leased:
            try:
                await sessions.shared.streams.release(session.id)
            except Exception:  # it expires on its own
                logger.debug("could not release the GET stream lease of %s", session.id, exc_info=True)
