"""Give freed memory back to the operating system once large entries have come and gone.

CPython hands blocks over 512 bytes to the C allocator. glibc keeps what is freed in its arenas, and raises its
mmap threshold after the first large free, so the megabyte strings of large requests end up in the heap: after
hostile traffic the tables are small again, yet the process's resident memory stays at its peak. When a table
keeps or drops an entry of ``LARGE`` bytes or more (:func:`note`), ``malloc_trim(0)`` runs once the process has
been quiet of them for ``QUIET_SECONDS`` (and every ``BUSY_SECONDS`` while they keep coming), on a worker
thread. Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import sys
import time
from typing import Any

__all__ = ["BUSY_SECONDS", "LARGE", "QUIET_SECONDS", "note", "trim"]

LARGE = 64 * 1024
QUIET_SECONDS = 2.0
BUSY_SECONDS = 10.0
MMAP_THRESHOLD = 256 * 1024
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter

_trimmer: list[Any] = []  # [malloc_trim] once looked up; [None] where there is none
_last_note = 0.0
_last_trim = 0.0
_timer: asyncio.TimerHandle | None = None
_timer_loop: list[asyncio.AbstractEventLoop | None] = [None]


def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, looked up once; the first look also fixes glibc's mmap threshold at
    ``MMAP_THRESHOLD`` (``mallopt``), so that a block that large is always mapped on its own and unmapped when
    freed, instead of glibc raising the threshold after the first large free and keeping such blocks in the
    heap, where the entries kept between them stop it from ever shrinking."""
    if not _trimmer:
        found = None
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                found = libc.malloc_trim
                found.argtypes = [ctypes.c_size_t]
                found.restype = ctypes.c_int
                libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        _trimmer.append(found)
    return _trimmer[0]


def trim() -> bool:
    """Return the allocator's free memory to the system now; False where that cannot be done."""
    malloc_trim = _malloc_trim()
    if malloc_trim is None:
        return False
    malloc_trim(0)
    return True


def note(size: int) -> None:
    """A table kept or dropped ``size`` bytes: trim once large entries stop coming (needs a running loop)."""
    global _last_note, _timer
    if size < LARGE:
        return
    if not _trimmer:
        _malloc_trim()  # on the first large entry: the mmap threshold is fixed from then on
    _last_note = time.monotonic()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    if _timer is not None and not _timer.cancelled() and _timer_loop[0] is loop:
        return  # one is set on this loop (a timer of a loop that ended never fires: this one replaces it)
    _timer_loop[0] = loop
    _timer = loop.call_later(QUIET_SECONDS, _fire, loop)


def _fire(loop: asyncio.AbstractEventLoop) -> None:
    global _timer, _last_trim
    now = time.monotonic()
    quiet = now - _last_note
    if quiet < QUIET_SECONDS and now - _last_trim < BUSY_SECONDS:
        _timer = loop.call_later(QUIET_SECONDS - quiet, _fire, loop)  # still coming: look again when quiet
        return
    _last_trim = now
    # under a long burst, trim every BUSY_SECONDS as well, so fragmentation cannot build up the peak
    _timer = loop.call_later(QUIET_SECONDS, _fire, loop) if quiet < QUIET_SECONDS else None
    if not loop.is_closed():
        loop.run_in_executor(None, trim)
