"""One contract, every backend: memory, SQLite on a file, Redis on a real redis-server."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

import pytest

from agentmw.state import ANY, Conflict, State, StoreLimits
from tests.state.conftest import Open
from tests.waiting import eventually, stays


async def gone(read: Callable[[], Awaitable[object]], what: str, within: float = 0.45) -> None:
    """Poll ``read()`` until it finds nothing; fails when it still finds something ``within`` seconds on (the
    0.3 s lives of this file, plus a margin)."""

    async def absent() -> bool:
        return await read() is None

    await eventually(absent, what, timeout=within)


pytestmark = pytest.mark.timeout(60)


# -- 1. versioned records ---------------------------------------------------------------------------------


async def test_records_compare_and_set(state: State) -> None:
    assert await state.get("tasks", "t1") is None
    assert await state.put("tasks", "t1", {"state": "new"}, expected_version=None) == 1
    with pytest.raises(Conflict) as info:
        await state.put("tasks", "t1", {"state": "again"}, expected_version=0)
    assert (info.value.expected, info.value.actual) == (0, 1)
    assert await state.put("tasks", "t1", {"state": "working"}, expected_version=1) == 2
    with pytest.raises(Conflict) as info:
        await state.put("tasks", "t1", {"state": "stale"}, expected_version=1)
    assert info.value.actual == 2
    assert await state.put("tasks", "t1", {"state": "forced"}, expected_version=ANY) == 3
    value, version = await state.get("tasks", "t1")  # type: ignore[misc]
    assert (value, version) == ({"state": "forced"}, 3)
    with pytest.raises(Conflict):
        await state.put("tasks", "absent", {"x": 1}, expected_version=4)
    with pytest.raises(Conflict):
        await state.delete("tasks", "t1", expected_version=2)
    assert await state.delete("tasks", "t1", expected_version=3) is True
    assert await state.delete("tasks", "t1") is False
    assert await state.get("tasks", "t1") is None
    assert await state.put("tasks", "t1", {"state": "reborn"}, expected_version=None) == 1
    assert await state.put("other", "t1", {"ns": "separate"}, expected_version=None) == 1


async def test_values_are_strict_json_and_copied(state: State) -> None:
    value = {"text": "héllo \u2603 \U0001f600", "n": [1, 2.5, None, True], "deep": {"a": {"b": []}}}
    await state.put("tasks", "v", value, expected_version=None)
    value["deep"]["a"]["b"].append("changed")  # the caller's dict is not the stored one
    got = await state.get("tasks", "v")
    assert (
        got is not None
        and got.value["deep"]["a"]["b"] == []
        and got.value["text"] == "héllo \u2603 \U0001f600"
    )
    got.value["text"] = "mutated"
    assert (await state.get("tasks", "v")).value["text"] != "mutated"  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        await state.put("tasks", "nan", {"x": math.nan}, expected_version=ANY)
    with pytest.raises(TypeError):
        await state.put("tasks", "list", [1, 2], expected_version=ANY)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await state.set_key("idem", "set", {"x": {1, 2}}, ttl=5)
    with pytest.raises(ValueError):
        await state.get("bad ns!", "k")
    with pytest.raises(ValueError):
        await state.get("tasks", "")
    assert await state.get("tasks", "nan") is None


async def test_cas_race_exactly_one_winner(state: State) -> None:
    async def create(i: int) -> bool:
        try:
            await state.put("race", "k", {"winner": i}, expected_version=None)
            return True
        except Conflict:
            return False

    wins = await asyncio.gather(*(create(i) for i in range(40)))
    assert sum(wins) == 1
    winner = (await state.get("race", "k")).value["winner"]  # type: ignore[union-attr]
    assert wins[winner]

    async def advance(i: int) -> bool:
        try:
            await state.put("race", "k", {"winner": i}, expected_version=1)
            return True
        except Conflict:
            return False

    assert sum(await asyncio.gather(*(advance(i) for i in range(40)))) == 1
    assert (await state.get("race", "k")).version == 2  # type: ignore[union-attr]


async def increment(state: State, key: str, times: int) -> int:
    """Read-modify-write with retries on conflict; returns the retries it took."""
    retries = 0
    for _ in range(times):
        while True:
            current = await state.get("counters", key)
            value, version = current if current else ({"n": 0}, 0)
            try:
                await state.put("counters", key, {"n": value["n"] + 1}, expected_version=version)
                break
            except Conflict:
                retries += 1
                await asyncio.sleep(0)
    return retries


async def test_cas_no_lost_updates(state: State) -> None:
    await asyncio.gather(*(increment(state, "c", 10) for _ in range(10)))
    assert (await state.get("counters", "c")).value == {"n": 100}  # type: ignore[union-attr]


async def test_scan_pages_filters_and_order(state: State) -> None:
    for i in range(25):
        await state.put(
            "tasks",
            f"t{i:02d}",
            {"owner": "a" if i % 2 else "b", "i": i, "done": i % 5 == 0},
            expected_version=None,
        )
    middle = time.time()
    await asyncio.sleep(0.01)
    await state.put("tasks", "t03", {"owner": "a", "i": 3, "done": False}, expected_version=1)  # newest now

    pages, cursor = [], None
    while True:
        page = await state.scan("tasks", limit=10, cursor=cursor, total=cursor is None)
        pages.append(page)
        cursor = page.next
        if cursor is None:
            break
    keys = [item.key for page in pages for item in page.items]
    assert [len(p.items) for p in pages] == [10, 10, 5] and pages[0].total == 25
    expected = ["t03"] + [f"t{i:02d}" for i in range(24, -1, -1) if i != 3]
    assert keys == expected
    times = [item.updated_at for page in pages for item in page.items]
    assert times == sorted(times, reverse=True)
    assert pages[0].items[0].version == 2 and pages[0].items[0].value["i"] == 3

    oldest = await state.scan("tasks", newest_first=False, limit=3)
    assert [i.key for i in oldest.items] == ["t00", "t01", "t02"]
    second = await state.scan("tasks", newest_first=False, limit=3, cursor=oldest.next)
    assert [i.key for i in second.items] == ["t04", "t05", "t06"]

    mine = await state.scan("tasks", where={"owner": "a"}, limit=5, total=True)
    assert mine.total == 12 and all(i.value["owner"] == "a" for i in mine.items)
    assert [i.key for i in mine.items] == ["t03", "t23", "t21", "t19", "t17"]
    rest = await state.scan("tasks", where={"owner": "a"}, limit=50, cursor=mine.next)
    assert len(rest.items) == 7 and rest.next is None
    both = await state.scan("tasks", where={"owner": "b", "done": True}, total=True)
    assert sorted(i.key for i in both.items) == ["t00", "t10", "t20"] and both.total == 3
    assert (await state.scan("tasks", where={"missing": None}, total=True)).total == 26 - 0 - 1
    recent = await state.scan("tasks", since=middle, total=True)
    assert [i.key for i in recent.items] == ["t03"] and recent.total == 1
    empty = await state.scan("nothing-here", total=True)
    assert empty.items == [] and empty.next is None and empty.total == 0
    with pytest.raises(ValueError):
        await state.scan("tasks", cursor="not-a-cursor")
    with pytest.raises(ValueError):
        await state.scan("tasks", where={"a.b": 1})


async def test_records_bounded_by_count_and_age(open_store: Open) -> None:
    state = await open_store(limits={"few": StoreLimits(max_count=5), "brief": StoreLimits(max_age=0.3)})
    for i in range(12):
        await state.put("few", f"k{i}", {"i": i}, expected_version=None)
    page = await state.scan("few", limit=100, total=True)
    assert page.total == 5 and [i.key for i in page.items] == ["k11", "k10", "k9", "k8", "k7"]
    assert await state.get("few", "k0") is None

    await state.put("brief", "k", {"x": 1}, expected_version=None)
    assert await state.get("brief", "k") is not None
    await gone(lambda: state.get("brief", "k"), "the record past its max_age")
    assert await state.get("brief", "k") is None
    assert (await state.scan("brief", total=True)).total == 0
    assert await state.put("brief", "k", {"x": 2}, expected_version=None) == 1  # expired counts as absent


# -- 2. expiring keys -------------------------------------------------------------------------------------


async def test_keys_set_if_absent_and_expiry(state: State) -> None:
    assert await state.get_key("idem", "k") is None
    assert await state.set_if_absent("idem", "k", {"outcome": 1}, ttl=0.3) is True
    assert await state.set_if_absent("idem", "k", {"outcome": 2}, ttl=0.3) is False
    assert await state.get_key("idem", "k") == {"outcome": 1}
    await gone(lambda: state.get_key("idem", "k"), "the key past its ttl")
    assert await state.get_key("idem", "k") is None
    assert await state.set_if_absent("idem", "k", {"outcome": 3}, ttl=5) is True
    await state.set_key("idem", "k", {"outcome": 4}, ttl=5)
    assert await state.get_key("idem", "k") == {"outcome": 4}
    assert await state.delete_key("idem", "k") is True
    assert await state.delete_key("idem", "k") is False
    await state.set_key("idem", "short", {"x": 1}, ttl=0.2)
    await asyncio.sleep(0.35)
    assert await state.delete_key("idem", "short") is False  # expired: not live, so not deleted by us
    with pytest.raises(ValueError):
        await state.set_key("idem", "k", {}, ttl=0)


async def test_key_races_exactly_one_winner(state: State) -> None:
    results = await asyncio.gather(
        *(state.set_if_absent("once", "nonce", {"by": i}, ttl=10) for i in range(50))
    )
    assert sum(results) == 1
    assert (await state.get_key("once", "nonce"))["by"] == results.index(True)  # type: ignore[index]
    deletes = await asyncio.gather(*(state.delete_key("once", "nonce") for _ in range(20)))
    assert sum(deletes) == 1


async def test_ttl_capped_by_namespace_age(open_store: Open) -> None:
    state = await open_store(limits={"capped": StoreLimits(max_age=0.3)})
    assert await state.set_if_absent("capped", "k", {"x": 1}, ttl=3600)
    await gone(lambda: state.get_key("capped", "k"), "the key past its namespace's max_age")
    assert await state.get_key("capped", "k") is None


async def test_keys_bounded_by_count(open_store: Open) -> None:
    state = await open_store(limits={"few": StoreLimits(max_count=5)})
    for i in range(12):
        await state.set_key("few", f"k{i}", {"i": i}, ttl=60 + i)  # later keys expire later
    live = [i for i in range(12) if await state.get_key("few", f"k{i}") is not None]
    assert live == [7, 8, 9, 10, 11]


async def test_leases_renew_and_release_by_owner_only(state: State) -> None:
    assert await state.set_if_absent("lease", "task-1", {"owner": "replica-a", "since": 1}, ttl=0.6)
    assert await state.set_if_absent("lease", "task-1", {"owner": "replica-b"}, ttl=0.6) is False
    assert await state.renew("lease", "task-1", "replica-b", ttl=0.6) is False
    for _ in range(4):  # renewed past its first expiry
        await asyncio.sleep(0.2)
        assert await state.renew("lease", "task-1", "replica-a", ttl=0.6) is True
    assert await state.get_key("lease", "task-1") == {"owner": "replica-a", "since": 1}
    await asyncio.sleep(0.75)
    assert await state.renew("lease", "task-1", "replica-a", ttl=0.6) is False  # expired: lost
    assert await state.set_if_absent("lease", "task-1", {"owner": "replica-b"}, ttl=5)
    assert await state.release("lease", "task-1", "replica-a") is False
    assert await state.get_key("lease", "task-1") == {"owner": "replica-b"}
    assert await state.release("lease", "task-1", "replica-b") is True
    assert await state.get_key("lease", "task-1") is None
    assert await state.renew("lease", "never", "replica-a", ttl=1) is False
    await state.set_key("lease", "odd", {"owner": 7}, ttl=5)
    assert await state.renew("lease", "odd", "7", ttl=5) is False


async def test_lease_race_one_holder(state: State) -> None:
    takes = await asyncio.gather(
        *(state.set_if_absent("lease", "job", {"owner": f"w{i}"}, ttl=5) for i in range(30))
    )
    holder = f"w{takes.index(True)}"
    renews = await asyncio.gather(*(state.renew("lease", "job", f"w{i}", ttl=5) for i in range(30)))
    assert sum(takes) == 1 and [f"w{i}" for i, ok in enumerate(renews) if ok] == [holder]


# -- 3. logs ----------------------------------------------------------------------------------------------


async def test_log_append_and_read(state: State) -> None:
    ids = [await state.append("runs", "r1", {"n": n}) for n in range(10)]
    assert ids == sorted(ids) and len(set(ids)) == 10 and ids[0] > 0
    entries = await state.read("runs", "r1")
    assert entries == [(i, {"n": n}) for n, i in enumerate(ids)]
    assert await state.read("runs", "r1", after_id=ids[4], limit=3) == [
        (ids[5], {"n": 5}),
        (ids[6], {"n": 6}),
        (ids[7], {"n": 7}),
    ]
    assert await state.read("runs", "r1", after_id=ids[-1]) == []
    assert await state.read("runs", "nope") == []
    other = await state.append("runs", "r2", {"n": "other"})
    assert [e for _, e in await state.read("runs", "r2")] == [{"n": "other"}]
    assert (await state.append("runs", "r1", {"n": 10})) > max(ids[-1], 0) and other > 0


async def test_log_blocking_read_wakes_on_append(state: State) -> None:
    first = await state.append("runs", "r", {"n": 0})
    assert await state.read("runs", "r", after_id=first, block=0.2) == []
    started = time.monotonic()
    reader = asyncio.ensure_future(state.read("runs", "r", after_id=first, block=5))
    await stays(lambda: not reader.done(), "the read blocks until an append", seconds=0.1)
    second = await state.append("runs", "r", {"n": 1})
    assert await reader == [(second, {"n": 1})]
    assert time.monotonic() - started < 1.5


async def test_log_tail_in_order_with_no_gaps(state: State) -> None:
    appended: list[int] = []

    async def writer(w: int) -> None:
        for n in range(20):
            appended.append(await state.append("runs", "busy", {"w": w, "n": n}))
            if n % 5 == 0:
                await asyncio.sleep(0.01)

    seen: list[tuple[int, dict]] = []

    async def follow() -> None:
        async for entry in state.tail("runs", "busy", batch=7, wait=1):
            seen.append(entry)
            if len(seen) == 100:
                return

    follower = asyncio.ensure_future(follow())
    await stays(lambda: not follower.done(), "the follower waits on the empty log", seconds=0.05)
    await asyncio.gather(*(writer(w) for w in range(5)))
    await asyncio.wait_for(follower, 10)
    ids = [i for i, _ in seen]
    assert ids == sorted(ids) and len(set(ids)) == 100 and set(ids) == set(appended)
    for w in range(5):
        assert [e["n"] for _, e in seen if e["w"] == w] == list(range(20))


async def test_log_trimmed_by_count(open_store: Open) -> None:
    state = await open_store(limits={"short": StoreLimits(max_len=5)})
    ids = [await state.append("short", "log", {"n": n}) for n in range(12)]
    assert await state.read("short", "log") == [(i, {"n": n}) for n, i in enumerate(ids)][-5:]
    assert await state.read("short", "log", after_id=ids[8]) == [
        (ids[9], {"n": 9}),
        (ids[10], {"n": 10}),
        (ids[11], {"n": 11}),
    ]


async def test_log_trimmed_by_age(open_store: Open) -> None:
    state = await open_store(limits={"brief": StoreLimits(max_age=0.3)})
    await state.append("brief", "log", {"n": 0})
    await state.append("brief", "log", {"n": 1})
    await asyncio.sleep(0.45)
    last = await state.append("brief", "log", {"n": 2})
    assert await state.read("brief", "log") == [(last, {"n": 2})]
    await asyncio.sleep(0.45)
    assert await state.read("brief", "log") == []
    assert await state.read("brief", "log", after_id=0, block=0.1) == []


async def test_logs_bounded_in_number(open_store: Open) -> None:
    state = await open_store(limits={"few": StoreLimits(max_count=3)})
    for n in range(5):
        await state.append("few", f"log{n}", {"n": n})
        await asyncio.sleep(0.002)
    assert [bool(await state.read("few", f"log{n}")) for n in range(5)] == [False, False, True, True, True]


# -- 4. the bus -------------------------------------------------------------------------------------------


async def test_bus_fans_out_to_every_subscriber(state: State) -> None:
    await state.publish("tasks", {"before": True})  # nobody listening: lost, never delivered later
    async with (
        state.subscribe("tasks") as a,
        state.subscribe("tasks") as b,
        state.subscribe("tasks", "cancel") as c,
        state.subscribe("other") as other,
    ):
        for n in range(10):
            await state.publish("tasks", {"n": n})
        await state.publish("cancel", {"task": "t1"})
        for sub in (a, b):
            assert [await sub.get(timeout=2) for _ in range(10)] == [("tasks", {"n": n}) for n in range(10)]
        got = [await c.get(timeout=2) for _ in range(11)]
        assert got == [("tasks", {"n": n}) for n in range(10)] + [("cancel", {"task": "t1"})]
        assert await other.get(timeout=0.2) is None
        assert await a.get(timeout=0.1) is None
    await state.publish("tasks", {"after": True})
    assert await a.get(timeout=0.1) is None


async def test_bus_iterator_and_slow_subscriber(state: State) -> None:
    async with state.subscribe("list", max_queue=3) as slow, state.subscribe("list") as fast:
        for n in range(6):
            await state.publish("list", {"n": n})
        received = []
        async for channel, message in fast:
            received.append(message["n"])
            if len(received) == 6:
                break
        assert received == list(range(6))
        await eventually(lambda: slow.dropped >= 3, "the slow subscriber to drop what its queue cannot hold")
        assert [await slow.get(timeout=1) for _ in range(3)] == [("list", {"n": n}) for n in range(3)]
        assert slow.dropped == 3 and await slow.get(timeout=0.1) is None


async def test_bus_subscription_ends_when_closed(state: State) -> None:
    sub = state.subscribe("x")
    with pytest.raises(RuntimeError):
        await sub.get()
    async with sub:
        waiter = asyncio.ensure_future(sub.__anext__())
        await stays(lambda: not waiter.done(), "the subscriber waits for a message", seconds=0.05)
        await sub.aclose()
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(waiter, 2)


# -- batches ----------------------------------------------------------------------------------------------


async def test_put_many_versions_and_conflicts(state: State) -> None:
    assert await state.put_many([]) == []
    if hasattr(state, "client"):  # Redis: the batch scripts must be loaded again in the middle of a pipeline
        await state.client.script_flush()
    await state.put("tasks", "old", {"n": 0}, expected_version=None)
    results = await state.put_many(
        [
            ("tasks", "a", {"n": 1}, None),
            ("tasks", "old", {"n": 1}, 1),
            ("tasks", "a", {"n": 2}, 1),  # sees the item before it
            ("tasks", "b", {"n": 1}, 3),  # absent: a conflict, returned in its place
            ("tasks", "old", {"n": 2}, 1),  # stale now
            ("other", "a", {"n": 9}, ANY),
            ("tasks", "c", {"n": 1}, 0),
        ]
    )
    assert results[:3] == [1, 2, 2] and results[5:] == [1, 1]
    for i, pair in ((3, (3, 0)), (4, (1, 2))):
        conflict = results[i]
        assert isinstance(conflict, Conflict) and (conflict.expected, conflict.actual) == pair
        assert conflict.key == ("b" if i == 3 else "old") and conflict.ns == "tasks"
    assert (await state.get("tasks", "a")) == ({"n": 2}, 2)
    assert (await state.get("tasks", "old")) == ({"n": 1}, 2)
    assert await state.get("tasks", "b") is None
    assert (await state.get("other", "a")) == ({"n": 9}, 1)
    page = await state.scan("tasks", total=True)
    assert page.total == 3 and {i.key for i in page.items} == {"a", "old", "c"}


async def test_put_many_of_new_records_only(open_store: Open) -> None:
    """A batch that only creates (SQLite writes it in one statement): each new or expired key gets version 1,
    each live one is a conflict in its place, and a conflict costs the others nothing."""
    state = await open_store(limits={"brief": StoreLimits(max_age=0.3)})
    assert await state.put_many([("tasks", f"n{i}", {"i": i}, None) for i in range(5)]) == [1] * 5
    await state.put("brief", "gone", {"old": True}, expected_version=None)
    await asyncio.sleep(0.4)  # past its age: creating it again is allowed
    await state.put("brief", "live", {"old": True}, expected_version=None)
    results = await state.put_many(
        [
            ("brief", "new1", {"n": 1}, None),
            ("brief", "live", {"new": True}, 0),
            ("brief", "gone", {"new": True}, None),
            ("brief", "new2", {"n": 2}, 0),
        ]
    )
    assert results[0] == 1 and results[2:] == [1, 1]
    assert isinstance(results[1], Conflict) and (results[1].expected, results[1].actual) == (0, 1)
    assert (await state.get("brief", "live")) == ({"old": True}, 1)
    assert (await state.get("brief", "gone")) == ({"new": True}, 1)
    assert (await state.get("brief", "new2")) == ({"n": 2}, 1)
    assert [(await state.get("tasks", f"n{i}")) for i in range(5)] == [({"i": i}, 1) for i in range(5)]


async def test_put_many_checks_every_item_before_writing(state: State) -> None:
    bad: list[tuple] = [
        ("bad ns!", "k", {}, None),
        ("tasks", "", {}, None),
        ("tasks", "k", {"x": math.nan}, None),
        ("tasks", "k", [1], None),
        ("tasks", "k", {}, -5),
    ]
    for item in bad:
        with pytest.raises((ValueError, TypeError)):
            await state.put_many([("tasks", "first", {"ok": True}, None), item])
    with pytest.raises(TypeError):
        await state.put_many([("tasks", "short", {})])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        await state.put_many([("tasks", f"k{i}", {}, ANY) for i in range(1001)])
    assert await state.get("tasks", "first") is None
    with pytest.raises((ValueError, TypeError)):
        await state.append_many([("runs", "r", {"ok": 1}), ("runs", "r", {"x": {1}})])
    assert await state.read("runs", "r") == []


async def test_put_many_races_exactly_one_winner(open_store: Open) -> None:
    stores = [await open_store(), await open_store()]

    async def create(i: int) -> list[int]:
        results = await stores[i % 2].put_many([("race", f"k{k}", {"by": i}, None) for k in range(10)])
        return [k for k, r in enumerate(results) if not isinstance(r, Conflict)]

    won = await asyncio.gather(*(create(i) for i in range(20)))
    assert sorted(k for keys in won for k in keys) == list(range(10))
    for k in range(10):
        winner = (await stores[0].get("race", f"k{k}")).value["by"]  # type: ignore[union-attr]
        assert k in won[winner]

    async def bump(i: int) -> None:
        for _ in range(10):
            while True:
                current = await stores[i % 2].get("counters", "c")
                value, version = current if current else ({"n": 0}, 0)
                [result] = await stores[i % 2].put_many([("counters", "c", {"n": value["n"] + 1}, version)])
                if not isinstance(result, Conflict):
                    break
                await asyncio.sleep(0)

    await asyncio.gather(*(bump(i) for i in range(6)))
    assert (await stores[1].get("counters", "c")).value == {"n": 60}  # type: ignore[union-attr]


async def test_put_many_bounded_like_put(open_store: Open) -> None:
    state = await open_store(limits={"few": StoreLimits(max_count=5)})
    for start in range(0, 40, 8):
        await state.put_many([("few", f"k{i:02d}", {"i": i}, None) for i in range(start, start + 8)])
    page = await state.scan("few", limit=100, total=True)
    assert 5 <= page.total <= 5 + 40 // 20 * 8  # SQLite prunes in batches (docs/state.md, Bounds)
    assert "k39" in {i.key for i in page.items} and await state.get("few", "k00") is None


async def test_append_many(state: State) -> None:
    assert await state.append_many([]) == []
    first = await state.append("runs", "r1", {"n": 0})
    ids = await state.append_many(
        [
            ("runs", "r1", {"n": 1}),
            ("runs", "r2", {"m": 1}),
            ("runs", "r1", {"n": 2}),
            ("other", "r1", {"o": 1}),
            ("runs", "r2", {"m": 2}),
        ]
    )
    assert len(ids) == 5 and first < ids[0] < ids[2] and ids[1] < ids[4]  # increasing within each log
    assert await state.read("runs", "r1") == [(first, {"n": 0}), (ids[0], {"n": 1}), (ids[2], {"n": 2})]
    assert await state.read("runs", "r2") == [(ids[1], {"m": 1}), (ids[4], {"m": 2})]
    assert await state.read("other", "r1") == [(ids[3], {"o": 1})]
    assert await state.append("runs", "r1", {"n": 3}) > ids[2]


async def test_append_many_wakes_readers_and_trims(open_store: Open) -> None:
    state = await open_store(limits={"short": StoreLimits(max_len=3)})
    reader = asyncio.ensure_future(state.read("short", "log", block=5))
    other = asyncio.ensure_future(state.read("short", "log2", block=5))
    await stays(
        lambda: not reader.done() and not other.done(), "both reads block until an append", seconds=0.1
    )
    started = time.monotonic()
    ids = await state.append_many(
        [("short", "log", {"n": n}) for n in range(5)] + [("short", "log2", {"x": 1})]
    )
    assert (await reader)[0] in [(i, {"n": n}) for n, i in enumerate(ids[:5])]
    assert await other == [(ids[5], {"x": 1})]
    assert time.monotonic() - started < 1.5
    assert await state.read("short", "log") == [(ids[n], {"n": n}) for n in (2, 3, 4)]
