"""safety/idempotency.py against an in-memory state: the first call runs, a duplicate gets its outcome (kept or
not), a key reused with other arguments is refused with its message, the hit and miss counts, the records'
bound, and a duplicate waiting on a call another process holds. Written from the survivors of a mutation
run (docs/testing.md)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from typing import Any

import pytest

from agentmw.safety import idempotency
from agentmw.safety.idempotency import CLAIMS, NAMESPACE, IdempotencyCache, KeyReused
from agentmw.state import MemoryState
from tests.waiting import eventually

KEY = ("alice", "pay", "k1")
REUSED = "this idempotency key was already used with different arguments"


def counter() -> tuple[list[int], Any]:
    runs: list[int] = []

    async def produce() -> dict[str, Any]:
        runs.append(1)
        return {"n": len(runs)}

    return runs, produce


def always(_: Any) -> bool:
    return True


def never(_: Any) -> bool:
    return False


def test_state_key_is_the_sha256_of_the_key() -> None:
    assert IdempotencyCache.state_key(("a", "b", "c")) == hashlib.sha256(b'["a","b","c"]').hexdigest()
    assert NAMESPACE == "idem"


async def test_a_kept_outcome_is_returned_to_duplicates() -> None:
    cache = IdempotencyCache(ttl_seconds=60)
    runs, produce = counter()
    assert cache.hit_rate == 0.0
    assert await cache.run(KEY, '{"to":"bob"}', produce, always) == {"n": 1}
    assert (cache.hits, cache.misses) == (0, 1)
    assert await cache.run(KEY, '{"to":"bob"}', produce, always) == {"n": 1}
    assert await cache.run(KEY, '{"to":"bob"}', produce, always) == {"n": 1}
    assert runs == [1]
    assert (cache.hits, cache.misses, cache.hit_rate) == (2, 1, 2 / 3)
    stored = await cache.state.get_key(NAMESPACE, cache.state_key(KEY))
    digest = hashlib.sha256(b'{"to":"bob"}').hexdigest()[:32]
    assert stored == {"state": "done", "args": digest, "plain": {"n": 1}}
    assert len(cache.entries) == 0


async def test_a_key_reused_with_other_arguments_is_refused() -> None:
    cache = IdempotencyCache()
    _, produce = counter()
    await cache.run(KEY, "a", produce, always)
    with pytest.raises(KeyReused) as info:
        await cache.run(KEY, "b", produce, always)
    assert str(info.value) == REUSED
    assert isinstance(info.value, ValueError)


async def test_an_outcome_not_kept_runs_again() -> None:
    cache = IdempotencyCache()
    _, produce = counter()
    assert await cache.run(KEY, "a", produce, never) == {"n": 1}
    assert await cache.state.get_key(NAMESPACE, cache.state_key(KEY)) is None  # not kept
    assert await cache.state.get_key(CLAIMS, cache.state_key(KEY)) is None  # released at once
    assert await cache.run(KEY, "a", produce, never) == {"n": 2}
    assert (cache.hits, cache.misses) == (0, 2)


async def test_other_keys_are_other_calls() -> None:
    cache = IdempotencyCache()
    runs, produce = counter()
    await cache.run(KEY, "a", produce, always)
    await cache.run(("bob", "pay", "k1"), "a", produce, always)
    await cache.run(("alice", "pay", "k2"), "a", produce, always)
    await cache.run(("alice", "refund", "k1"), "a", produce, always)
    assert runs == [1, 1, 1, 1]


async def test_a_duplicate_in_this_process_waits_for_the_first_call() -> None:
    cache = IdempotencyCache()
    started, release = asyncio.Event(), asyncio.Event()
    runs: list[int] = []

    async def produce() -> str:
        runs.append(1)
        started.set()
        await release.wait()
        return "first"

    first = asyncio.ensure_future(cache.run(KEY, "a", produce, always))
    await asyncio.wait_for(started.wait(), 5)
    assert len(cache.entries) == 1 and KEY in cache.entries and ("x", "y", "z") not in cache.entries
    assert "not a tuple" not in cache.entries
    with pytest.raises(KeyReused) as info:
        await cache.run(KEY, "b", produce, always)
    assert str(info.value) == REUSED
    second = asyncio.ensure_future(cache.run(KEY, "a", produce, always))
    third = asyncio.ensure_future(cache.run(KEY, "a", produce, always))
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.wait_for(first, 5) == "first"
    assert await asyncio.wait_for(second, 5) == "first"
    assert await asyncio.wait_for(third, 5) == "first"
    assert runs == [1]
    assert (cache.hits, cache.misses) == (2, 1)
    assert len(cache.entries) == 0


async def test_a_failure_reaches_the_waiting_duplicate_and_frees_the_key() -> None:
    cache = IdempotencyCache()
    started, release = asyncio.Event(), asyncio.Event()

    async def failing() -> str:
        started.set()
        await release.wait()
        raise RuntimeError("boom")

    first = asyncio.ensure_future(cache.run(KEY, "a", failing, always))
    await asyncio.wait_for(started.wait(), 5)
    second = asyncio.ensure_future(cache.run(KEY, "a", failing, always))
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(RuntimeError, match="boom"):
        await asyncio.wait_for(first, 5)
    with pytest.raises(RuntimeError, match="boom"):
        await asyncio.wait_for(second, 5)
    claims: list[Any] = []

    async def claim() -> Any:
        return await cache.state.get_key(CLAIMS, cache.state_key(KEY))

    async def released() -> bool:  # in the background
        claims.append(await claim())
        return claims[-1] is None

    await eventually(released, "the claim of a failed call to be released")
    assert claims[-1] is None, "the claim of a failed call was never released"
    assert await cache.state.get_key(NAMESPACE, cache.state_key(KEY)) is None
    _, produce = counter()
    assert await cache.run(KEY, "a", produce, always) == {"n": 1}


async def test_a_duplicate_waits_on_a_call_another_process_holds() -> None:
    state = MemoryState()
    here, there = (
        IdempotencyCache(state=state, poll_seconds=30),
        IdempotencyCache(state=state, poll_seconds=30),
    )
    started, release = asyncio.Event(), asyncio.Event()

    async def produce() -> str:
        started.set()
        await release.wait()
        return "theirs"

    first = asyncio.ensure_future(there.run(KEY, "a", produce, always))
    await asyncio.wait_for(started.wait(), 5)
    runs, mine = counter()
    with pytest.raises(KeyReused) as info:
        await asyncio.wait_for(here.run(KEY, "b", mine, always), 5)
    assert str(info.value) == REUSED
    second = asyncio.ensure_future(here.run(KEY, "a", mine, always))
    channel = f"{NAMESPACE}.{IdempotencyCache.state_key(KEY)}"
    await eventually(lambda: channel in state._hub.channels, "the duplicate waits on the bus")
    third = asyncio.ensure_future(here.run(KEY, "a", mine, always))  # waits on the second, in this process
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.wait_for(first, 5) == "theirs"
    assert await asyncio.wait_for(second, 5) == "theirs"
    assert await asyncio.wait_for(third, 5) == "theirs"
    assert runs == []
    assert (here.hits, here.misses, there.hits, there.misses) == (2, 0, 0, 1)
    with pytest.raises(KeyReused) as info:
        await here.run(KEY, "b", mine, always)  # the settled record is checked too
    assert str(info.value) == REUSED


async def test_a_duplicate_elsewhere_gets_an_outcome_that_is_not_kept() -> None:
    state = MemoryState()
    here, there = IdempotencyCache(state=state, poll_seconds=5), IdempotencyCache(state=state, poll_seconds=5)
    started, release = asyncio.Event(), asyncio.Event()

    async def produce() -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"retry": True}

    first = asyncio.ensure_future(there.run(KEY, "a", produce, never))
    await asyncio.wait_for(started.wait(), 5)
    runs, mine = counter()
    second = asyncio.ensure_future(here.run(KEY, "a", mine, never))
    channel = f"{NAMESPACE}.{IdempotencyCache.state_key(KEY)}"
    await eventually(lambda: channel in state._hub.channels, "the duplicate waits on the bus")
    release.set()
    assert await asyncio.wait_for(first, 5) == {"retry": True}
    assert await asyncio.wait_for(second, 5) == {"retry": True}  # from the bus message, not a poll
    assert runs == []


def test_records_and_claims_are_bounded_in_the_state() -> None:
    state = MemoryState()
    cache = IdempotencyCache(ttl_seconds=10, max_entries=7, state=state, lease_seconds=40)
    assert cache.state is state
    outcomes, claims = state.limits(NAMESPACE), state.limits(CLAIMS)
    assert (outcomes.max_count, outcomes.max_age) == (7, 10)
    assert (claims.max_count, claims.max_age) == (10_000, 40)  # room for 10,000 running calls at least
    big = IdempotencyCache(ttl_seconds=100, max_entries=20_000, state=MemoryState(), lease_seconds=5)
    assert big.state.limits(CLAIMS).max_count == 20_000
    default = IdempotencyCache()
    assert (default.ttl, default.max_entries, default.lease, default.poll) == (
        24 * 3600.0,
        100_000,
        30.0,
        1.0,
    )
    assert isinstance(default.state, MemoryState)
    assert (NAMESPACE, CLAIMS) == ("idem", "idem.run")


def test_a_state_factory_is_called_once() -> None:
    made: list[MemoryState] = []

    def factory() -> MemoryState:
        made.append(MemoryState())
        return made[-1]

    cache = IdempotencyCache(state=factory)
    assert cache.state is cache.state is made[0] and len(made) == 1


async def test_clear_forgets_memory_records_but_not_shared_ones() -> None:
    cache = IdempotencyCache()
    runs, produce = counter()
    await cache.run(KEY, "a", produce, always)
    cache.entries.clear()
    await cache.run(KEY, "a", produce, always)
    assert runs == [1, 1]


def test_dump_and_load() -> None:
    assert idempotency._dump({"a": 1}) == {"plain": {"a": 1}}
    assert idempotency._load({"plain": {"a": 1}}) == {"a": 1}
    assert idempotency._load({}) is None
    assert json.dumps(idempotency._dump([1, "x"])) == '{"plain": [1, "x"]}'


# --- the claim's lease: renewed while the call runs ------------------------------------------------------


class Recording(MemoryState):
    def __init__(self, answers: list[Any] | None = None) -> None:
        super().__init__()
        self.renews: list[tuple[Any, ...]] = []
        self.answers = answers or []

    async def renew(self, ns: str, key: str, owner: str, ttl: float) -> bool:
        self.renews.append((ns, key, owner, ttl))
        if self.answers:
            answer = self.answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return await super().renew(ns, key, owner, ttl)


class FastSleep:
    """``asyncio`` for the module under test, but ``sleep`` records its delay and only yields."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


async def test_the_claim_is_renewed_every_third_of_its_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FastSleep()
    monkeypatch.setattr(idempotency, "asyncio", fake)
    state = Recording()
    cache = IdempotencyCache(state=state, lease_seconds=12)

    async def produce() -> str:
        await eventually(lambda: len(state.renews) >= 3, "three renewals")
        claim = await state.get_key(CLAIMS, cache.state_key(KEY))
        assert claim is not None
        owner = claim["owner"]
        assert state.renews[:3] == [(CLAIMS, cache.state_key(KEY), owner, 12)] * 3
        return "done"

    assert await asyncio.wait_for(cache.run(KEY, "a", produce, always), 10) == "done"
    assert fake.delays[:3] == [4.0, 4.0, 4.0]


async def test_a_renewal_that_fails_is_logged_and_tried_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(idempotency, "asyncio", FastSleep())
    state = Recording([RuntimeError("store down")])
    cache = IdempotencyCache(state=state, lease_seconds=3)

    async def produce() -> str:
        await eventually(lambda: len(state.renews) >= 2, "a renewal after the failed one")
        return "done"

    with caplog.at_level(logging.WARNING, logger="agentmw"):
        assert await asyncio.wait_for(cache.run(KEY, "a", produce, always), 10) == "done"
    failed = [
        r for r in caplog.records if r.getMessage() == "could not renew the claim of an idempotency key"
    ]
    assert len(failed) == 1
    assert failed[0].exc_info is not None and str(failed[0].exc_info[1]) == "store down"


async def test_a_lost_claim_is_logged_and_no_longer_renewed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FastSleep()
    monkeypatch.setattr(idempotency, "asyncio", fake)
    state = Recording([False])
    cache = IdempotencyCache(state=state, lease_seconds=1.5)

    async def produce() -> str:
        await eventually(lambda: caplog.records, "the lost claim logged")
        for _ in range(20):  # the loop's chance to go on (it must not): yields, no time passes
            await asyncio.sleep(0)
        return "done"

    with caplog.at_level(logging.WARNING, logger="agentmw"):
        assert await asyncio.wait_for(cache.run(KEY, "a", produce, always), 10) == "done"
    assert len(state.renews) == 1
    assert [r.getMessage() for r in caplog.records] == [
        (
            "lost the claim of an idempotency key while its call ran: a duplicate may run it again (the call "
            "outlived its 1.5s lease unrenewed)"
        )
    ]


async def test_a_duplicate_elsewhere_takes_over_when_the_first_call_fails() -> None:
    state = MemoryState()
    here, there = (
        IdempotencyCache(state=state, poll_seconds=30),
        IdempotencyCache(state=state, poll_seconds=30),
    )
    started, release = asyncio.Event(), asyncio.Event()

    async def failing() -> str:
        started.set()
        await release.wait()
        raise RuntimeError("boom")

    first = asyncio.ensure_future(there.run(KEY, "a", failing, always))
    await asyncio.wait_for(started.wait(), 5)
    runs, mine = counter()
    second = asyncio.ensure_future(here.run(KEY, "a", mine, always))
    channel = f"{NAMESPACE}.{IdempotencyCache.state_key(KEY)}"
    await eventually(lambda: channel in state._hub.channels, "the duplicate waits on the bus")
    release.set()
    with pytest.raises(RuntimeError, match="boom"):
        await asyncio.wait_for(first, 5)
    # woken by the abandonment, not by its 30 s poll: it runs the call itself
    assert await asyncio.wait_for(second, 5) == {"n": 1}
    assert runs == [1]


async def test_a_duplicate_elsewhere_gets_an_outcome_object_that_is_not_kept() -> None:
    from agentmw.runtime import Outcome

    state = MemoryState()
    here, there = (
        IdempotencyCache(state=state, poll_seconds=30),
        IdempotencyCache(state=state, poll_seconds=30),
    )
    started, release = asyncio.Event(), asyncio.Event()

    async def produce() -> Outcome:
        started.set()
        await release.wait()
        return Outcome(status="failed", message="try later", retryable=True)

    first = asyncio.ensure_future(there.run(KEY, "a", produce, never))
    await asyncio.wait_for(started.wait(), 5)
    runs, mine = counter()
    second = asyncio.ensure_future(here.run(KEY, "a", mine, never))
    channel = f"{NAMESPACE}.{IdempotencyCache.state_key(KEY)}"
    await eventually(lambda: channel in state._hub.channels, "the duplicate waits on the bus")
    release.set()
    assert (await asyncio.wait_for(first, 5)).message == "try later"
    got = await asyncio.wait_for(second, 5)
    assert isinstance(got, Outcome) and (got.status, got.message, got.retryable) == (
        "failed",
        "try later",
        True,
    )
    assert runs == []


async def test_a_claim_whose_owner_died_is_taken_over_after_its_lease() -> None:
    state = MemoryState()
    cache = IdempotencyCache(state=state, poll_seconds=0.02)
    skey = cache.state_key(KEY)
    digest = hashlib.sha256(b"a").hexdigest()[:32]
    assert cache.state is state  # the namespaces' limits are set
    assert await state.set_if_absent(CLAIMS, skey, {"owner": "dead", "args": digest}, 0.1)  # never renewed
    runs, produce = counter()
    assert await asyncio.wait_for(cache.run(KEY, "a", produce, always), 5) == {"n": 1}
    assert runs == [1]


async def test_duplicates_in_this_process_go_on_before_the_outcome_is_stored() -> None:
    stored = asyncio.Event()

    class SlowStore(MemoryState):
        async def set_key(self, ns: str, key: str, value: Any, ttl: float) -> None:
            await stored.wait()
            await super().set_key(ns, key, value, ttl)

    cache = IdempotencyCache(state=SlowStore())
    started, release = asyncio.Event(), asyncio.Event()

    async def produce() -> str:
        started.set()
        await release.wait()
        return "first"

    first = asyncio.ensure_future(cache.run(KEY, "a", produce, always))
    await asyncio.wait_for(started.wait(), 5)
    second = asyncio.ensure_future(cache.run(KEY, "a", produce, always))
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.wait_for(second, 5) == "first"  # while the store is still writing
    assert not first.done()
    stored.set()
    assert await asyncio.wait_for(first, 5) == "first"


async def test_the_claim_is_released_once_the_outcome_is_kept() -> None:
    cache = IdempotencyCache()
    _, produce = counter()
    await cache.run(KEY, "a", produce, always)
    skey = cache.state_key(KEY)

    async def claim() -> Any:
        return await cache.state.get_key(CLAIMS, skey)

    async def released() -> bool:  # in the background
        return await claim() is None

    await eventually(released, "the claim to be released once the outcome is kept")
    assert await claim() is None, "the claim outlived the kept outcome"
    assert (await cache.state.get_key(NAMESPACE, skey))["state"] == "done"


async def test_an_outcome_that_cannot_be_stored_is_returned_and_runs_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(MemoryState):
        async def set_key(self, ns: str, key: str, value: Any, ttl: float) -> None:
            raise RuntimeError("disk full")

    cache = IdempotencyCache(state=Broken())
    _, produce = counter()
    with caplog.at_level(logging.ERROR, logger="agentmw"):
        assert await cache.run(KEY, "a", produce, always) == {"n": 1}
    assert [r.getMessage() for r in caplog.records] == [
        "could not store the outcome of an idempotency key; it runs again when repeated"
    ]
    assert caplog.records[0].exc_info is not None

    async def released() -> bool:
        return await cache.state.get_key(CLAIMS, cache.state_key(KEY)) is None

    await eventually(released, "the claim to be released")
    assert await cache.run(KEY, "a", produce, always) == {"n": 2}


async def claim_of(cache: IdempotencyCache) -> Any:
    """The key's claim once background clean-ups ran (a bounded wait)."""

    async def settled() -> bool:
        return await cache.state.get_key(CLAIMS, cache.state_key(KEY)) is None and not cache._tasks

    with contextlib.suppress(AssertionError):  # the caller checks the claim that is left
        await eventually(settled, "the background clean-ups", timeout=1)
    return await cache.state.get_key(CLAIMS, cache.state_key(KEY))


async def test_a_release_that_fails_is_logged_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    class Flaky(MemoryState):
        failures = 1

        async def release(self, ns: str, key: str, owner: str) -> bool:
            if self.failures:
                self.failures -= 1
                raise RuntimeError("store busy")
            return await super().release(ns, key, owner)

    cache = IdempotencyCache(state=Flaky(), lease_seconds=30)
    _, produce = counter()
    with caplog.at_level(logging.WARNING, logger="agentmw"):
        assert await cache.run(KEY, "a", produce, never) == {"n": 1}
        assert await claim_of(cache) is None  # released by the second try, long before its 30 s lease
    failed = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in failed] == [
        "could not release the claim of an idempotency key; it expires in 30s"
    ]
    assert failed[0].exc_info is not None and str(failed[0].exc_info[1]) == "store busy"


async def test_an_announcement_that_fails_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    class Mute(MemoryState):
        async def publish(self, channel: str, message: Any) -> None:
            raise RuntimeError("bus down")

    cache = IdempotencyCache(state=Mute())
    _, produce = counter()
    with caplog.at_level(logging.WARNING, logger="agentmw"):
        assert await cache.run(KEY, "a", produce, always) == {"n": 1}
        assert await claim_of(cache) is None
    assert [r.getMessage() for r in caplog.records] == [
        "could not announce the outcome of an idempotency key"
    ]
    assert caplog.records[0].exc_info is not None and str(caplog.records[0].exc_info[1]) == "bus down"


async def test_background_clean_ups_are_kept_until_they_end() -> None:
    cache = IdempotencyCache()
    _, produce = counter()
    await cache.run(KEY, "a", produce, always)
    pending = set(cache._tasks)
    assert pending and all(isinstance(t, asyncio.Task) for t in pending)  # referenced: never collected early
    await asyncio.wait_for(asyncio.gather(*pending), 5)
    assert not cache._tasks


async def test_a_claim_taken_after_the_outcome_settled_is_released(caplog: pytest.LogCaptureFixture) -> None:
    cache = IdempotencyCache()
    runs, produce = counter()
    await cache.run(KEY, "a", produce, always)
    assert await claim_of(cache) is None
    with caplog.at_level(logging.WARNING, logger="agentmw"):
        assert await cache.run(KEY, "a", produce, always) == {"n": 1}  # claims, finds the outcome, lets go
        assert await claim_of(cache) is None
    assert runs == [1]
    assert caplog.records == []


async def test_a_local_duplicate_gets_the_error_of_a_call_that_failed_waiting() -> None:
    gate_open = asyncio.Event()

    class Failing(MemoryState):
        async def get_key(self, ns: str, key: str) -> Any:
            if ns == NAMESPACE:
                await gate_open.wait()
                raise RuntimeError("store lost")
            return await super().get_key(ns, key)

    state = Failing()
    cache = IdempotencyCache(state=state)
    assert cache.state is state
    digest = hashlib.sha256(b"a").hexdigest()[:32]
    assert await state.set_if_absent(CLAIMS, cache.state_key(KEY), {"owner": "other", "args": digest}, 30)
    runs, produce = counter()
    first = asyncio.ensure_future(cache.run(KEY, "a", produce, always))
    await eventually(lambda: KEY in cache.entries, "the first call is running")
    second = asyncio.ensure_future(cache.run(KEY, "a", produce, always))
    await asyncio.sleep(0)
    gate_open.set()
    with pytest.raises(RuntimeError, match="store lost"):
        await asyncio.wait_for(first, 5)
    with pytest.raises(RuntimeError, match="store lost"):
        await asyncio.wait_for(second, 5)
    assert runs == [] and len(cache.entries) == 0


async def test_a_duplicate_elsewhere_runs_again_when_the_first_outcome_could_not_be_stored() -> None:
    class Broken(MemoryState):
        async def set_key(self, ns: str, key: str, value: Any, ttl: float) -> None:
            raise RuntimeError("disk full")

    state = Broken()
    here, there = (
        IdempotencyCache(state=state, poll_seconds=30),
        IdempotencyCache(state=state, poll_seconds=30),
    )
    started, release = asyncio.Event(), asyncio.Event()

    async def produce() -> str:
        started.set()
        await release.wait()
        return "first"

    first = asyncio.ensure_future(there.run(KEY, "a", produce, always))
    await asyncio.wait_for(started.wait(), 5)
    runs, mine = counter()
    second = asyncio.ensure_future(here.run(KEY, "a", mine, always))
    channel = f"{NAMESPACE}.{IdempotencyCache.state_key(KEY)}"
    await eventually(lambda: channel in state._hub.channels, "the duplicate waits on the bus")
    release.set()
    assert await asyncio.wait_for(first, 5) == "first"
    assert await asyncio.wait_for(second, 5) == {"n": 1}  # woken, found nothing kept, ran it
    assert runs == [1]
