"""Two instances on one store: two connections to one SQLite file (as two worker processes have), or two
Redis clients with separate connection pools (as two replicas have)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from agentmw.state import Conflict, State
from tests.state.conftest import SHARED, Open
from tests.state.test_contract import increment
from tests.waiting import eventually, stays

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=SHARED)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def pair(open_store: Open) -> tuple[State, State]:
    return await open_store(), await open_store()


async def test_cas_and_keys_race_across_instances(pair: tuple[State, State]) -> None:
    a, b = pair

    async def create(store: State, i: int) -> bool:
        try:
            await store.put("race", "k", {"by": i}, expected_version=None)
            return True
        except Conflict:
            return False

    wins = await asyncio.gather(*(create(a if i % 2 else b, i) for i in range(40)))
    assert sum(wins) == 1
    takes = await asyncio.gather(
        *(s.set_if_absent("once", "n", {"by": i}, ttl=10) for i, s in enumerate([a, b] * 20))
    )
    assert sum(takes) == 1
    await asyncio.gather(*(increment(s, "c", 10) for s in [a, b] * 4))
    assert (await b.get("counters", "c")).value == {"n": 80}  # type: ignore[union-attr]
    assert await a.set_if_absent("lease", "task", {"owner": "A"}, ttl=0.3)
    assert await b.renew("lease", "task", "B", ttl=5) is False
    assert await a.renew("lease", "task", "A", ttl=0.3) is True
    assert (
        await eventually(
            lambda: b.set_if_absent("lease", "task", {"owner": "B"}, ttl=5),
            "A's lease to expire",
            timeout=0.45,
        )
        is True
    )
    assert await a.renew("lease", "task", "A", ttl=5) is False


async def test_bus_across_instances(pair: tuple[State, State]) -> None:
    a, b = pair
    async with a.subscribe("tasks") as on_a, b.subscribe("tasks") as on_b:
        started = time.monotonic()
        for n in range(5):
            await b.publish("tasks", {"from": "b", "n": n})
        got_a = [await on_a.get(timeout=2) for _ in range(5)]
        latency = time.monotonic() - started
        assert got_a == [("tasks", {"from": "b", "n": n}) for n in range(5)]
        assert [await on_b.get(timeout=2) for _ in range(5)] == got_a
        await a.publish("tasks", {"from": "a"})
        assert await on_b.get(timeout=2) == ("tasks", {"from": "a"})
        assert await on_a.get(timeout=2) == ("tasks", {"from": "a"})
        assert await on_a.get(timeout=0.2) is None and await on_b.get(timeout=0.01) is None
    assert latency < 1.0


async def test_log_tail_across_instances(pair: tuple[State, State]) -> None:
    a, b = pair
    seen: list[int] = []

    async def follow() -> None:
        async for event_id, event in a.tail("runs", "r", wait=1):
            assert event["n"] == len(seen)
            seen.append(event_id)
            if len(seen) == 60:
                return

    follower = asyncio.ensure_future(follow())
    await stays(lambda: not follower.done(), "the follower waits on the empty log", seconds=0.05)
    appended = []
    for n in range(60):
        appended.append(await b.append("runs", "r", {"n": n}))
        if n % 20 == 0:  # the follower reads all there is and blocks, and must be woken by another instance
            await eventually(lambda: len(seen) == len(appended), "the follower to read what was appended")
    await asyncio.wait_for(follower, 10)
    assert seen == appended
    first = await a.append("runs", "wake", {"n": 0})
    started = time.monotonic()
    waiting = asyncio.ensure_future(a.read("runs", "wake", after_id=first, block=5))
    await stays(lambda: not waiting.done(), "the read blocks until an append", seconds=0.1)
    second = await b.append("runs", "wake", {"n": 1})
    assert await waiting == [(second, {"n": 1})]
    assert time.monotonic() - started < 1.0


async def test_redis_prefixes_keep_agents_apart(redis_url: str) -> None:
    from agentmw.state.redis import RedisState

    one = RedisState(redis_url, prefix=f"one{uuid.uuid4().hex[:8]}")
    two = RedisState(redis_url, prefix=f"two{uuid.uuid4().hex[:8]}")
    try:
        await one.put("tasks", "t", {"agent": 1}, expected_version=None)
        assert await two.get("tasks", "t") is None
        assert await two.put("tasks", "t", {"agent": 2}, expected_version=None) == 1
        assert await one.set_if_absent("idem", "k", {"x": 1}, ttl=5)
        assert await two.set_if_absent("idem", "k", {"x": 2}, ttl=5)
        await one.append("runs", "r", {"x": 1})
        assert await two.read("runs", "r") == []
        async with two.subscribe("tasks") as sub:
            await one.publish("tasks", {"x": 1})
            assert await sub.get(timeout=0.3) is None
        assert (await one.scan("tasks", total=True)).total == 1
        keys = [k.decode() async for k in one.client.scan_iter(match=f"*{one.prefix}*")]
        assert keys and all(k.startswith(f"{{{one.prefix}:") for k in keys)
    finally:
        await one.close()
        await two.close()
