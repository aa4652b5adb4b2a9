"""Four worker processes race on one SQLite file, as ``uvicorn --workers 4`` would."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from pathlib import Path

import pytest

from agentmw.state import SQLiteState
from tests.state import _procs

pytestmark = pytest.mark.timeout(120)

WORKERS = 4


async def test_four_processes_on_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    parent = SQLiteState(path)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    outs = [tmp_path / f"worker{i}.json" for i in range(WORKERS)]
    total = WORKERS * _procs.APPENDS
    tailed: list[tuple[int, dict]] = []

    async def tail() -> None:
        async for entry in parent.tail("runs", "shared", wait=1):
            tailed.append(entry)
            if len(tailed) == total:
                return

    try:
        async with parent.subscribe("events") as bus:
            follower = asyncio.ensure_future(tail())
            workers = [
                ctx.Process(target=_procs.run, args=(path, i, barrier, str(outs[i]))) for i in range(WORKERS)
            ]
            for worker in workers:
                worker.start()
            for worker in workers:
                await asyncio.to_thread(worker.join, 90)
            assert [w.exitcode for w in workers] == [0] * WORKERS
            results = [json.loads(out.read_text()) for out in outs]
            print("fallbacks to the thread:", [r["fallbacks"] for r in results])

            # set_if_absent and create-only CAS: exactly one winner per key
            for field in ("nonces", "created"):
                winners = sorted(k for r in results for k in r[field])
                assert winners == list(range(_procs.KEYS)), field
            for k in range(_procs.KEYS):
                holder = await parent.get_key("nonce", f"n{k}")
                assert holder is not None and k in results[holder["by"]]["nonces"]
            # read-modify-write with CAS: no lost update
            assert (await parent.get("counters", "c")).value == {"n": WORKERS * _procs.INCREMENTS}  # type: ignore[union-attr]
            # appends: none lost, ids strictly increasing in the log and in each writer
            log = await parent.read("runs", "shared", limit=1000)
            ids = [i for i, _ in log]
            assert len(log) == total and ids == sorted(ids) and len(set(ids)) == total
            assert sorted(ids) == sorted(i for r in results for i in r["ids"])
            for p, r in enumerate(results):
                assert r["ids"] == sorted(r["ids"])
                assert [e["n"] for _, e in log if e["p"] == p] == list(range(_procs.APPENDS))
            # batches: put_many creates each key once, loses no increment; append_many loses no event
            winners = sorted(k for r in results for k in r["batch_created"])
            assert winners == list(range(_procs.KEYS))
            for k in range(_procs.KEYS):
                holder = (await parent.get("batch", f"b{k}")).value["by"]  # type: ignore[union-attr]
                assert k in results[holder]["batch_created"]
            for j in range(_procs.COUNTERS):
                counter = await parent.get("counters", f"m{j}")
                assert counter == ({"n": WORKERS * _procs.INCREMENTS}, WORKERS * _procs.INCREMENTS)
            batched = await parent.read("runs", "batched", limit=1000)
            ids = [i for i, _ in batched]
            assert len(batched) == WORKERS * _procs.BATCHES * _procs.BATCH and ids == sorted(ids)
            assert sorted(ids) == sorted(i for r in results for i in r["batch_ids"])
            for p, r in enumerate(results):
                assert r["batch_ids"] == sorted(r["batch_ids"])
                assert [e["n"] for _, e in batched if e["p"] == p] == list(
                    range(_procs.BATCHES * _procs.BATCH)
                )
            # a reader blocked in the parent saw every append of the children, in order
            await asyncio.wait_for(follower, 10)
            assert tailed == log
            # the bus reaches another process
            messages = []
            while len(messages) < WORKERS * _procs.PUBLISHES:
                got = await bus.get(timeout=3)
                assert got is not None, f"bus: only {len(messages)} messages"
                messages.append(got[1])
            for p in range(WORKERS):
                assert [m["n"] for m in messages if m["p"] == p] == list(range(_procs.PUBLISHES))
    finally:
        await parent.close()
