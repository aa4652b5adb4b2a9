"""``open_state``: URLs and instances; redis is imported only for a Redis store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentmw.state import MemoryState, SQLiteState, open_state


async def test_urls_and_instances(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryState()
    assert open_state(store) is store
    assert isinstance(open_state("memory://"), MemoryState)
    absolute = open_state(f"sqlite://{tmp_path}/a.db", poll=0.01)
    assert isinstance(absolute, SQLiteState) and absolute.path == f"{tmp_path}/a.db" and absolute.poll == 0.01
    monkeypatch.chdir(tmp_path)
    relative = open_state("sqlite://data/b.db")
    assert isinstance(relative, SQLiteState) and relative.path == "data/b.db"
    (tmp_path / "data").mkdir()
    await relative.put("ns", "k", {"x": 1}, expected_version=None)
    assert (tmp_path / "data" / "b.db").exists()
    await relative.close()
    for bad in ("sqlite://", "sqlite:///", "mysql://host/db", "nothing"):
        with pytest.raises(ValueError):
            open_state(bad)
    with pytest.raises(TypeError):
        open_state(42)  # type: ignore[arg-type]


async def test_redis_url(redis_url: str) -> None:
    from agentmw.state.redis import RedisState

    store = open_state(redis_url + "?prefix=agent-one")
    assert isinstance(store, RedisState) and store.prefix == "agent-one"
    try:
        assert await store.set_if_absent("ns", "k", {"x": 1}, ttl=1)
    finally:
        await store.close()
    with pytest.raises(ValueError):
        open_state(redis_url + "?prefix=has space")


def test_redis_is_imported_lazily() -> None:
    code = (
        "import sys, agentmw, agentmw.state; from agentmw.state import open_state; open_state('memory://'); "
        "print('redis' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_sqlite_synchronous_from_the_url(tmp_path: Path) -> None:
    for written, meant in (("full", "FULL"), ("NORMAL", "NORMAL"), ("Full", "FULL")):
        store = open_state(f"sqlite://{tmp_path}/s.db?synchronous={written}")
        assert isinstance(store, SQLiteState) and store.synchronous == meant
        await store.put("ns", "k", {"x": written}, expected_version=-1)
        await store.close()
    explicit = open_state(f"sqlite://{tmp_path}/s.db?synchronous=full", synchronous="NORMAL")
    assert isinstance(explicit, SQLiteState) and explicit.synchronous == "NORMAL"  # an explicit option wins
    for bad in (
        "?synchronous=off",
        "?synchronous=full&mode=ro",
        "?mode=ro",
        "?synchronous=full&synchronous=normal",
    ):
        with pytest.raises(ValueError, match="takes no options but synchronous"):
            open_state(f"sqlite://{tmp_path}/s.db{bad}")
