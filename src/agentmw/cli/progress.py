"""A progress line on stderr for work that takes longer than a second (nothing for work that does not)."""

from __future__ import annotations

import sys
import threading
import time
from typing import Self, TextIO

__all__ = ["Progress"]

_SPINNER = "|/-\\"


class Progress:
    """``with Progress("calling search_assets") as progress: ...; progress.update("halfway (1/2)")``.

    After ``delay`` seconds a line appears on ``stream``: on a terminal one line redrawn in place with a spinner
    and the elapsed time, cleared at the end; elsewhere (CI logs) a line per new message, and one every
    ``quiet_interval`` seconds while nothing changes. A daemon thread draws it, so it works around blocking
    work (an import) as well as an event loop.
    """

    def __init__(
        self,
        label: str,
        *,
        stream: TextIO | None = None,
        delay: float = 1.0,
        interval: float = 0.2,
        quiet_interval: float = 5.0,
    ) -> None:
        self.label = label
        self.message = ""
        self.stream = stream if stream is not None else sys.stderr
        self.delay = delay
        self.interval = interval
        self.quiet_interval = quiet_interval
        self.shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, message: str) -> None:
        self.message = message

    def __enter__(self) -> Self:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._draw, name="agentmw-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.shown and self._tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()

    def _line(self, tick: int) -> str:
        elapsed = time.monotonic() - self._started
        text = f"agentmw: {self.label}... {elapsed:.0f}s"
        if self.message:
            text += f": {self.message}"
        return f"{_SPINNER[tick % len(_SPINNER)]} {text}" if self._tty else text

    def _draw(self) -> None:
        if self._stop.wait(self.delay):
            return
        tick, last_message, last_line = 0, None, 0.0
        while True:
            now = time.monotonic()
            if self._tty:
                self.stream.write("\r\x1b[K" + self._line(tick))
                self.stream.flush()
                self.shown = True
            elif self.message != last_message or now - last_line >= self.quiet_interval:
                self.stream.write(self._line(tick) + "\n")
                self.stream.flush()
                self.shown, last_message, last_line = True, self.message, now
            tick += 1
            if self._stop.wait(self.interval):
                return
