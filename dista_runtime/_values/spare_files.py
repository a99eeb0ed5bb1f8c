"""Memory files made ahead, for a worker's next large value to be written into pages that
are already there.

Writing a value into a fresh memory file costs a page allocation per 4 KiB as it copies:
about 0.4 s per GiB here, where the copy alone into pages already allocated takes 0.1 to
0.15 s. Ray's object store reuses one arena whose pages stay allocated; a file Dista has
shared cannot be reused (a fetcher may map it as long as it likes), so instead, after a
worker stores a value of `SPARE_FROM` bytes or more, a thread of its own makes a file of
that size and allocates its pages (``posix_fallocate``, which releases the GIL) while the
next task runs: a series of large results of about one size (a loop of gets, a pipeline)
lands in warm pages. `take` gives a spare at least the size asked for and at most a
quarter larger (its caller trims it to size). A spare nobody took for `IDLE_S` seconds is
closed, so that memory returns to its idle size once large values stop; all of them
together stay under `SPARE_BYTES`.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Final

__all__ = ["IDLE_S", "SPARE_BYTES", "SPARE_FROM", "SpareFiles", "new_file"]

#: Values from this size leave a spare of their size behind them.
SPARE_FROM: Final = 32 << 20
#: The most the spares may add up to.
SPARE_BYTES: Final = 2 << 30
#: A spare not taken this long is closed.
IDLE_S: Final = 5.0
#: A spare fits a value of at least this fraction of its size.
FIT: Final = 0.8


def new_file() -> int:
    """A new, empty memory file that may be sealed (OSError: none to be had)."""
    return os.memfd_create("dista-object", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)


class SpareFiles:
    """The spares of one process, made by a thread of their own (started on first use)."""

    def __init__(self, limit: int = SPARE_BYTES, idle_s: float = IDLE_S) -> None:
        self._limit = limit
        self._idle_s = idle_s
        self._spares: list[tuple[int, int, float]] = []  # (size, fd, made at)
        self._wanted: list[int] = []  # sizes to make
        self._wake: threading.Condition | None = None  # made with the thread
        self._thread: threading.Thread | None = None
        self.made = 0  # spares made and taken (for tests)
        self.taken = 0

    def _bytes(self) -> int:
        return sum(size for size, _, _ in self._spares) + sum(self._wanted)

    def take(self, n: int) -> int | None:
        """A spare of ``n`` to ``n / FIT`` bytes (its pages allocated), or None."""
        wake = self._wake
        if wake is None:
            return None
        with wake:
            fits = [s for s in self._spares if n <= s[0] and n >= FIT * s[0]]
            if not fits:
                return None
            spare = min(fits)
            self._spares.remove(spare)
            self.taken += 1
            return spare[1]

    def want(self, n: int) -> None:
        """A value of ``n`` bytes was just stored: make a spare of that size, unless one
        fits already or there is no room."""
        if n < SPARE_FROM:
            return
        if self._wake is None:
            self._start()
        wake = self._wake
        assert wake is not None
        with wake:
            if any(n <= s and n >= FIT * s for s, _, _ in self._spares) or n in self._wanted:
                return
            if self._bytes() + n > self._limit:
                return
            self._wanted.append(n)
            wake.notify()

    def _start(self) -> None:
        self._wake = threading.Condition(threading.Lock())
        self._thread = threading.Thread(target=self._run, name="dista-spares", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        wake = self._wake
        assert wake is not None
        while True:
            with wake:
                if not self._wanted:
                    wake.wait(timeout=1.0 if self._spares else None)
                size = self._wanted[0] if self._wanted else 0
                self._close_idle()
            if size:
                fd = self._make(size)
                with wake:
                    self._wanted.remove(size)
                    if fd is not None:
                        self._spares.append((size, fd, time.monotonic()))
                        self.made += 1

    @staticmethod
    def _make(size: int) -> int | None:
        try:
            fd = new_file()
        except OSError:
            return None
        try:
            os.ftruncate(fd, size)
            os.posix_fallocate(fd, 0, size)  # the pages, zeroed, outside the GIL
        except OSError:  # no memory for it now: the value after will allocate its own
            os.close(fd)
            return None
        return fd

    def _close_idle(self) -> None:
        now = time.monotonic()
        keep = []
        for spare in self._spares:
            if now - spare[2] >= self._idle_s:
                os.close(spare[1])
            else:
                keep.append(spare)
        self._spares = keep

    def forget(self) -> None:
        """After a fork: the child has no thread, and its spares are the parent's."""
        self._spares = []
        self._wanted = []
        self._wake = None
        self._thread = None


SPARES: Final = SpareFiles()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=SPARES.forget)
