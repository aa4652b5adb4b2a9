"""Idempotency keys: a repeated side-effecting call returns the first outcome instead of running again.

Records are keyed by caller, capability and key, bound to a hash of the arguments (a key reused with
other arguments is rejected), and expire. They live in the agent's shared state (``agentmw.state``), so a
duplicate gets the first outcome on whichever replica it lands:

- The first call claims the key with ``set_if_absent`` in namespace ``"idem.run"`` (value: its ``owner``
  and the arguments' hash) for a short lease, renewed while it runs; having claimed it, it reads the key's
  outcome (namespace ``"idem"``) once more, since a call that held the claim before may have just settled.
- When it ends, a settled outcome (completed, rejected, a permanent failure) is stored under the key in
  ``"idem"`` for the idempotency TTL, then the claim is released. A retryable failure or a pending question
  is never kept: the claim is released, and the next call runs again. Claims and outcomes live in two
  namespaces so that a flood of settled outcomes, pruned by count soonest-to-expire first, can never push
  out the short-lived claim of a call still running.
- A duplicate that finds the key running waits: in this process on the first call's future, elsewhere on
  a bus message (``idem.<key>``) with a poll every ``poll_seconds`` as the fallback, then returns the
  first outcome.
- A claim whose owner died expires with its lease (``lease_seconds``) without an outcome; a waiting
  duplicate then takes the key over and runs the call itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._codec import from_json, to_json
from ..errors import SafetyViolation
from ..state import MemoryState, State, StoreLimits, resolve_state

__all__ = ["CLAIMS", "NAMESPACE", "IdempotencyCache", "KeyReused", "register_outcome_load"]

logger = logging.getLogger("agentmw")

NAMESPACE = "idem"  # settled outcomes, each for the idempotency TTL
CLAIMS = "idem.run"  # the claims of calls running, each for a renewed lease


class KeyReused(SafetyViolation):
    """The key was first used with other arguments."""


@dataclass(slots=True)
class _Local:
    """A call with this key running in this process: its duplicates here wait on ``done``."""

    arguments: str
    done: asyncio.Future[Any]


_VANISHED = object()  # the key is gone (released, or its owner's lease expired): claim it again


Load = Callable[[Mapping[str, Any]], Any]
"""Rebuilds an outcome from what its ``to_dict()`` wrote (the pipeline's: ``Outcome.from_dict``)."""


def _dump(outcome: Any) -> dict[str, Any]:
    to_dict = getattr(outcome, "to_dict", None)
    if callable(to_dict):
        return {"outcome": to_dict()}
    return {"plain": to_json(outcome)}


_outcome_load: list[
    Load
] = []  # set once, by agentmw.outcomes as it defines Outcome (see register_outcome_load)


def register_outcome_load(load: Load) -> Load:
    """How a stored outcome is rebuilt when a cache is given no ``load=``: ``agentmw.outcomes`` registers
    ``Outcome.from_dict`` as it is imported, as storable types register with the codec, so this module (below
    the outcomes) never imports them."""
    _outcome_load[:] = [load]
    return load


def _load(stored: Mapping[str, Any], load: Load | None = None) -> Any:
    """What :func:`_dump` wrote: an outcome rebuilt by ``load``, or the plain value."""
    if "outcome" in stored:
        rebuild = load or (_outcome_load[0] if _outcome_load else None)
        return rebuild(stored["outcome"]) if rebuild is not None else stored["outcome"]
    return from_json(stored.get("plain"))


class _Entries:
    """The calls with a key running in this process (``len``, ``in``), and ``clear()``."""

    __slots__ = ("cache",)

    def __init__(self, cache: IdempotencyCache) -> None:
        self.cache = cache

    def __len__(self) -> int:
        return len(self.cache._running)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, tuple) and self.cache.state_key(key) in self.cache._running

    def clear(self) -> None:
        self.cache.clear()


class IdempotencyCache:
    """Idempotency records in the shared state.

    Args:
        ttl_seconds: how long a settled outcome is returned for a repeated key.
        max_entries: records kept at most (the namespace's count bound; past it the soonest to expire go).
        state: a :class:`agentmw.state.State`, or a callable returning one (opened on first use); default:
            a private in-memory one (this process only).
        lease_seconds: how long a claim outlives a process that died while running the call; renewed every
            third of it while the call runs.
        poll_seconds: how often a duplicate waiting on another process re-reads the key, besides the bus.
        load: rebuilds an outcome that has a ``to_dict()`` from what it wrote (``Outcome.from_dict``); any other
            outcome is kept as its JSON form (``agentmw._codec``).
    """

    def __init__(
        self,
        ttl_seconds: float = 24 * 3600.0,
        max_entries: int = 100_000,
        *,
        state: State | Callable[[], State] | None = None,
        lease_seconds: float = 30.0,
        poll_seconds: float = 1.0,
        load: Load | None = None,
    ) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self.lease = lease_seconds
        self.poll = poll_seconds
        self._source = state
        self._state: State | None = None
        self._load_outcome = load
        self._running: dict[str, _Local] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.hits = 0
        self.misses = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    @property
    def entries(self) -> _Entries:
        return _Entries(self)

    @property
    def state(self) -> State:
        if self._state is None:
            source = resolve_state(self._source)
            source.limit(NAMESPACE, StoreLimits(max_count=self.max_entries, max_age=self.ttl))
            # claims are as many as the keyed calls running: room for 10,000 at least
            source.limit(CLAIMS, StoreLimits(max_count=max(self.max_entries, 10_000), max_age=self.lease))
            self._state = source
        return self._state

    def clear(self) -> None:
        """Forget the calls running in this process; with an in-memory state (this process's), also every
        stored outcome. Records in a shared store stay: other processes rely on them."""
        self._running.clear()
        if isinstance(self._state, MemoryState):
            for ns in (NAMESPACE, CLAIMS):
                self._state._keys.pop(ns, None)  # the memory backend's keys of one namespace

    @staticmethod
    def state_key(key: tuple[str, str, str]) -> str:
        return hashlib.sha256(json.dumps(list(key), separators=(",", ":")).encode()).hexdigest()

    async def run(
        self,
        key: tuple[str, str, str],
        arguments: str,
        produce: Callable[[], Awaitable[Any]],
        keep: Callable[[Any], bool],
    ) -> Any:
        """The outcome of ``produce()`` for the first call with ``key``; for a duplicate, that first outcome
        (waiting for it while it runs). ``keep(outcome)``: whether the outcome settles the key."""
        skey = self.state_key(key)
        digest = hashlib.sha256(arguments.encode()).hexdigest()[:32]
        local = self._running.get(skey)
        if local is not None:
            if local.arguments != digest:
                raise KeyReused("this idempotency key was already used with different arguments")
            self.hits += 1
            return await asyncio.shield(local.done)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._running[skey] = entry = _Local(digest, future)
        try:
            state = self.state
            while True:
                owner = os.urandom(12).hex()
                if await state.set_if_absent(CLAIMS, skey, {"owner": owner, "args": digest}, self.lease):
                    settled = await state.get_key(NAMESPACE, skey)
                    if settled is None:
                        self.misses += 1
                        return await self._produce(state, skey, entry, owner, produce, keep)
                    self._background(self._release(state, skey, owner))  # settled meanwhile
                    found = self._read(settled, digest)
                else:
                    found = await self._await_other(state, skey, digest)
                if found is not _VANISHED:
                    self.hits += 1
                    self._settle(skey, entry, result=found)
                    return found
        except BaseException as exc:
            self._settle(skey, entry, error=exc)
            raise

    def _settle(
        self, skey: str, entry: _Local, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        if self._running.get(skey) is entry:
            del self._running[skey]
        if entry.done.done():
            return
        if error is not None:
            entry.done.set_exception(error)
            entry.done.exception()  # retrieved: a waiter re-raises it, nobody else must log it
        else:
            entry.done.set_result(result)

    async def _produce(
        self,
        state: State,
        skey: str,
        entry: _Local,
        owner: str,
        produce: Callable[[], Awaitable[Any]],
        keep: Callable[[Any], bool],
    ) -> Any:
        renewing = asyncio.ensure_future(self._renew(state, skey, owner))
        try:
            outcome = await produce()
        except BaseException as exc:
            renewing.cancel()
            self._settle(skey, entry, error=exc)
            # never awaited here: a cancelled scope would cancel the clean-up too
            self._background(self._abandon(state, skey, owner))
            raise
        renewing.cancel()
        if not entry.done.done():
            entry.done.set_result(outcome)  # duplicates in this process go on at once
        released = False
        try:
            if keep(outcome):
                # shielded: a caller gone now (a cancelled scope) must not leave its duplicates without it
                settled = {"state": "done", "args": entry.arguments, **_dump(outcome)}
                await asyncio.shield(state.set_key(NAMESPACE, skey, settled, self.ttl))
                message = {"done": True}
            else:  # not kept: a call after this one runs again; those waiting now get this outcome
                message = {"done": False, **_dump(outcome)}
                released = await asyncio.shield(self._release(state, skey, owner))
        except Exception:
            logger.exception("could not store the outcome of an idempotency key; it runs again when repeated")
            message = {"done": False}
        finally:
            self._settle(skey, entry, result=outcome)
        # what a later call must see is stored: the caller need not wait for the claim's release, nor the wake-up
        self._background(self._finish(state, skey, None if released else owner, message))
        return outcome

    async def _release(self, state: State, skey: str, owner: str) -> bool:
        try:
            await state.release(CLAIMS, skey, owner)
        except Exception:
            logger.warning(
                "could not release the claim of an idempotency key; it expires in %gs",
                self.lease,
                exc_info=True,
            )
            return False
        return True

    async def _finish(self, state: State, skey: str, owner: str | None, message: dict[str, Any]) -> None:
        if owner is not None:
            await self._release(state, skey, owner)
        try:
            await state.publish(f"{NAMESPACE}.{skey}", message)
        except Exception:
            logger.warning("could not announce the outcome of an idempotency key", exc_info=True)

    async def _renew(self, state: State, skey: str, owner: str) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            try:
                renewed = await state.renew(CLAIMS, skey, owner, self.lease)
            except Exception:
                logger.warning("could not renew the claim of an idempotency key", exc_info=True)
                continue
            if not renewed:
                logger.warning(
                    "lost the claim of an idempotency key while its call ran: a duplicate may run it "
                    "again (the call outlived its %gs lease unrenewed)",
                    self.lease,
                )
                return

    async def _abandon(self, state: State, skey: str, owner: str) -> None:
        await self._finish(state, skey, owner, {"done": False, "abandoned": True})

    def _background(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _await_other(self, state: State, skey: str, digest: str) -> Any:
        """The first outcome of a key another call holds, waiting while it runs; ``_VANISHED`` when the key
        is free again (released without an outcome, or its owner's lease expired)."""
        settled = await state.get_key(NAMESPACE, skey)
        if settled is not None:
            return self._read(settled, digest)
        async with state.subscribe(f"{NAMESPACE}.{skey}") as sub:
            while True:  # read again each time: the subscription is live now, and a message may be missed
                settled = await state.get_key(NAMESPACE, skey)
                if settled is not None:
                    return self._read(settled, digest)
                claim = await state.get_key(CLAIMS, skey)
                if claim is None:
                    return _VANISHED
                if claim.get("args") != digest:
                    raise KeyReused("this idempotency key was already used with different arguments")
                message = await sub.get(self.poll)
                if message is not None:
                    body = message[1]
                    if not body.get("done") and ("outcome" in body or "plain" in body):
                        return self._load(body)  # the first outcome, though not kept

    def _read(self, value: dict[str, Any] | None, digest: str) -> Any:
        if value is None:
            return _VANISHED
        if value.get("args") != digest:
            raise KeyReused("this idempotency key was already used with different arguments")
        return self._load(value)

    def _load(self, stored: Mapping[str, Any]) -> Any:
        return _load(stored, self._load_outcome)
