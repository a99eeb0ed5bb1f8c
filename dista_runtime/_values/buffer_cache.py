"""Receive buffers kept a few seconds after their values are dropped, for the next large
object to land in pages already faulted in.

A fresh map costs a page fault per 4 KiB page as it fills: about 0.1 s of CPU per 256 MiB
faulted ahead by `dista_runtime._values.memory`'s filler, 0.2 s faulted as the bytes land. That
is most of what a large get costs beyond moving its bytes, and over TLS, whose decryption
already takes a core, it held the 256 MiB transfer under 1 GB/s on two vCPUs (0.86 GB/s:
`benchmarks/results/tls.md`); into pages faulted already, the same get decrypts at
1.4-1.6 GB/s. So, as Ray's object store keeps its arena mapped, a driver or worker keeps
the maps its large receives landed in (`CACHE_FROM` bytes and more, `CACHE_BYTES` in all:
an eighth of the machine's memory, 1 to 8 GiB) and lands a later object of a close size
(`FIT`) in one that nothing uses any more. A map nobody has used for `IDLE_S` seconds goes
back to the system, so memory still returns to its idle size once the load ends; one never
filled whole (a frame its peer announced and never sent) goes back as soon as it is free.

Only receives are cached: a received frame fills its whole buffer before anyone sees it,
so a reused map never shows what it held before (a buffer that must start zeroed, such
as `dista_runtime._values.codec`' joined value with its alignment gaps, comes from `allocate`).
A map is free when its only references are the cache's own: every view of it, and every
array made from one, holds a reference to it. The cache lives on its host's I/O loop, the
only thread that receives, so it takes no lock. The head does not use one: what it
receives large (inline arguments) it passes on at once, and its memory is kept lean.
"""

from __future__ import annotations

import mmap
import os
import sys
import time
from collections.abc import Callable
from typing import Final

from .._net.contract import Loop, Timer
from .memory import MAP_FROM, allocate, faulted_in

__all__ = ["CACHE_BYTES", "CACHE_FROM", "FIT", "IDLE_S", "BufferCache"]

#: Receives from this size are cached (smaller ones fault little and come and go often).
CACHE_FROM: Final = max(MAP_FROM, 8 << 20)


def _cache_bytes() -> int:
    """An eighth of this machine's memory, within 1 to 8 GiB: room for the maps of the
    sizes a loop of gets alternates between (256 MiB and 1 GiB took more than 1 GiB)."""
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        ram = 0
    return min(8 << 30, max(1 << 30, ram // 8))


#: The most the maps a cache tracks may add up to, in use or not.
CACHE_BYTES: Final = _cache_bytes()
#: A free map is reused for an object at least this fraction of its size, no smaller.
FIT: Final = 0.75
#: A map free this long is given back (checked every `SWEEP_S`).
IDLE_S: Final = 5.0
SWEEP_S: Final = 1.0

# getrefcount's own argument, and the entry's.
_UNUSED_REFS: Final = 2


class _Entry:
    __slots__ = ("free_since", "map")

    def __init__(self, region: mmap.mmap) -> None:
        self.map = region
        self.free_since = 0.0  # when a sweep first saw it free; 0 while in use

    def free(self) -> bool:
        return sys.getrefcount(self.map) <= _UNUSED_REFS


_Which = Callable[[_Entry], bool]


class BufferCache:
    """Receive buffers for one host on ``loop`` (the module docstring); `allocate` is the
    ``allocate`` a core lands large frames with."""

    def __init__(self, loop: Loop, limit: int = CACHE_BYTES, idle_s: float = IDLE_S) -> None:
        self._loop = loop
        self._limit = limit
        self._idle_s = idle_s
        self._entries: list[_Entry] = []
        self._bytes = 0
        self._timer: Timer | None = None
        self.reused = 0  # receives that landed in a kept map (for tests and benchmarks)

    @property
    def kept_bytes(self) -> int:
        """What the maps the cache tracks add up to."""
        return self._bytes

    def allocate(self, n: int) -> bytearray | memoryview:
        """A writable buffer of ``n`` bytes that the caller fills whole before anything
        reads it: a kept map nothing uses if one fits, else a new one (kept if room)."""
        if n < CACHE_FROM:
            return allocate(n)
        best: _Entry | None = None
        for entry in self._entries:
            size = len(entry.map)
            fits = n <= size and n >= FIT * size
            if fits and (best is None or size < len(best.map)) and entry.free():
                best = entry
        if best is not None:
            best.free_since = 0.0
            self.reused += 1
            view = memoryview(best.map)
            return view if len(view) == n else view[:n]
        buffer = allocate(n)
        if isinstance(buffer, memoryview) and isinstance(buffer.obj, mmap.mmap):
            self._keep(buffer.obj)
        return buffer

    def _keep(self, region: mmap.mmap) -> None:
        size = len(region)
        if self._bytes + size > self._limit:
            self._drop(lambda e: e.free(), room=self._bytes + size - self._limit)
            if self._bytes + size > self._limit:
                return  # the rest is in use: this one is not kept
        self._entries.append(_Entry(region))
        self._bytes += size
        if self._timer is None:
            self._timer = self._loop.call_later(SWEEP_S, self._sweep)

    def _sweep(self) -> None:
        self._timer = None
        now = time.monotonic()
        for entry in self._entries:
            if not entry.free():
                entry.free_since = 0.0
            elif not entry.free_since:
                entry.free_since = now
        # A map never filled (a frame its peer announced and did not send) is not kept:
        # a hostile peer's would otherwise stay mapped the idle time after it left.
        self._drop(
            lambda e: (
                bool(e.free_since)
                and (now - e.free_since >= self._idle_s or not faulted_in(e.map))
            )
        )
        if self._entries:
            self._timer = self._loop.call_later(SWEEP_S, self._sweep)

    def _drop(self, which: _Which, room: int | None = None) -> None:
        """Stop keeping the entries ``which`` picks (oldest first), all of them or until
        ``room`` bytes are dropped; a free map is unmapped at once."""
        kept: list[_Entry] = []
        dropped = 0
        for entry in self._entries:
            if (room is None or dropped < room) and which(entry):
                dropped += len(entry.map)
                self._bytes -= len(entry.map)
                if entry.free():
                    entry.map.close()
            else:
                kept.append(entry)
        self._entries = kept

    def close(self, _: object = None) -> None:
        """Give back every map nothing uses, and keep none from now on."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._drop(lambda e: True)
        self._limit = 0
