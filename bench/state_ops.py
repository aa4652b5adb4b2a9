"""Operations per second of each state backend, side by side in one run: memory, SQLite (a file in a
temporary folder; the default, reads and short writes on the event loop with the thread behind them, and with
anyio's worker threads behind them instead, for comparison) and
Redis (a real ``redis-server`` started on a free port with no persistence, or ``--redis URL``).

Each operation runs one at a time from one coroutine (the latency a request pays), best of three rounds;
``put x8`` runs eight coroutines at once (throughput); ``put_many 8`` and ``append_many 8`` write eight items
per call and count items per second. Run ``python bench/state_ops.py`` (``--quick`` for a short run,
``--sqlite-only`` for the SQLite rows); it prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from agentmw.state import ANY, MemoryState, SQLiteState, State

VALUE = {"state": "TASK_STATE_WORKING", "owner": "alice", "history": [{"role": "user", "text": "hello" * 10}]}
OPS = ["get", "put", "CAS put", "set_if_absent", "append", "read 10", "put x8", "put_many 8", "append_many 8"]


@contextmanager
def redis_server(url: str | None) -> Iterator[str | None]:
    if url:
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    folder = tempfile.mkdtemp()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            folder,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


async def rate(n: int, op: Callable[[int], Awaitable[object]], rounds: int = 3) -> float:
    best = 0.0
    for r in range(rounds):
        start = time.perf_counter()
        for i in range(n):
            await op(r * n + i)
        best = max(best, n / (time.perf_counter() - start))
    return best


async def measure(store: State, n: int) -> dict[str, float]:
    await store.put("bench", "hot", VALUE, expected_version=ANY)
    for i in range(20):
        await store.append("bench", "log", {"i": i, **VALUE})
    last = (await store.read("bench", "log", limit=1000))[-11][0]
    version = (await store.get("bench", "hot")).version  # type: ignore[union-attr]
    run = uuid.uuid4().hex[:6]

    async def cas(_: int) -> None:
        nonlocal version
        version = await store.put("bench", "hot", VALUE, expected_version=version)

    async def put8(i: int) -> None:
        await asyncio.gather(
            *(store.put("bench", f"k{(i * 8 + j) % 5000}", VALUE, expected_version=ANY) for j in range(8))
        )

    results = {
        "get": await rate(n, lambda i: store.get("bench", "hot")),
        "put": await rate(n, lambda i: store.put("bench", f"k{i % 5000}", VALUE, expected_version=ANY)),
        "CAS put": await rate(n, cas),
        "set_if_absent": await rate(n, lambda i: store.set_if_absent("idem", f"{run}-{i}", VALUE, ttl=60)),
        "append": await rate(n, lambda i: store.append("bench", f"log{i % 50}", VALUE)),
        "read 10": await rate(n, lambda i: store.read("bench", "log", after_id=last, limit=10)),
    }
    results["put x8"] = 8 * await rate(max(1, n // 8), put8)
    results["put_many 8"] = 8 * await rate(
        max(1, n // 8),
        lambda i: store.put_many([("bench", f"m{(i * 8 + j) % 5000}", VALUE, ANY) for j in range(8)]),
    )
    results["append_many 8"] = 8 * await rate(
        max(1, n // 8),
        lambda i: store.append_many([("bench", f"log{(i * 8 + j) % 50}", VALUE) for j in range(8)]),
    )
    return results


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--redis", default=os.environ.get("AGENTMW_BENCH_REDIS"))
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    scale = 5 if args.quick else 1
    folder = Path(tempfile.mkdtemp())
    rows: list[tuple[str, dict[str, float]]] = []
    with redis_server("unused" if args.sqlite_only else args.redis) as url:
        targets: list[tuple[str, Callable[[], State], int]] = [
            ("memory", MemoryState, 20_000),
            ("SQLite, on the loop + thread (default)", lambda: SQLiteState(folder / "loop.db"), 20_000),
            (
                "SQLite, on the loop + anyio worker threads",
                lambda: SQLiteState(folder / "anyio.db", executor="anyio"),
                3_000,
            ),
        ]
        if args.sqlite_only:
            targets = targets[1:]
        elif url:
            from agentmw.state.redis import RedisState

            targets.append(
                ("Redis (loopback)", lambda: RedisState(url, prefix=f"bench{uuid.uuid4().hex[:6]}"), 3_000)
            )
        else:
            print("redis-server is not installed: no Redis row (scripts/setup installs it)", file=sys.stderr)
        for name, make, n in targets:
            store = make()
            try:
                rows.append((name, await measure(store, n // scale)))
            finally:
                await store.close()
    shutil.rmtree(folder, ignore_errors=True)
    print("| backend | " + " | ".join(OPS) + " |")
    print("|---|" + "---:|" * len(OPS))
    for name, results in rows:
        print(f"| {name} | " + " | ".join(f"{results[op]:,.0f}" for op in OPS) + " |")


if __name__ == "__main__":
    asyncio.run(main())
