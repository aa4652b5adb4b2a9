"""Resumable streams of the handshake era: event ids, the events kept in the shared state, and ``GET`` with
``Last-Event-ID`` on any replica (docs/mcp.md, "Resuming a cut stream").

A POST response that turns into SSE (a call that sends progress, logs or a question before its answer) is one
*stream*, and so is each GET stream (``listen``: its resumption replays what it sent after the id, then the
handshake module goes on with a live GET stream). Each of its events carries ``id: <stream>-<n>``: ``<stream>`` is 32 random hex digits, new for every
stream, and ``<n>`` numbers the stream's events from 1. The events are kept in the shared state, one log per
stream (``mcp.events.<agent>``) under ``<session id>.<stream>``, written behind the stream in batches by one
writer task (``lifecycle.WriteBehind``): a progress tick never waits for the store. The final response is
written *before* it is sent, so once a client could have seen it, any replica can send it again; if the store
refuses that write, the response is still sent (and logged as not kept).

While the call runs, the replica running it holds a lease on the stream (``mcp.live.<agent>``, taken and renewed
by the session sweep, so a short call never pays for it), and every entry carries the time it was written: a
follower elsewhere tells a call still running (leased, or written to within :data:`LEASE_SECONDS`) from one whose
replica died (neither). A resumption (``GET`` with ``Last-Event-ID``) is looked up under the session it arrives on: the
session id and its credential are checked first (404 otherwise, as for any request), and an id minted for
another session names no log of this one. What the log holds after the id is sent again, then the rest as it
is written, until the response; a call whose replica died before answering ends its stream with a JSON-RPC
error (-32603) for the request, so the client stops waiting.

Bounds (every one is per stream unless it says otherwise):

- :data:`MAX_STREAM_BYTES` of notifications and questions are kept; past them, the later ones are sent but not
  kept, and a resumption skips them (the response is still kept);
- :data:`MAX_RESPONSE_BYTES`: a larger final response is sent but not kept;
- :data:`MAX_LOG_ENTRIES` entries of at most :data:`BATCH` events each; the oldest go first;
- :data:`RETENTION_SECONDS` after it was written an entry goes;
- :data:`MAX_STREAMS` logs per agent; past them the least recently written go.

A ``Last-Event-ID`` that is not one of ours, or that names no stream of this session the store still holds
(unknown, another session's, expired), gets 400 with a JSON-RPC ``-32600`` and a null id: 404 would tell the
client its *session* is gone, which it is not.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any, Final, NamedTuple

from .._transport import INTERNAL_ERROR, dumps
from ..lifecycle import Leases, WriteBehind, limit
from ..state import State

__all__ = [
    "BATCH",
    "MAX_LOG_ENTRIES",
    "MAX_RESPONSE_BYTES",
    "MAX_STREAMS",
    "MAX_STREAM_BYTES",
    "RETENTION_SECONDS",
    "ResumeRefused",
    "StreamLog",
    "StreamLogs",
]

logger = logging.getLogger("agentmw")

MAX_STREAM_BYTES: Final = 4 * 1024 * 1024
MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024
BATCH: Final = 32
MAX_LOG_ENTRIES: Final = 1000
RETENTION_SECONDS: Final = 600.0
MAX_STREAMS: Final = 10_000
LEASE_SECONDS: Final = 30.0
"""A running stream's lease: renewed every sweep (at most every 5 s); a replica gone this long is dead."""
FIRST_WAIT_SECONDS: Final = 2.0
"""How long a resumption waits for a stream's first batch to land (the id was sent before it was written)."""
FOLLOW_BLOCK_SECONDS: Final = 1.0
PAGE: Final = 100

_EVENT_ID = re.compile(r"([0-9a-f]{32})-([1-9][0-9]{0,11})")


class Replay(NamedTuple):
    """What a resumption sends: the frames, and whether they were a GET stream's (then a live one follows)."""

    frames: AsyncIterator[bytes]
    listen: bool


class ResumeRefused(Exception):
    """A ``Last-Event-ID`` this session cannot resume from: the 400's message."""


def frame(stream: str, seq: int, body: bytes | str) -> bytes:
    """One SSE event of a resumable stream."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    return f"id: {stream}-{seq}\nevent: message\ndata: ".encode() + data + b"\n\n"


class StreamLogs:
    """One agent's resumable streams in the shared state (made with the session store: ``handshake.py``)."""

    def __init__(self, state: State, digest: str, replica: str) -> None:
        self.state = state
        self.ns = f"mcp.events.{digest}"
        self.live_ns = f"mcp.live.{digest}"
        self.replica = replica
        limit(state, [self.ns], max_count=MAX_STREAMS, max_age=RETENTION_SECONDS, max_len=MAX_LOG_ENTRIES)
        limit(state, [self.live_ns], max_count=MAX_STREAMS, max_age=LEASE_SECONDS * 2)
        self.leases = Leases(state, self.live_ns, replica, LEASE_SECONDS)
        self.held: dict[
            str, asyncio.AbstractEventLoop
        ] = {}  # running streams' leases -> the loop running them

    def open(self, session_id: str, request_id: Any, *, listen: bool = False) -> StreamLog:
        """A new stream's log: a call's (``request_id``), or with ``listen`` the session's GET stream."""
        return StreamLog(self, session_id, request_id, listen=listen)

    async def renew(self, loop: asyncio.AbstractEventLoop) -> None:
        """Renew the leases of the streams running on ``loop`` (the session sweep's tick)."""
        keys = [key for key, held_by in self.held.items() if held_by is loop]
        if keys:
            await self.leases.renew_all(keys)

    def _hold(self, key: str) -> None:
        self.held[key] = asyncio.get_running_loop()

    def _release(self, key: str) -> None:
        """Stop renewing (the lease lapses on its own: a follower reads the stream's end before it looks)."""
        self.held.pop(key, None)

    async def _running(self, key: str, newest: float) -> bool:
        """Whether a replica still runs the stream's call: it holds the lease, or wrote to the log lately."""
        if time.time() - newest < LEASE_SECONDS:
            return True
        return await self.state.get_key(self.live_ns, key) is not None

    async def replay(self, session_id: str, last_event_id: str) -> Replay:
        """The events of the stream ``last_event_id`` belongs to after it, then the rest as it is written, until
        the response. Raises :class:`ResumeRefused` before anything is sent when there is nothing to resume."""
        match = _EVENT_ID.fullmatch(last_event_id.strip())
        if match is None:
            raise ResumeRefused("Last-Event-ID is not an event id of this server")
        stream, after = match[1], int(match[2])
        key = f"{session_id}.{stream}"
        entries = await self.state.read(self.ns, key, 0, PAGE)
        if not entries:  # its first batch may still be on its way: the id went out before it was written
            entries = await self.state.read(self.ns, key, 0, PAGE, block=FIRST_WAIT_SECONDS)
        if not entries:
            raise ResumeRefused(
                "Last-Event-ID names no stream of this session that is still kept (unknown, or expired)"
            )
        if entries[0][1].get("listen"):
            return Replay(self._catch_up(key, stream, after, entries), listen=True)
        ended = [entry for _, entry in entries if entry.get("end")]
        if ended and not ended[0].get("answered") and _last_seq(entries) <= after:
            raise ResumeRefused("That stream ended without a response: its request was cancelled")
        return Replay(self._follow(key, stream, after, entries), listen=False)

    async def _catch_up(
        self, key: str, stream: str, after: int, entries: list[tuple[int, Any]]
    ) -> AsyncIterator[bytes]:
        """What a GET stream's log holds after ``after``, up to its end: the replica that served it writes the end
        when it sees the connection gone, and what it had sent before; this waits for that up to
        :data:`FIRST_WAIT_SECONDS` (a replica that has not noticed yet, or died, ends the wait)."""
        read_after = 0
        while entries:
            for entry_id, entry in entries:
                read_after = entry_id
                first, frames = entry.get("first"), entry.get("frames") or []
                if isinstance(first, int):
                    out = [
                        frame(stream, first + i, text)
                        for i, text in enumerate(frames)
                        if first + i > after and isinstance(text, str)
                    ]
                    if out:
                        yield b"".join(out)
                if entry.get("end"):
                    return
            entries = await self.state.read(self.ns, key, read_after, PAGE, block=FIRST_WAIT_SECONDS)

    async def _follow(
        self, key: str, stream: str, after: int, entries: list[tuple[int, Any]]
    ) -> AsyncIterator[bytes]:
        expected = after + 1
        read_after = 0
        request: Any = None
        newest = 0.0
        while True:
            for entry_id, entry in entries:
                read_after = entry_id
                request = entry.get("request", request)
                written = entry.get("t")
                newest = max(newest, written if isinstance(written, (int, float)) else 0.0)
                first = entry.get("first")
                frames = entry.get("frames") or []
                if not isinstance(first, int):
                    continue
                out = [
                    frame(stream, first + index, text)
                    for index, text in enumerate(frames)
                    if first + index >= expected and isinstance(text, str)
                ]
                expected = max(expected, first + len(frames))
                if out:
                    yield b"".join(out)
                if entry.get("end"):
                    return
            entries = await self.state.read(self.ns, key, read_after, PAGE, block=FOLLOW_BLOCK_SECONDS)
            if entries or await self._running(key, newest):
                continue
            entries = await self.state.read(
                self.ns, key, read_after, PAGE
            )  # its end may have landed meanwhile
            if not entries:  # nobody runs it any more, and it never answered: its replica is gone
                logger.info("MCP stream %s: the replica running its call is gone; it ends unanswered", key)
                if isinstance(request, (str, int)) and not isinstance(request, bool):
                    lost = {
                        "jsonrpc": "2.0",
                        "id": request,
                        "error": {
                            "code": INTERNAL_ERROR,
                            "message": "The server running this call stopped before it answered; the call may "
                            "have run in part. Nothing more will arrive for it.",
                        },
                    }
                    yield b"event: message\ndata: " + dumps(lost) + b"\n\n"
                return


def _last_seq(entries: list[tuple[int, Any]]) -> int:
    last = 0
    for _, entry in entries:
        first = entry.get("first")
        if isinstance(first, int):
            last = max(last, first + len(entry.get("frames") or []) - 1)
    return last


class StreamLog:
    """One stream's events, numbered and written behind it; :meth:`close` writes its end (and response)."""

    __slots__ = (
        "_bytes",
        "_handoff",
        "_pending",
        "_started",
        "_writer",
        "key",
        "listen",
        "logs",
        "request_id",
        "seq",
        "stream",
    )

    def __init__(self, logs: StreamLogs, session_id: str, request_id: Any, *, listen: bool = False) -> None:
        self.logs = logs
        self.listen = listen
        self.stream = secrets.token_hex(16)
        self.key = f"{session_id}.{self.stream}"
        self.request_id = request_id
        self.seq = 0
        self._bytes = 0
        self._started = False
        # events wait here until the loop next runs: a call that answers without yielding (most fast ones) ends
        # before then, and its events are written with its response, in one append and no writer task
        self._pending: list[tuple[int, bytes]] = []
        self._handoff: asyncio.Handle | None = None
        self._writer: WriteBehind[tuple[int, bytes]] = WriteBehind(
            self._write, _no_delay, f"agentmw-mcp-stream-{self.stream[:8]}"
        )

    def record(self, body: bytes) -> bytes:
        """Number one event (its JSON ``body``), queue it for the log; its SSE frame, with its id."""
        self.seq += 1
        if not self._started:
            self._started = True
            self.logs._hold(self.key)  # the sweep leases it from its next tick (lifecycle.Leases)
        if self._bytes + len(body) <= MAX_STREAM_BYTES:  # past the budget: sent, not kept
            self._bytes += len(body)
            self._pending.append((self.seq, body))
            if self._handoff is None:
                self._handoff = asyncio.get_running_loop().call_soon(self._hand_off)
        return frame(self.stream, self.seq, body)

    def _hand_off(self) -> None:
        """The call yielded with events unwritten: its writer takes them (``lifecycle.WriteBehind``)."""
        self._handoff = None
        pending, self._pending = self._pending, []
        if not self._writer.stopped():
            for item in pending:
                self._writer.add(item)

    async def _write(self, batch: list[tuple[int, bytes]]) -> None:
        try:
            await self._append(batch, end=False, answered=False)
        except Exception:
            logger.warning("MCP stream %s: events could not be kept", self.key, exc_info=True)
        finally:
            self._writer.done(len(batch))

    async def _append(self, items: list[tuple[int, bytes]], *, end: bool, answered: bool) -> None:
        logs = self.logs
        for start in range(0, max(len(items), 1 if end else 0), BATCH):
            chunk = items[start : start + BATCH]
            entry: dict[str, Any] = {
                "first": chunk[0][0] if chunk else self.seq + 1,
                "frames": [body.decode("utf-8") for _, body in chunk],
                "request": self.request_id,
                "t": time.time(),
            }
            if self.listen:
                entry["listen"] = True
            if end and start + BATCH >= len(items):
                entry["end"] = True
                entry["answered"] = answered
            await logs.state.append(logs.ns, self.key, entry)

    async def close(self, response: bytes | None) -> bytes | None:
        """The stream ends: what is still queued, and ``response`` (None: none is owed, the call was cancelled),
        written before this returns; the response's frame, with its id."""
        if self._handoff is not None:
            self._handoff.cancel()
            self._handoff = None
        writer = self._writer
        writer.close()
        if writer.task is not None:
            await asyncio.gather(writer.task, return_exceptions=True)
        rest = [*writer.queue, *self._pending]
        writer.queue.clear()
        self._pending = []
        framed = None
        if response is not None:
            self.seq += 1
            framed = frame(self.stream, self.seq, response)
            if len(response) <= MAX_RESPONSE_BYTES:
                rest.append((self.seq, response))
            else:
                logger.warning("MCP stream %s: its response is too large to keep for a resumption", self.key)
        try:
            await self._append(rest, end=True, answered=response is not None)
        except Exception:
            logger.exception(
                "MCP stream %s: its end could not be kept; a resumption will not find it", self.key
            )
        finally:
            self.logs._release(self.key)
        return framed


def _no_delay() -> float:
    return 0.0
