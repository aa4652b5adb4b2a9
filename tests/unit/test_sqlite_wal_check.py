"""The WAL check at start (``agentmw.state._wal``): a real SQLite file written by a process that died without
closing it, its ``-wal`` file damaged on disk, then opened again: the log says what recovery drops, from when."""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentmw.state import SQLiteState
from agentmw.state._wal import walk_wal

WRITES = 40

_WRITER = """
import asyncio, os, sys
from agentmw.state import SQLiteState

async def main():
    store = SQLiteState(sys.argv[1])
    for i in range(int(sys.argv[2])):
        await store.put("rows", f"r{i:03d}", {"i": i, "pad": "x" * 200}, expected_version=None)
    os._exit(0)  # dies without closing: the -wal file stays, as after a crash

asyncio.run(main())
"""


def _crashed_writer(path: Path, writes: int = WRITES) -> bytes:
    subprocess.run([sys.executable, "-c", _WRITER, str(path), str(writes)], check=True, timeout=60)
    wal = Path(f"{path}-wal").read_bytes()
    assert len(wal) > 32, "the writer left no WAL to check"
    return wal


def _frame_size(wal: bytes) -> int:
    return 24 + struct.unpack(">I", wal[8:12])[0]


def _commits(wal: bytes) -> list[int]:
    size = _frame_size(wal)
    frames = (len(wal) - 32) // size
    return [i for i in range(frames) if struct.unpack(">I", wal[32 + i * size + 4 : 32 + i * size + 8])[0]]


async def _open_and_count(path: Path) -> tuple[SQLiteState, int]:
    store = SQLiteState(path)
    page = await store.scan("rows", limit=1000)
    return store, len(page.items)


def test_an_intact_wal_is_replayed_and_logs_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "state.db"
    wal = _crashed_writer(path)
    report = walk_wal(wal)
    assert not report.damaged and report.valid == report.frames
    caplog.set_level(logging.INFO, "agentmw.state")

    async def run() -> None:
        store, count = await _open_and_count(path)
        try:
            assert count == WRITES
            assert store.wal_report is not None and not store.wal_report.damaged
        finally:
            await store.close()

    asyncio.run(run())
    assert not [r for r in caplog.records if r.name == "agentmw.state" and r.levelno >= logging.INFO]


def test_a_damaged_frame_is_logged_with_what_is_lost_and_from_when(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.db"
    wal = bytearray(_crashed_writer(path))
    commits = _commits(bytes(wal))
    assert len(commits) >= WRITES  # one commit (at least) per acknowledged write
    size = _frame_size(bytes(wal))
    victim = commits[len(commits) // 2]  # a commit frame in the middle: it and every later one are dropped
    at = 32 + victim * size + 24 + 100
    wal[at] ^= 0xFF
    Path(f"{path}-wal").write_bytes(bytes(wal))
    mtime = os.stat(f"{path}-wal").st_mtime
    lost = len([c for c in commits if c >= victim])
    caplog.set_level(logging.INFO, "agentmw.state")

    async def run() -> int:
        store, count = await _open_and_count(path)
        try:
            report = store.wal_report
            assert report is not None and report.damaged_at == victim
            assert report.lost_commits == lost
        finally:
            await store.close()
        return count

    count = asyncio.run(run())
    assert count == WRITES - lost  # what SQLite really dropped is what the log announced
    warnings = [r for r in caplog.records if r.name == "agentmw.state" and r.levelno == logging.WARNING]
    assert len(warnings) == 1, caplog.text
    text = warnings[0].getMessage()
    assert f"drop {lost} committed transaction(s)" in text
    assert f"frame {victim} of" in text
    assert time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(mtime)) in text


def test_a_damaged_header_loses_the_whole_file_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.db"
    wal = bytearray(_crashed_writer(path))
    commits = _commits(bytes(wal))
    wal[20] ^= 0x01  # salt-2 in the header: its checksum fails
    Path(f"{path}-wal").write_bytes(bytes(wal))
    caplog.set_level(logging.INFO, "agentmw.state")

    async def run() -> int:
        store, count = await _open_and_count(path)
        try:
            report = store.wal_report
            assert report is not None and report.header_damaged and report.lost_commits == len(commits)
        finally:
            await store.close()
        return count

    count = asyncio.run(run())
    assert count == 0  # nothing was checkpointed into the database: the whole WAL was the data
    warnings = [r for r in caplog.records if r.name == "agentmw.state" and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "its header is damaged" in warnings[0].getMessage()
    assert f"drop {len(commits)} committed transaction(s)" in warnings[0].getMessage()


def test_a_torn_last_frame_that_is_no_commit_is_not_a_loss(tmp_path: Path) -> None:
    # a WAL cut inside its last transaction (a frame written without its commit): nothing acknowledged lost
    wal = bytearray(_crashed_writer(tmp_path / "t.db", 3))
    size = _frame_size(bytes(wal))
    frames = (len(wal) - 32) // size
    last = 32 + (frames - 1) * size
    assert struct.unpack(">I", wal[last + 4 : last + 8])[0] != 0  # the last frame is a commit
    wal[last + 4 : last + 8] = b"\0\0\0\0"  # as if its transaction were still being written
    wal[last + 24 + 7] ^= 0xFF  # and torn
    report = walk_wal(bytes(wal))
    assert report.damaged_at == frames - 1 and report.lost_commits == 0
    # as another connection appending would leave it, read non-strictly: a torn commit frame is no loss either
    wal[last + 4 : last + 8] = struct.pack(">I", 2)
    assert walk_wal(bytes(wal), strict=False).lost_commits == 0


def test_a_wal_open_elsewhere_is_not_checked(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "state.db"
    _crashed_writer(path)
    holder = sqlite3.connect(path)  # another connection has it open (recovered already): the WAL is live
    holder.execute("SELECT COUNT(*) FROM state_records").fetchone()
    try:

        async def run() -> None:
            store = SQLiteState(path)
            try:
                await store.get("rows", "r000")
                assert store.wal_report is None
            finally:
                await store.close()

        asyncio.run(run())
    finally:
        holder.close()
