"""The body of one worker process in the SQLite multi-process test (imported by spawned children)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentmw.state import Conflict, SQLiteState

KEYS = 30
INCREMENTS = 25
APPENDS = 200
PUBLISHES = 5
BATCHES = 10
BATCH = 20
COUNTERS = 3


def run(path: str, index: int, barrier: Any, out: str) -> None:
    result = asyncio.run(_work(path, index, barrier))
    with open(out, "w") as handle:
        json.dump(result, handle)


async def _work(path: str, index: int, barrier: Any) -> dict[str, Any]:
    store = SQLiteState(path)
    result: dict[str, Any] = {}
    try:
        await store.get("warm", "up")  # open the connection before the race starts
        barrier.wait()
        result["nonces"] = [
            k for k in range(KEYS) if await store.set_if_absent("nonce", f"n{k}", {"by": index}, ttl=60)
        ]
        barrier.wait()
        created = []
        for k in range(KEYS):
            try:
                await store.put("tasks", f"t{k}", {"by": index}, expected_version=None)
                created.append(k)
            except Conflict:
                pass
        result["created"] = created
        barrier.wait()
        retries = 0
        for _ in range(INCREMENTS):
            while True:
                current = await store.get("counters", "c")
                value, version = current if current else ({"n": 0}, 0)
                try:
                    await store.put("counters", "c", {"n": value["n"] + 1}, expected_version=version)
                    break
                except Conflict:
                    retries += 1
        result["retries"] = retries
        barrier.wait()
        result["ids"] = [await store.append("runs", "shared", {"p": index, "n": n}) for n in range(APPENDS)]
        barrier.wait()
        # batches: create-only put_many on shared keys, CAS increments in batches, append_many to one log
        won = await store.put_many([("batch", f"b{k}", {"by": index}, None) for k in range(KEYS)])
        result["batch_created"] = [k for k, r in enumerate(won) if not isinstance(r, Conflict)]
        for _ in range(INCREMENTS):  # three counters a batch; only the items that conflicted are tried again
            todo = [f"m{j}" for j in range(COUNTERS)]
            while todo:
                found = [await store.get("counters", key) for key in todo]
                results = await store.put_many(
                    [
                        ("counters", key, {"n": (f.value["n"] if f else 0) + 1}, f.version if f else 0)
                        for key, f in zip(todo, found)
                    ]
                )
                todo = [key for key, r in zip(todo, results) if isinstance(r, Conflict)]
        result["batch_ids"] = []
        for b in range(BATCHES):
            result["batch_ids"] += await store.append_many(
                [("runs", "batched", {"p": index, "n": b * BATCH + n}) for n in range(BATCH)]
            )
        for n in range(PUBLISHES):
            await store.publish("events", {"p": index, "n": n})
        result["fallbacks"] = (
            store.fallbacks
        )  # writes on the loop that found the lock taken: ran on the thread
    finally:
        await store.close()
    return result
