"""Giving memory back after a burst: glibc keeps what a process frees, the head returns it.

Measured (``python -m benchmarks.head_memory``): a head idle at 29 MiB that passed 16
drivers' 60 KiB inline results (384 MiB through it) stayed at 100-450 MiB once every object
was freed (``HeadStats`` all zero), and ``gc.collect()`` changed nothing: the memory was
free in glibc's heap, fragmented between chunks still in use, so glibc's own trimming (the
top of the heap only) could not return it. ``malloc_trim(0)`` returns the free pages
inside the heap too: 102 MiB went back to 33.

So a head checks once a second (`CHECK_S`) how much its allocator holds free
(``mallinfo2``: about 30 us) and trims when that grew by `TRIM_AFTER` (32 MiB) since it
last trimmed: a trim (about 30 ms for a 300 MiB heap) comes only after large frees, at
most once every `MIN_GAP_S`. Smaller frees add up too: after the 300,000-frame fuzz
(`benchmarks/fuzz.py`) a head idle at 30 MiB stayed at 39 MiB with 6-9 MiB free in its
heap, under that bar, and ``malloc_trim`` took it to 33. So once the load has settled (the
bytes in use moved less than `SETTLED_MOVE` over `SETTLED_CHECKS` checks) it also trims
when `TRIM_SETTLED` (4 MiB) more is free, at most once every `SETTLED_GAP_S`: about a
millisecond, and pages it gives back are faulted in again only if the load comes back.
Elsewhere (not glibc, or glibc before 2.33) nothing is done.

Peers refused for a protocol error left garbage in reference cycles: the core kept each
one's `RemoteProtocolError` with the traceback of its raise, which held the frames that
parsed its bytes, and so the connection and views of its receive buffer (after a flood of
bad frames: 10,549 objects, 236 sockets and 106 MiB of views, in 213 such cycles), and the
head's young-generation threshold is raised (``_cli_process.tune_process``), so the full
collection that frees them came rarely. The core now keeps the error without a traceback and
raises it anew; any link the head's core closes (`collect_soon`: a refusal, a hello past
the observer cap, an idle peer) still makes the next check collect first, at most once every
`MIN_GAP_S`, for what else a dropped peer may leave in a cycle: asyncio's TLS transport is
one, with a 256 KiB buffer (2,000 refused TLS observers kept 460 MiB until a collection).
"""

from __future__ import annotations

import ctypes
import gc
import time
from typing import Any, Final

from .._net.contract import Loop, Timer
from .._net.latch import Latch

__all__ = [
    "CHECK_S",
    "MIN_GAP_S",
    "SETTLED_CHECKS",
    "SETTLED_GAP_S",
    "SETTLED_MOVE",
    "TRIM_AFTER",
    "TRIM_SETTLED",
    "MemoryWatch",
    "watch_memory",
]

CHECK_S: Final = 1.0
MIN_GAP_S: Final = 2.0
TRIM_AFTER: Final = 32 << 20
TRIM_SETTLED: Final = 4 << 20
SETTLED_CHECKS: Final = 3
SETTLED_MOVE: Final = 1 << 20
SETTLED_GAP_S: Final = 30.0


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _libc() -> Any:
    """glibc with ``mallinfo2`` and ``malloc_trim``, or None."""
    try:
        # The process's own symbols: glibc is loaded already. (ctypes.util.find_library
        # runs ldconfig in a subprocess: slow, and a blocking call inside gevent's hub.)
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _MallInfo2
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


class MemoryWatch:
    """What `watch_memory` started: `collect_soon` after refusing a peer."""

    def __init__(self, loop: Loop, libc: Any) -> None:
        self._loop = loop
        self._libc = libc
        info = libc.mallinfo2()
        self._floor = int(info.fordblks)  # free bytes just after the last trim, or fewer since
        self._used = int(info.uordblks)  # bytes in use at the last check
        self._trimmed = 0.0
        self._settled_trim = 0.0
        self._steady = 0  # checks in a row the bytes in use moved less than SETTLED_MOVE
        self._collect = False
        self._collected = 0.0
        self._timer: Timer | None = loop.call_later(CHECK_S, self._check)

    def collect_soon(self) -> None:
        """Garbage in cycles is likely (a peer refused): collect at the next check."""
        self._collect = True

    def _check(self) -> None:
        if self._collect and time.monotonic() - self._collected >= MIN_GAP_S:
            self._collect = False
            gc.collect()
            self._collected = time.monotonic()
        info = self._libc.mallinfo2()
        free, used = int(info.fordblks), int(info.uordblks)
        self._steady = self._steady + 1 if abs(used - self._used) < SETTLED_MOVE else 0
        self._used = used
        self._floor = min(self._floor, free)
        now = time.monotonic()
        grown = free - self._floor
        if grown >= TRIM_AFTER and now - self._trimmed >= MIN_GAP_S:
            self._trim(now, free)
        elif (
            grown >= TRIM_SETTLED
            and self._steady >= SETTLED_CHECKS
            and now - self._settled_trim >= SETTLED_GAP_S
        ):
            self._settled_trim = now
            self._trim(now, free)
        self._timer = self._loop.call_later(CHECK_S, self._check)

    def _trim(self, now: float, free: int) -> None:
        self._libc.malloc_trim(0)
        self._trimmed = now
        self._floor = free  # glibc still counts what it gave back as free

    def cancel(self, _: object = None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def watch_memory(loop: Loop, until: Latch[Any]) -> MemoryWatch | None:
    """Trim ``loop``'s process's heap after large frees (module docstring), until
    ``until`` is settled; None where there is no glibc to ask."""
    libc = _libc()
    if libc is None:
        return None
    watch = MemoryWatch(loop, libc)
    until.add_callback(watch.cancel)
    return watch
