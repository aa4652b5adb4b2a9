"""Redis faults under load (issue 25, "Done when"): two agent processes on one real redis-server, loaded through
every face (A2A, MCP, AG-UI) while the server is restarted (with and without AOF), paused, filled or wiped.

Afterwards: every acknowledged result is read back on the other replica (0 lost), no answer was an HTTP 5xx other
than a marked 503, none carried a traceback, none hung past the client's timeout, every error said it may be
retried, and every face answers again on both replicas by itself (``tests/faults/_harness.py``).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from tests.faults._harness import (
    RedisServer,
    Refused,
    Run,
    client,
    logs,
    mcp_request,
    mcp_result,
    servers,
    under_fault,
)

pytestmark = pytest.mark.timeout(170)


def check(run: Run, made: list, *, expect_lost: bool = False) -> None:
    """0 lost (unless the store itself lost them), 0 5xx, 0 tracebacks, 0 hangs, 0 unmarked errors."""
    problems = run.tally.bad()
    assert run.tally.acks, run.failures()
    assert expect_lost or not run.missing, f"{run.failures()}\n{logs(made)}"
    assert not problems, f"{run.failures()}\n{logs(made)}"


@pytest.fixture
def redis_aof(tmp_path: Path):
    server = RedisServer(tmp_path / "redis", aof=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_volatile(tmp_path: Path):
    server = RedisServer(tmp_path / "redis", aof=False)
    server.start()
    yield server
    server.stop()


def restarted(redis: RedisServer):
    """The restart, as two steps: SIGTERM (Redis writes its AOF, when it keeps one, and exits), then, once the
    fault was held, a redis-server on the same port and folder."""
    return redis.stop, redis.start


async def test_redis_restart_with_aof_loses_no_acknowledged_result(
    tmp_path: Path, redis_aof: RedisServer
) -> None:
    """Redis stopped (SIGTERM, its AOF written) for 3 s under load, then started on the same port and folder:
    what Redis had taken it gives back, so every result acknowledged before, during and after is still there."""
    stop, start = restarted(redis_aof)
    with servers(tmp_path, redis_aof.url("f")) as made:
        run = await under_fault("redis restart, AOF", [s.url for s in made], stop, start, hold=3.0)
    check(run, made)


async def test_redis_restart_without_persistence(tmp_path: Path, redis_volatile: RedisServer) -> None:
    """Redis with no persistence stopped for 3 s and started empty. The store itself lost everything it held,
    so results acknowledged before the restart may be gone, and that is not agentmw's to guarantee: for them only
    a clean answer is required (each read back either as acknowledged or as a protocol error, never a 5xx or a
    hang). Everything agentmw can guarantee is checked as on the other faults: no 5xx, no traceback, no hang,
    every error retryable, recovery by itself, and every result acknowledged after the store came back (once
    every face answered again) is read back as acknowledged: sent then, so that nothing of it (an AG-UI run's
    record, written as it starts) was in the store that was lost."""
    stop, start = restarted(redis_volatile)
    with servers(tmp_path, redis_volatile.url("f")) as made:
        urls = [s.url for s in made]
        run = await under_fault("redis restart, no persistence", urls, stop, start, hold=3.0)
        assert not run.tally.bad(), f"{run.failures()}\n{logs(made)}"
        # every loss is one the store made: a result acknowledged before it came back up
        late = [a for a in run.tally.acks if a.sent > run.restored + run.recovery]
        assert late, run.failures()
        late_ids = {a.id for a in late}
        late_lost = [m for m in run.missing if any(i in m for i in late_ids)]
        assert not late_lost, f"{run.failures()}\nlost after recovery: {late_lost[:10]}\n{logs(made)}"
        for line in run.missing:  # a clean answer: not found, never an internal error or a hang
            assert "5xx" not in line and "hang" not in line and "Timeout" not in line, line


async def test_redis_pause_is_answered_retryable_and_loses_nothing(
    tmp_path: Path, redis_aof: RedisServer
) -> None:
    """Redis paused (SIGSTOP) 5 s under load, then continued: requests that met the pause are answered, within
    the client's 15 s, with a retryable error or a success; nothing acknowledged is lost."""
    with servers(tmp_path, redis_aof.url("f")) as made:
        run = await under_fault("redis pause 5 s", [s.url for s in made], redis_aof.pause, redis_aof.resume)
    check(run, made)


async def test_redis_full_is_answered_retryable_and_loses_nothing(
    tmp_path: Path, redis_aof: RedisServer
) -> None:
    """Redis full for 5 s (``maxmemory`` at its current use, ``noeviction``: every write refused with OOM), then
    given room again: writes refused are retryable errors, nothing acknowledged is lost."""

    def fill() -> None:
        redis_aof.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
        redis_aof.command("CONFIG", "SET", "maxmemory", str(redis_aof.used_memory()))

    def room() -> None:
        redis_aof.command("CONFIG", "SET", "maxmemory", "0")

    with servers(tmp_path, redis_aof.url("f")) as made:
        run = await under_fault("redis full 5 s", [s.url for s in made], fill, room)
    check(run, made)


GATED_ANSWER = {"action": "accept", "content": {"ok": True}}


async def gated_across(http: httpx.AsyncClient, asked: str, answered: str, label: str) -> str:
    """MCP 2026: ``gated`` asked on one replica, its ``requestState`` answered on the other; the result's text."""
    first, _ = await mcp_request(
        http, asked, "tools/call", {"name": "gated", "arguments": {"label": label}}, name="gated", tasks=False
    )
    assert first.get("resultType") == "input_required", first
    [key] = first["inputRequests"]
    params = {
        "name": "gated",
        "arguments": {"label": label},
        "inputResponses": {key: GATED_ANSWER},
        "requestState": first["requestState"],
    }
    done, _ = await mcp_request(http, answered, "tools/call", params, name="gated", tasks=False)
    mcp_result(done)
    return str(done["content"][0]["text"])


async def test_redis_wipe_keeps_the_request_state_secret_agreed(
    tmp_path: Path, redis_volatile: RedisServer
) -> None:
    """``FLUSHALL`` under load: what the store held is gone (as with a restart without persistence, so only what
    agentmw can guarantee is checked: no 5xx, hang or unmarked error, recovery by itself), and the replicas still
    agree on the secret that signs MCP ``requestState``: a question asked on one replica after the wipe is
    answered on the other, every time, both ways."""
    with servers(tmp_path, redis_volatile.url("f")) as made:
        urls = [s.url for s in made]
        async with client() as http:
            for n in range(4):  # both replicas have used (and cached) the secret before the wipe
                assert await gated_across(http, urls[n % 2], urls[(n + 1) % 2], f"pre{n}") == f"pre{n}: True"
        run = await under_fault(
            "redis wipe", urls, lambda: redis_volatile.command("FLUSHALL"), lambda: None, hold=1.0
        )
        assert not run.tally.bad(), f"{run.failures()}\n{logs(made)}"
        failed: list[str] = []
        async with client() as http:
            for n in range(10):
                label = f"post{n}-{uuid.uuid4().hex[:4]}"
                try:
                    text = await gated_across(http, urls[n % 2], urls[(n + 1) % 2], label)
                    if text != f"{label}: True":
                        failed.append(f"{n}: {text}")
                except (Refused, AssertionError) as exc:
                    failed.append(f"{n}: {exc}")
        assert not failed, f"cross-replica requestState answers after the wipe failed: {failed}\n{logs(made)}"
