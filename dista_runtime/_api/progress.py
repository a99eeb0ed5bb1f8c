"""A one-line progress display for long waits (``get`` of many refs, in a script or under
``dista run``): ``dista: get: 412/1000 (41%) 83.0/s, 5.0s``, redrawn in place on stderr.

It must never get in the way: it writes only to a terminal (a pipe or log file would fill
with carriage returns), only once the wait has lasted ``delay`` seconds (a quick ``get``
prints nothing), at most every ``min_interval`` seconds (updates can arrive per result, far
faster than anyone reads), and a failing stream turns it off instead of raising into the
wait it reports on. It is no log line (it is redrawn, not appended): ``DISTA_PROGRESS=0``
(or ``dista run --no-progress``) turns it off.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Final, Self, TextIO

__all__ = ["PROGRESS_ENV", "Progress", "progress_on"]

#: ``DISTA_PROGRESS=0`` (or off, no, false) turns the progress line off.
PROGRESS_ENV: Final = "DISTA_PROGRESS"


def progress_on() -> bool:
    """Whether ``DISTA_PROGRESS`` lets the progress line show (it does unless 0, off, no or
    false), read at each wait."""
    value = os.environ.get(PROGRESS_ENV, "").strip().lower()
    return value not in ("0", "off", "no", "false")


class Progress:
    """``\\r{label}: {done}/{total} ({pct}%) {rate}/s, {elapsed}s``, redrawn in place.

    Use it as a context manager and call `update` with the count done so far. On exit, a
    line that was shown is drawn once more with the final count and ended with a newline
    (``leave=False`` blanks it instead), so the next output starts on a clean line; if nothing
    was shown, exit writes nothing either.

    ``stream`` defaults to ``sys.stderr`` (looked up when constructed, so redirection is
    respected); it draws only on a TTY and while `progress_on`; ``force`` draws anyway,
    for tests; ``clock`` is the
    time source, seconds from any origin. The delay counts from construction. Updates are
    meant to come from one thread; a lock keeps an update and the exit (which may run on
    another) from interleaving their writes.
    """

    def __init__(
        self,
        total: int,
        label: str,
        stream: TextIO | None = None,
        min_interval: float = 0.1,
        delay: float = 0.5,
        *,
        force: bool = False,
        leave: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.label = label
        self.stream: TextIO = sys.stderr if stream is None else stream
        self.min_interval = min_interval
        self.delay = delay
        self.leave = leave
        self._clock = clock
        self._start = clock()
        self._done = 0
        self._last_draw: float | None = None  # when the line was last drawn; None: never
        self._width = 0  # the drawn line's length, to blank what a shorter one leaves behind
        self._closed = False
        self._lock = threading.Lock()
        self._enabled = force or (progress_on() and _isatty(self.stream))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def shown(self) -> bool:
        """Whether the line has been drawn (so exit has a line to finish)."""
        return self._last_draw is not None

    def update(self, done: int) -> None:
        """Record that ``done`` of ``total`` are done; redraw if it is time to."""
        with self._lock:
            self._done = done
            if not self._enabled or self._closed:
                return
            now = self._clock()
            if now - self._start < self.delay:
                return
            if self._last_draw is not None and now - self._last_draw < self.min_interval:
                return
            self._draw(now, "")

    def close(self) -> None:
        """Finish the line if one was shown; later updates do nothing. Safe to repeat."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if not self._enabled or self._last_draw is None:
                return
            if self.leave:
                self._draw(self._clock(), "\n")
            else:
                self._write("\r" + " " * self._width + "\r")

    def render(self, now: float) -> str:
        """The line for the current count at time ``now`` (no ``\\r``, no padding)."""
        elapsed = max(now - self._start, 0.0)
        pct = 100 if self.total <= 0 else self._done * 100 // self.total
        rate = self._done / elapsed if elapsed > 0 else 0.0
        return f"{self.label}: {self._done}/{self.total} ({pct}%) {rate:.1f}/s, {elapsed:.1f}s"

    def _draw(self, now: float, end: str) -> None:
        line = self.render(now)
        pad = " " * max(self._width - len(line), 0)
        self._width = len(line)
        self._last_draw = now
        self._write("\r" + line + pad + end)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # closed or broken: stop drawing, keep waiting
            self._enabled = False


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):  # a closed stream
        return False
