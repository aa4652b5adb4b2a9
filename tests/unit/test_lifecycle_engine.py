"""The lifecycle engine (``agentmw.lifecycle``) on its own, on a memory state: the state table, records
with compare-and-set, write-behind, heartbeats and leases, the sweep's pacing, event logs and their
followers, the bus and cancellation with an answer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentmw.lifecycle import (
    INTERRUPTED,
    SETTLED,
    TERMINAL,
    TRANSITIONS,
    Background,
    BusListener,
    Canceller,
    EventLog,
    Followers,
    Heartbeat,
    Leases,
    LogWriter,
    Records,
    Sweeper,
    TaskRecord,
    TaskState,
    WriteBehind,
    allowed,
    every,
    limit,
    retry,
    tell,
)
from agentmw.state import Conflict, MemoryState, Versioned
from tests.waiting import eventually

# --- states --------------------------------------------------------------------------------------------


def test_every_state_has_its_moves_and_the_final_ones_go_nowhere() -> None:
    assert set(TRANSITIONS) == set(TaskState)
    for state in TERMINAL:
        assert TRANSITIONS[state] == frozenset()
        assert not allowed(state, TaskState.WORKING)
    assert SETTLED == TERMINAL | INTERRUPTED and not TERMINAL & INTERRUPTED
    assert allowed(TaskState.SUBMITTED, TaskState.WORKING)
    assert allowed(TaskState.WORKING, TaskState.INPUT_REQUIRED)
    assert allowed(TaskState.INPUT_REQUIRED, TaskState.WORKING)  # an answer resumes it
    assert allowed(TaskState.INPUT_REQUIRED, TaskState.FAILED)  # its holder is gone
    assert not allowed(TaskState.WORKING, TaskState.SUBMITTED)
    assert not allowed("no such state", TaskState.WORKING)


def test_a_state_is_its_stored_spelling() -> None:
    record = TaskRecord("t", "c", "o")
    assert record.state == TaskState.SUBMITTED
    stored = TaskRecord.from_dict(record.to_stored(None))
    assert stored.state == TaskState.SUBMITTED and stored.state in {TaskState.SUBMITTED}
    assert TaskState(stored.state) is TaskState.SUBMITTED
    record.state = TaskState.COMPLETED
    assert record.terminal and TaskRecord.from_dict(record.to_dict()).terminal


# --- records -------------------------------------------------------------------------------------------


async def test_commit_reapplies_a_change_on_a_conflict() -> None:
    state = MemoryState()
    records = Records(state, "t.records")
    seen: list[int] = []

    def bump(found: Versioned | None) -> dict[str, Any]:
        seen.append(found.version if found else 0)
        if len(seen) == 1:  # another writer comes first, once
            asyncio.get_running_loop().create_task(state.put("t.records", "k", {"n": 10}, expected_version=0))
        return {"n": (found.value["n"] if found else 0) + 1}

    value, version = await records.commit("k", lambda found: {"n": 0})  # type: ignore[misc]
    assert value == {"n": 0} and version == 1
    await state.put("t.records", "k", {"n": 5}, expected_version=1)
    value, version = await records.commit("k", bump)  # type: ignore[misc]
    assert value == {"n": 6} and version == 3
    assert await records.commit("k", lambda found: None) is None  # left as it is
    assert (await records.get("k")).value == {"n": 6}  # type: ignore[union-attr]


async def test_commit_gives_up_after_its_attempts() -> None:
    state = MemoryState()
    records = Records(state, "t.records")
    await records.put("k", {"n": 0}, 0)

    def racing(found: Versioned | None) -> dict[str, Any]:
        return {"n": 1}

    original = state.put
    calls = 0

    async def always_conflicts(ns: str, key: str, value: Any, *, expected_version: int | None) -> int:
        nonlocal calls
        calls += 1
        raise Conflict(ns, key, expected_version or 0, 99)

    state.put = always_conflicts  # type: ignore[method-assign]
    with pytest.raises(Conflict):
        await records.commit("k", racing, attempts=3)
    state.put = original  # type: ignore[method-assign]
    assert calls == 3


async def test_retry_retries_a_passing_failure_but_never_a_conflict() -> None:
    tries = 0

    async def flaky() -> int:
        nonlocal tries
        tries += 1
        if tries < 3:
            raise OSError("down")
        return 7

    assert await retry(flaky) == 7 and tries == 3

    async def conflicting() -> int:
        nonlocal tries
        tries += 1
        raise Conflict("ns", "k", 1, 2)

    tries = 0
    with pytest.raises(Conflict):
        await retry(conflicting)
    assert tries == 1


# --- write-behind ----------------------------------------------------------------------------------------


async def test_write_behind_batches_what_settles_together_and_flush_writes_at_once() -> None:
    batches: list[list[int]] = []
    writer: WriteBehind[int]

    async def write(batch: list[int]) -> None:
        batches.append(batch)
        writer.done(len(batch))

    writer = WriteBehind(write, lambda: 30.0, "test-writer")  # waits for company far longer than the test
    writer.add(1)
    writer.add(2)
    await asyncio.sleep(0)
    assert batches == [] and writer.pending == 2
    await writer.flush()
    assert batches == [[1, 2]] and writer.pending == 0
    writer.add(3, urgent=True)  # an urgent change does not wait
    await eventually(lambda: batches == [[1, 2], [3]], "the urgent write")
    writer.close()
    await asyncio.gather(writer.task)  # type: ignore[arg-type]
    assert writer.stopped()


# --- heartbeat, leases, sweep ----------------------------------------------------------------------------


async def test_a_heartbeat_says_who_is_alive_and_goes_with_its_process() -> None:
    state = MemoryState()
    background = Background()
    started: list[str] = []

    async def listener(up: asyncio.Future[None]) -> None:
        started.append("listening")
        up.set_result(None)
        await asyncio.Event().wait()

    one = Heartbeat(state, "t.replicas", "one", 0.3, label="T", background=background)
    other = Heartbeat(state, "t.replicas", "other", 0.3, label="T", background=background)
    assert not await other.alive("one")
    await asyncio.gather(one.start(listener), one.start(listener))  # started once
    assert started == ["listening"] and one.started
    assert await other.alive("one")
    await asyncio.sleep(0.4)  # past its life: renewed meanwhile
    other._alive.clear()
    assert await other.alive("one")
    await one.stop()
    other._alive.clear()
    assert not await other.alive("one")
    await background.close()


async def test_leases_are_held_by_one_owner_and_taken_back_when_forgotten() -> None:
    state = MemoryState()
    mine, theirs = Leases(state, "t.leases", "me", 5.0), Leases(state, "t.leases", "them", 5.0)
    assert await mine.acquire("stream") and not await theirs.acquire("stream")
    await state.delete_key("t.leases", "stream")  # the store forgot it
    assert await mine.renew_all() == [] and not await theirs.acquire("stream")
    await mine.release("stream")
    assert await theirs.acquire("stream")
    mine.held.add("stream")
    assert await mine.renew_all() == ["stream"] and mine.held == set()


async def test_the_sweeper_paces_sweeps_and_take_overs() -> None:
    sweeper = Sweeper(every=60.0, retry=60.0)
    assert sweeper.due() and not sweeper.due()
    assert sweeper.may_try("a") and not sweeper.may_try("a") and sweeper.may_try("b")
    taken: list[str] = []

    async def find() -> list[str]:
        return ["x", "y"]

    async def take(key: str) -> None:
        taken.append(key)

    await sweeper.sweep(find, take, label="T")
    await sweeper.sweep(find, taken.append, label="T")
    assert taken == ["x", "y", "x", "y"]

    async def broken() -> list[str]:
        raise OSError("down")

    await sweeper.sweep(broken, take, label="T")  # logged, not raised


# --- event logs and followers ------------------------------------------------------------------------------


async def test_a_follower_reads_the_log_after_the_record_until_the_final_event() -> None:
    state = MemoryState()
    log = EventLog(state, "t.events")
    first = await log.append("task", {"n": 1})
    await log.append("task", {"n": 2})

    async def going() -> None:
        return None

    async def later() -> None:
        await asyncio.sleep(0.05)
        await log.append("task", {"n": 3, "final": True})

    adding = asyncio.create_task(later())
    got = [e async for e in log.follow("task", first, is_final=lambda e: e.get("final"), when_quiet=going)]
    await adding
    assert got == [{"n": 2}, {"n": 3, "final": True}]


async def test_a_quiet_log_ends_with_what_the_record_says() -> None:
    state = MemoryState()
    log = EventLog(state, "t.events")
    answers: list[list[dict[str, Any]] | None] = [None, [{"n": "status"}]]

    async def quiet() -> list[dict[str, Any]] | None:
        answer = answers.pop(0)
        if answer is not None:
            await log.append("task", {"n": "tail"})  # appended before its record was written
        return answer

    got = [e async for e in log.follow("task", 0, is_final=lambda e: False, when_quiet=quiet, block=0.01)]
    assert got == [{"n": "tail"}, {"n": "status"}]

    async def gone() -> list[dict[str, Any]]:
        return []

    assert [
        e async for e in log.follow("gone", 0, is_final=lambda e: False, when_quiet=gone, block=0.01)
    ] == []


async def test_followers_get_each_event_then_the_end() -> None:
    followers = Followers()
    one, two = followers.add(), followers.add()
    assert followers and len(followers) == 2 and one in followers
    followers.send({"n": 1})
    followers.discard(two)
    followers.end({"n": "last"})
    assert not followers
    assert [one.get_nowait() for _ in range(3)] == [{"n": 1}, {"n": "last"}, None]
    assert two.get_nowait() == {"n": 1} and two.empty()


# --- the bus and cancels -----------------------------------------------------------------------------------


async def test_a_bus_listener_skips_its_own_replica_and_survives_a_bad_message() -> None:
    state = MemoryState()
    background = Background()
    got: list[dict[str, Any]] = []

    def on_message(message: dict[str, Any]) -> None:
        if message.get("bad"):
            raise ValueError("bad")
        got.append(message)

    listener = BusListener(state, "t.bus", on_message, label="T", replica="me")
    up = asyncio.get_running_loop().create_future()
    background.spawn(listener.run(up), "listener")
    await up
    await tell(state, "t.bus", {"task": "a", "r": "me"})
    await tell(state, "t.bus", {"bad": True})
    await tell(state, "t.bus", {"task": "b", "r": "other"})
    await eventually(lambda: got == [{"task": "b", "r": "other"}], "the other replica's message")
    await background.close()


async def test_a_cancel_is_answered_by_the_holder() -> None:
    state = MemoryState()
    background = Background()
    canceller = Canceller(state, "t.cancel.", "t.cancelled.", background)
    running = asyncio.Event()
    running.set()

    async def cancel() -> bool:
        was = running.is_set()
        running.clear()
        return was

    watch = await canceller.watch("run-1", cancel)
    assert await canceller.request("run-1", 5.0) is True
    assert await canceller.request("run-1", 5.0) is False  # not running any more
    watch.close()
    assert await canceller.request("nobody", 0.05) is None
    await background.close()


def test_limit_bounds_every_namespace() -> None:
    state = MemoryState()
    limit(state, ["t.a", "t.b"], max_count=5, max_age=60.0)
    limit(state, ["t.c"], max_count=5, max_age=60.0, max_len=7)
    assert state.limits("t.a").max_count == 5 and state.limits("t.b").max_age == 60.0
    assert state.limits("t.c").max_len == 7


async def test_save_writes_at_the_held_version_and_merges_only_on_a_conflict() -> None:
    state = MemoryState()
    records = Records(state, "t.records")
    reads: list[int] = []

    def merge(found: Versioned | None) -> dict[str, Any] | None:
        reads.append(found.version if found else 0)
        return {"n": (found.value["n"] if found else 0) + 1}

    assert await records.save("k", {"n": 1}, 0, merge) == 1 and reads == []  # no read when it lands
    await state.put("t.records", "k", {"n": 10}, expected_version=1)  # another writer comes first
    assert await records.save("k", {"n": 2}, 1, merge) == 3 and reads == [2]
    assert (await records.get("k")).value == {"n": 11}  # type: ignore[union-attr]
    assert await records.save("k", {"n": 3}, 1, lambda found: None) is None  # merge stopped it
    with pytest.raises(Conflict):
        await records.save("k", {"n": 4}, 1, merge, attempts=1)


async def test_every_ticks_until_cancelled_and_survives_a_failing_tick() -> None:
    ticks: list[int] = []
    done = asyncio.Event()

    async def tick() -> None:
        ticks.append(len(ticks))
        if len(ticks) == 1:
            raise OSError("down")
        if len(ticks) == 3:
            done.set()

    task = asyncio.create_task(every(lambda: 0.001, tick, label="T"))
    await asyncio.wait_for(done.wait(), 5.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ticks[:3] == [0, 1, 2]


async def test_a_log_writer_writes_behind_in_entries_and_ends_the_log() -> None:
    state = MemoryState()
    log = EventLog(state, "t.events")
    writer = LogWriter(log, "run", batch=2, keep=4, name="t-log", label="T")
    writer.add([(1, b"a"), (2, b"b"), (3, "c")])
    await eventually(lambda: state.read("t.events", "run", 0, 10), "the writer's entries")
    await writer.close([(4, "d"), (5, "e"), (6, "f"), (7, "g"), (8, "h")], end=True, next_seq=9)
    entries = [entry for _, entry in await state.read("t.events", "run", 0, 10)]
    assert entries[0] == {"first": 1, "frames": ["a", "b"]} and entries[1] == {"first": 3, "frames": ["c"]}
    assert entries[2:] == [  # the backlog kept its newest four
        {"first": 5, "frames": ["e", "f"]},
        {"first": 7, "frames": ["g", "h"], "end": True},
    ]

    empty = LogWriter(log, "quiet", batch=2, keep=4, name="t-log", label="T")
    await empty.close(end=True, next_seq=1)  # nothing was written: the end is, alone
    assert [entry for _, entry in await state.read("t.events", "quiet", 0, 10)] == [
        {"first": 1, "frames": [], "end": True}
    ]
