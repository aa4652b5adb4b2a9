"""SQLite faults under load (issue 25, "Done when"): two agent processes on one real SQLite file, loaded through
every face while the disk is full or the file read-only, and a ``-wal`` file damaged between a crash and a
restart.

- **Full**: the processes' file size limit (``prlimit``, ``RLIMIT_FSIZE``) drops to 4 KiB for 5 s, so every
  write of the file and its WAL fails as on a full disk (``EFBIG``, SQLite's "database or disk is full"); the
  processes ignore ``SIGXFSZ``, as a process meeting a full disk gets no signal either.
- **Read-only**: the file and its WAL become immutable (``chattr +i``, which binds root too) for 5 s.
- **Damaged WAL**: both processes killed (``kill -9``: the WAL is not checkpointed), one frame of the WAL (or its
  header) overwritten, both started again.

Afterwards, as on Redis: 0 acknowledged results lost, 0 HTTP 5xx, 0 tracebacks, 0 hangs, every error marked
retryable, recovery by itself (``tests/faults/_harness.py``). A damaged WAL is damage to the disk's content: what
SQLite drops past the damage no library can give back, so that test asserts what agentmw promises instead: the
server says, at start, how many committed transactions were lost, and loses nothing it does not say.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.faults._harness import Load, Run, Server, logs, lost, recovered, servers, under_fault

pytestmark = pytest.mark.timeout(170)


def check(run: Run, made: list[Server]) -> None:
    assert run.tally.acks, run.failures()
    assert not run.missing, f"{run.failures()}\n{logs(made)}"
    assert not run.tally.bad(), f"{run.failures()}\n{logs(made)}"


def store(folder: Path) -> str:
    return f"sqlite:///{folder / 'state.db'}"


def files(folder: Path) -> list[Path]:
    return [p for p in (folder / "state.db", folder / "state.db-wal") if p.exists()]


async def test_sqlite_full_is_answered_retryable_and_loses_nothing(tmp_path: Path) -> None:
    """A full disk for 5 s: every write refused (SQLITE_FULL), answered as a retryable error; nothing
    acknowledged is lost, and the servers serve again once there is room."""
    unlimited = resource.getrlimit(resource.RLIMIT_FSIZE)
    with servers(tmp_path, store(tmp_path), ignore_sigxfsz=True) as made:

        def fill() -> None:
            for server in made:
                assert server.process is not None
                resource.prlimit(server.process.pid, resource.RLIMIT_FSIZE, (4096, unlimited[1]))

        def room() -> None:
            for server in made:
                assert server.process is not None
                resource.prlimit(server.process.pid, resource.RLIMIT_FSIZE, unlimited)

        run = await under_fault("sqlite full 5 s", [s.url for s in made], fill, room)
    check(run, made)


@contextlib.contextmanager
def immutable_while(paths: list[Path]) -> Iterator[None]:
    try:
        yield
    finally:
        for path in paths:
            subprocess.run(["chattr", "-i", str(path)], check=False, capture_output=True)


async def test_sqlite_read_only_is_answered_retryable_and_loses_nothing(tmp_path: Path) -> None:
    """The file and its WAL read-only for 5 s (immutable: a write through an open descriptor fails too): writes
    refused are retryable errors, nothing acknowledged is lost, and the servers recover by themselves."""
    chattr = shutil.which("chattr")
    require_tool(
        "chattr, as root", bool(chattr) and os.geteuid() == 0, "run as root: chattr +i binds open descriptors"
    )
    with servers(tmp_path, store(tmp_path)) as made:
        touched: list[Path] = []

        def freeze() -> None:
            for path in files(tmp_path):
                subprocess.run(["chattr", "+i", str(path)], check=True)
                touched.append(path)

        def thaw() -> None:
            for path in touched:
                subprocess.run(["chattr", "-i", str(path)], check=True)

        with immutable_while(touched):
            run = await under_fault("sqlite read-only 5 s", [s.url for s in made], freeze, thaw)
    check(run, made)


# --- a damaged WAL ---------------------------------------------------------------------------------------

_HEADER = 32
_FRAME_HEADER = 24


def wal_frames(wal: Path) -> tuple[int, int]:
    """(page size, how many frames from the start carry the header's salts: the live ones)."""
    data = wal.read_bytes()
    page = struct.unpack(">I", data[8:12])[0]
    salts = data[16:24]
    live = 0
    offset = _HEADER
    while offset + _FRAME_HEADER + page <= len(data) and data[offset + 8 : offset + 16] == salts:
        live += 1
        offset += _FRAME_HEADER + page
    return page, live


def damage_frame(wal: Path, frame: int) -> None:
    """Overwrites 16 bytes in the middle of ``frame``'s page: its checksum no longer matches."""
    page, _ = wal_frames(wal)
    offset = _HEADER + frame * (_FRAME_HEADER + page) + _FRAME_HEADER + page // 2
    with open(wal, "r+b") as handle:
        handle.seek(offset)
        old = handle.read(16)
        handle.seek(offset)
        handle.write(bytes(b ^ 0xFF for b in old))


def damage_header(wal: Path) -> None:
    """Overwrites the header's checksum: SQLite replays nothing of the file."""
    with open(wal, "r+b") as handle:
        handle.seek(24)
        old = handle.read(8)
        handle.seek(24)
        handle.write(bytes(b ^ 0xFF for b in old))


@pytest.mark.parametrize("where", ["frame", "header"])
async def test_sqlite_damaged_wal_is_logged_with_what_it_lost(tmp_path: Path, where: str) -> None:
    """Load, then both servers killed (``kill -9``) with a WAL that holds committed transactions; one of its
    frames (or its header) damaged; both started again. SQLite drops every transaction past the damage, and that
    cannot be undone: what is checked is that the server's log says so at start (a WARNING naming the lost
    commits), that a loss happens only when it is logged, and that the servers then serve every face cleanly."""
    with servers(tmp_path, store(tmp_path)) as made:
        urls = [s.url for s in made]
        async with Load(urls) as load:
            await load.until_sent(150)
        for server in made:
            server.kill()
        wal = tmp_path / "state.db-wal"
        assert wal.exists() and wal.stat().st_size > 0, "no WAL left behind by the kill"
        _, live = wal_frames(wal)
        if where == "frame":
            assert live >= 2, f"the WAL holds {live} live frames"
            damage_frame(wal, live // 2)
        else:
            damage_header(wal)
        marks = {s.index: s.log.stat().st_size for s in made}
        for server in made:
            server.start()
        await recovered(urls)
        missing = await lost(load.tally.acks, urls)
        said = "\n".join(s.log.read_text(errors="replace")[marks[s.index] :] for s in made)
    warned = [line for line in said.splitlines() if "write-ahead log" in line and "damaged" in line]
    line = f"[sqlite damaged WAL ({where}), {live} live frames] acknowledged {len(load.tally.acks)}, lost {len(missing)}"
    assert not load.tally.bad(), f"{line}\n{load.tally.summary()}"
    if missing:
        assert warned, f"{line}, and the server logged nothing about it:\n{said[-2000:]}\nlost: {missing[:5]}"
    assert warned or live == 0, f"{line}: a damaged WAL with {live} live frames, not logged:\n{said[-2000:]}"
    print(line, warned[:2])
