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
        result["nonces"] = [k for k in range(KEYS)
                            if await store.set_if_absent("nonce", f"n{k}", {"by": index}, ttl=60)]
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
        for n in range(PUBLISHES):
            await store.publish("events", {"p": index, "n": n})
    finally:
        await store.close()
    return result
