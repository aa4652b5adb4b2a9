"""A SQLite ``-wal`` file walked before SQLite recovers it: what a damaged frame will cost, said in the log.

When the first connection opens a WAL database after a crash, SQLite replays the ``-wal`` file's frames up to
the first one whose salts or checksum do not match, and silently drops that frame and every frame after it,
commits included (https://www.sqlite.org/fileformat.html#the_write_ahead_log). A damaged header drops the
whole file. :func:`check_wal` walks the file the same way first and, when committed transactions lie past the
damage, logs a WARNING that says how many, how many frames, and the file's modification time (from when).

Only the first opener checks: while another connection (another process, or this one) holds the database's
``-shm`` open, the WAL is live and SQLite will not recover it again, and a frame being appended would look
torn. That is read from ``/proc/locks`` (Linux): any lock on the ``-shm`` file means someone has it open. Where
that cannot be known, the check still runs, and only counts commits *after* the first bad frame, which a
writer appending at the time cannot produce (it writes its frames in order, its commit frame last).
"""

from __future__ import annotations

import logging
import os
import struct
import time
from dataclasses import dataclass

__all__ = ["WalReport", "check_wal", "walk_wal"]

logger = logging.getLogger("agentmw.state")

_MAGIC = (0x377F0682, 0x377F0683)  # the low bit: checksums over big-endian words
_HEADER = 32
_FRAME_HEADER = 24


@dataclass(frozen=True, slots=True)
class WalReport:
    """What walking a ``-wal`` file found.

    ``frames``: whole frames in the file. ``valid``: the frames SQLite will replay (up to the last commit before
    the first bad frame). ``damaged_at``: the first frame (0-based) whose checksum fails while its salts are
    the file's, None when there is none (``header_damaged``: the header itself fails, so nothing is replayed).
    ``lost_commits`` and ``lost_frames``: committed transactions, and frames, at or after the damage that
    SQLite will drop.
    """

    frames: int
    valid: int
    damaged_at: int | None
    header_damaged: bool
    lost_commits: int
    lost_frames: int

    @property
    def damaged(self) -> bool:
        return self.header_damaged or self.damaged_at is not None


def _checksum(data: bytes, big: bool, s0: int, s1: int) -> tuple[int, int]:
    words = struct.unpack(f"{'>' if big else '<'}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def _page_size(db_path: str) -> int | None:
    """The page size in the database file's header (offset 16; 1 means 65536), for a WAL whose header is bad."""
    try:
        with open(db_path, "rb") as handle:
            head = handle.read(100)
    except OSError:
        return None
    if len(head) < 18 or not head.startswith(b"SQLite format 3\x00"):
        return None
    size = struct.unpack(">H", head[16:18])[0]
    return 65536 if size == 1 else size


def walk_wal(
    wal: bytes, db_page_size: int | None = None, *, strict: bool = True, backfilled: int = 0
) -> WalReport:
    """Walk a ``-wal`` file's bytes as SQLite's recovery does. ``strict``: the frame at the damage point counts
    as lost when it is a commit (False, for a WAL another connection may be appending to: only commits after
    a bad frame count, as a torn last frame is then what an append in progress looks like). ``backfilled``:
    frames already copied into the database by a checkpoint (the ``-shm`` file's count), never lost."""
    header = wal[:_HEADER]
    magic = struct.unpack(">I", header[:4])[0] if len(header) >= 4 else 0
    big = magic == _MAGIC[1]
    header_ok = False
    page = None
    salts = b""
    s0 = s1 = 0
    if len(header) == _HEADER and magic in _MAGIC:
        page = struct.unpack(">I", header[8:12])[0]
        expect = struct.unpack(">II", header[24:32])
        s0, s1 = _checksum(header[:24], big, 0, 0)
        header_ok = (s0, s1) == expect and page >= 512 and page & (page - 1) == 0 and page <= 65536
        salts = header[16:24]
    if not header_ok:
        page = page if page and page >= 512 and page & (page - 1) == 0 and page <= 65536 else db_page_size
    if not page:
        return WalReport(0, 0, None, not header_ok and len(wal) > 0, 0, 0)
    size = _FRAME_HEADER + page
    frames = max(0, (len(wal) - _HEADER) // size)
    if not header_ok:
        # SQLite ignores the whole file. What it held: the frames with the first frame's salts.
        first = wal[_HEADER + 8 : _HEADER + 16] if frames else b""
        lost_frames = lost_commits = 0
        for i in range(frames):
            at = _HEADER + i * size
            if wal[at + 8 : at + 16] != first:
                break
            if i < backfilled:
                continue
            lost_frames += 1
            lost_commits += struct.unpack(">I", wal[at + 4 : at + 8])[0] != 0
        return WalReport(frames, 0, None, True, lost_commits, lost_frames)
    valid = 0
    damaged_at: int | None = None
    for i in range(frames):
        at = _HEADER + i * size
        head = wal[at : at + _FRAME_HEADER]
        if head[8:16] != salts:
            break  # a frame of an earlier generation of the file (it was restarted): the normal end
        c0, c1 = _checksum(head[:8] + wal[at + _FRAME_HEADER : at + size], big, s0, s1)
        if (c0, c1) != struct.unpack(">II", head[16:24]):
            damaged_at = i
            break
        s0, s1 = c0, c1
        if struct.unpack(">I", head[4:8])[0] != 0:
            valid = i + 1  # a commit frame: everything up to here is replayed
    if damaged_at is None:
        return WalReport(frames, valid, None, False, 0, 0)
    lost_commits = lost_frames = 0
    for i in range(damaged_at, frames):
        at = _HEADER + i * size
        if wal[at + 8 : at + 16] != salts:
            break
        if i < backfilled:
            continue
        lost_frames += 1
        if struct.unpack(">I", wal[at + 4 : at + 8])[0] != 0 and (strict or i > damaged_at):
            lost_commits += 1
    return WalReport(frames, valid, damaged_at, False, lost_commits, lost_frames)


def _backfilled(shm: str, wal_header: bytes) -> int:
    """Frames of this WAL a checkpoint copied into the database already, from the ``-shm`` file a crash left
    (its checkpoint info, when its salts are this WAL's); 0 when it cannot be told."""
    try:
        with open(shm, "rb") as handle:
            index = handle.read(136)
    except OSError:
        return 0
    if len(index) < 100 or index[12] != 1 or index[32:40] != wal_header[16:24]:
        return 0
    little = struct.unpack("<I", index[:4])[0] == 3007000
    return int(struct.unpack("<I" if little else ">I", index[96:100])[0])


def _in_use(shm: str) -> bool | None:
    """Whether any process (this one included) holds a lock on ``shm``; None when it cannot be told."""
    try:
        stat = os.stat(shm)
    except FileNotFoundError:
        return False  # no -shm: no connection has the database open
    except OSError:
        return None
    try:
        with open("/proc/locks") as handle:
            text = handle.read()
    except OSError:
        return None
    inode = f":{stat.st_ino} "
    device = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    return any(inode in line and device in line for line in text.splitlines())


def check_wal(db_path: str) -> WalReport | None:
    """Walk ``db_path``'s ``-wal`` file, if there is one and this is its first opener, and log a WARNING when
    SQLite's recovery will drop committed transactions. Never raises: a check that cannot run says so at
    DEBUG."""
    wal_path = db_path + "-wal"
    try:
        if not os.path.exists(wal_path) or os.path.getsize(wal_path) == 0:
            return None
        in_use = _in_use(db_path + "-shm")
        if in_use:
            logger.debug("agentmw state: %s is open elsewhere; its WAL is live, not checked", db_path)
            return None
        with open(wal_path, "rb") as handle:
            data = handle.read()
        mtime = os.stat(wal_path).st_mtime
        backfilled = _backfilled(db_path + "-shm", data[:_HEADER]) if in_use is False else 0
        report = walk_wal(data, _page_size(db_path), strict=in_use is False, backfilled=backfilled)
    except Exception:  # a check that cannot run must not stop the store from opening
        logger.debug("agentmw state: the WAL check of %s could not run", db_path, exc_info=True)
        return None
    if report.damaged:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(mtime))
        where = (
            "its header is damaged, so SQLite ignores the whole file"
            if report.header_damaged
            else f"frame {report.damaged_at} of {report.frames} is damaged (its checksum fails)"
        )
        if report.lost_commits:
            logger.warning(
                "agentmw state: the write-ahead log %s is damaged: %s. Recovery will drop %d committed "
                "transaction(s) (%d frame(s)) written to it, the last at %s; everything committed before "
                "the damage is kept. Keep a copy of %s before the next open if you need to recover them.",
                wal_path,
                where,
                report.lost_commits,
                report.lost_frames,
                when,
                wal_path,
            )
        else:
            logger.info(
                "agentmw state: the write-ahead log %s ends in an incomplete frame (%s, last written at %s): "
                "a transaction that never committed, dropped by recovery; nothing committed is lost",
                wal_path,
                where,
                when,
            )
    return report
