"""Large buffers that are cheap to fill: anonymous maps, faulted in ahead of their writer.

A write into fresh memory costs a page fault per 4 KiB page, and a socket read into pages
not yet faulted in is several times slower again (measured: 0.2 GB/s, against 2.5 GB/s into
faulted pages). ``madvise(MADV_POPULATE_WRITE)`` (Linux 5.14) faults a whole range in at
about 2.7 GB/s, with the GIL released, so it can run on another core while the buffer
fills: `allocate` maps a buffer, faults its first `AHEAD_MIN` in at once and leaves the
rest to a daemon thread, front to back; a writer asks `ready(view)` for the part of its
view that is faulted in, and faults the next chunk itself when the thread hasn't reached it
yet, so it never waits on the thread unless the thread is busy with the very chunk it
needs. A writer that skips `ready` is still correct (the kernel faults pages on touch),
only slower.

The thread stays ahead of the writer by as much as the writer has written (at least
`AHEAD_MIN`, at most `AHEAD_MAX`), not to the end: a buffer is allocated when a frame's
length is read, and a peer that announces a 1 GiB frame and sends nothing more must not
make its receiver fault in 1 GiB (it did: the fuzzer's receive maps). So what a map costs
in memory is at most about twice what has arrived in it, plus `AHEAD_MIN`. The thread holds
a map only while it works on it: one its writer dropped is forgotten.

Transparent huge pages would make faulting cheaper still, but not on a VM whose balloon
reports free memory to the host (free page reporting), as the small cloud VMs here do: the
host takes back free 2 MiB blocks, so huge pages come back cold (measured 1.2 to 2.6 s per
GiB, against 0.4 s for 4 KiB pages, which the kernel hands out from memory still backed).

Where there is no MADV_POPULATE_WRITE (an older kernel), a map is populated when made
(MAP_POPULATE, in the caller's thread); where there are no anonymous maps, and under
`MAP_FROM` bytes, `allocate` returns a bytearray.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Final

__all__ = [
    "AHEAD_MAX",
    "AHEAD_MIN",
    "CHUNK",
    "MAP_FROM",
    "allocate",
    "faulted_in",
    "ready",
    "write_into",
]

#: Buffers at least this large are maps; smaller ones are bytearrays.
MAP_FROM: Final = 1 << 20
#: A map is faulted in this much at a time.
CHUNK: Final = 8 << 20
#: How far ahead of its writer a map is faulted in: as far as the writer has come, within
#: these bounds (see `_Filling.limit`).
AHEAD_MIN: Final = 256 << 10
AHEAD_MAX: Final = 64 << 20
_MADV_POPULATE_WRITE: Final = 23
_MAP_FLAGS: Final = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
_MAP_POPULATE: Final = getattr(mmap, "MAP_POPULATE", None)


def _load_madvise() -> Callable[[int, int, int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    call: Callable[[int, int, int], int] = madvise
    return call


_madvise = _load_madvise() if _MAP_POPULATE is not None else None
# None until the first map says whether MADV_POPULATE_WRITE works here.
_populate_write: bool | None = None if _madvise is not None else False


def _address(buffer: mmap.mmap | memoryview) -> int:
    anchor = ctypes.c_char.from_buffer(buffer)
    try:
        return ctypes.addressof(anchor)
    finally:
        del anchor


def _populate(address: int, n: int) -> int:
    """Fault ``n`` bytes at ``address`` in, writable; 0 or the errno."""
    assert _madvise is not None
    if _madvise(address, n, _MADV_POPULATE_WRITE) == 0:
        return 0
    return ctypes.get_errno() or errno.EINVAL


class _Filling:
    """A map being faulted in, chunk by chunk, by the filler and by its writer."""

    __slots__ = (
        "base",
        "claimed",
        "done",
        "finished",
        "key",
        "map",
        "queued",
        "size",
        "wake",
        "want",
    )

    def __init__(self, region: mmap.mmap, base: int, size: int, start: int) -> None:
        self.map = weakref.ref(region)  # the filler never keeps a map its writer dropped
        self.key = id(region)
        self.base = base
        self.size = size
        self.claimed = start  # every byte before this one is someone's to fault in
        self.done = start  # every byte before this one is faulted in
        self.finished: dict[int, int] = {}  # chunks faulted in after a gap: start -> end
        self.wake = threading.Condition(threading.Lock())
        self.want = 0  # the furthest its writer has asked for
        self.queued = True  # in the filler's queue (changed under the queue's lock)

    def limit(self) -> int:
        """How far the filler may go: ahead of the writer by as much as it has written
        (`AHEAD_MIN` to `AHEAD_MAX`), so that a frame announced but never sent costs its
        receiver next to nothing, and one that arrives fast is faulted in ahead of it."""
        return min(self.size, self.want + min(AHEAD_MAX, max(AHEAD_MIN, self.want)))

    def claim(self, limit: int, needed: int | None = None) -> tuple[int, int] | None:
        """The next chunk to fault in, up to ``limit``; None when there is none (or, for a
        writer needing byte ``needed``, when someone else has its chunk already)."""
        with self.wake:
            start = self.claimed
            end = min(start + CHUNK, limit, self.size)
            if end <= start or (needed is not None and start > needed):
                return None
            self.claimed = end
            return start, end

    def fill(self, start: int, end: int) -> None:
        try:
            _populate(self.base + start, end - start)  # on failure, pages fault on touch
        finally:
            with self.wake:
                self.finished[start] = end
                while self.done in self.finished:
                    self.done = self.finished.pop(self.done)
                self.wake.notify_all()
            if self.done >= self.size:
                _filling.pop(self.key, None)

    def upto(self, offset: int) -> int:
        """Fault in the byte at ``offset`` (and what is before it); how far it is done."""
        if offset > self.want:
            self.want = offset
            if not self.queued and self.claimed < self.limit():
                _enqueue(self)
        while self.done <= offset:
            chunk = self.claim(self.size, offset)
            if chunk is not None:
                self.fill(*chunk)
                continue
            with self.wake:  # the filler has the chunk we need: wait for it
                while self.done <= offset:
                    self.wake.wait()
        return self.done


_filling: dict[int, _Filling] = {}  # id(map) -> its filling, until all faulted in or gone
_queue: deque[_Filling] = deque()
# Made with the filler, on first use: a process that gevent patches after importing Dista
# must get gevent's lock here, not a real one a greenlet would block the hub on.
_queue_wake: threading.Condition | None = None
_filler: threading.Thread | None = None


def _enqueue(filling: _Filling) -> None:
    """Give ``filling`` to the filler (starting it on first use)."""
    global _filler, _queue_wake
    if _queue_wake is None:  # on the I/O loop's thread, the only one that allocates
        _queue_wake = threading.Condition(threading.Lock())
    with _queue_wake:
        filling.queued = True
        _queue.append(filling)
        if _filler is None:
            _filler = threading.Thread(
                target=_fill_forever, args=(_queue_wake,), name="dista-fill", daemon=True
            )
            _filler.start()
        _queue_wake.notify()


def _fill_forever(wake: threading.Condition) -> None:
    while True:
        with wake:
            while not _queue:
                wake.wait()
            filling = _queue.popleft()
        region = filling.map()  # alive while we fault it in
        if region is None:
            continue  # its writer dropped it
        while (chunk := filling.claim(filling.limit())) is not None:
            filling.fill(*chunk)
        with wake:  # its writer may have come further meanwhile: then go on later
            filling.queued = filling.claimed < filling.limit()
            if filling.queued:
                _queue.append(filling)
        del region


def _forget_filler() -> None:
    global _filler, _queue_wake
    _filler = None  # a forked child has no filler thread (the next map starts one)
    _queue_wake = None
    _filling.clear()  # maps from before the fork: their pages fault on touch
    _queue.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_filler)


def allocate(n: int) -> bytearray | memoryview:
    """A zeroed, writable buffer of ``n`` bytes, cheap to fill however large; MemoryError if
    there is no room.

    From `MAP_FROM` bytes: a view of a private anonymous map, whose pages are being faulted
    in ahead of its writer (see `ready`). The map lives as long as the view, or anything
    made from it (a NumPy array decoded from it), does. Smaller: a bytearray.
    """
    global _populate_write
    if n < MAP_FROM or _MAP_POPULATE is None:
        return bytearray(n)
    flags = _MAP_FLAGS if _populate_write is not False else _MAP_FLAGS | _MAP_POPULATE
    try:
        region = mmap.mmap(-1, n, flags=flags)
    except OSError as e:
        raise MemoryError(f"cannot map {n} bytes: {e}") from e
    if _populate_write is False:
        return memoryview(region)
    base = _address(region)
    first = min(AHEAD_MIN, n)
    failed = _populate(base, first)
    if failed == errno.EINVAL and not _populate_write:
        _populate_write = False  # an older kernel: populate maps when they are made
        region.close()
        return allocate(n)
    if failed:
        region.close()
        raise MemoryError(f"cannot fault in {n} bytes: {os.strerror(failed)}")
    _populate_write = True
    if first < n:
        filling = _Filling(region, base, n, first)
        _filling[filling.key] = filling
        weakref.finalize(region, _filling.pop, filling.key, None)
        _enqueue(filling)
    return memoryview(region)


def ready(view: memoryview) -> memoryview:
    """``view`` (of a buffer from `allocate`, or anything else) cut to its start that is
    faulted in: at least one byte, faulting in the next chunk here if need be."""
    filling = _filling.get(id(view.obj))
    if filling is None or not view:
        return view
    start = _address(view) - filling.base
    end = filling.upto(start)
    return view if end - start >= len(view) else view[: end - start]


def faulted_in(region: mmap.mmap) -> bool:
    """Whether a map from `allocate` is faulted in whole (its writer filled it, or the
    filler got to its end): not a frame a peer announced and never sent."""
    return id(region) not in _filling


def write_into(dest: memoryview, data: memoryview | bytes) -> None:
    """``dest[:len(data)] = data``, behind the faulting-in of a buffer from `allocate`."""
    source = memoryview(data).cast("B")
    pos = 0
    while pos < len(source):
        room = ready(dest[pos : len(source)])
        n = len(room)
        room[:] = source[pos : pos + n]
        pos += n
