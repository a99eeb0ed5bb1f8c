"""Writing a large value into its memory file with more than one core.

``pwrite`` into a memory file copies at about 4 GB/s on one core here (256 MiB in 65 ms,
as long again as the task that built the array); it releases the GIL, so writing halves of
a value from two threads at once takes about half as long on two cores, as Ray's object
store copies large buffers with several threads. `write_pieces` cuts what is to be written
into chunks of `CHUNK` bytes and shares them between the caller and up to `HELPERS`
helper threads (started on first use, again after a fork); a value under `PARALLEL_FROM`
bytes, or a machine with one core, is written by the caller alone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

from dista_proto.frame import Bytes

__all__ = ["CHUNK", "PARALLEL_FROM", "write_pieces"]

#: Values from this size are written by more than one thread.
PARALLEL_FROM: Final = 64 << 20
#: The unit of work a thread takes.
CHUNK: Final = 16 << 20
#: Threads besides the caller's (one per other core, at most 3).
HELPERS: Final = max(0, min(3, (os.cpu_count() or 1) - 1))
#: One ``pwrite`` stops short of 2 GiB on Linux; ask for no more than this at a time.
_WRITE_MAX: Final = 1 << 30

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _helpers() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(HELPERS, thread_name_prefix="dista-write")
    return _pool


def write_at(fd: int, piece: Bytes, offset: int) -> None:
    """``piece`` at ``offset`` in ``fd``, all of it."""
    view = memoryview(piece).cast("B")
    done = 0
    while done < len(view):  # a write may stop short
        done += os.pwrite(fd, view[done : done + _WRITE_MAX], offset + done)


def write_pieces(fd: int, pieces: Sequence[tuple[int, Bytes]], size: int) -> None:
    """Each piece at its offset in ``fd`` (a value of ``size`` bytes)."""
    if size < PARALLEL_FROM or not HELPERS:
        for offset, piece in pieces:
            write_at(fd, piece, offset)
        return
    chunks: list[tuple[int, memoryview]] = []
    for offset, piece in pieces:
        view = memoryview(piece).cast("B")
        chunks.extend((offset + at, view[at : at + CHUNK]) for at in range(0, len(view), CHUNK))
    pool = _helpers()
    share = HELPERS + 1
    helping: list[Future[None]] = [
        pool.submit(_write_chunks, fd, chunks[k::share]) for k in range(1, share)
    ]
    try:
        _write_chunks(fd, chunks[0::share])
    finally:
        for future in helping:
            future.result()  # raises what a helper raised, once all have finished


def _write_chunks(fd: int, chunks: list[tuple[int, memoryview]]) -> None:
    for offset, view in chunks:
        write_at(fd, view, offset)


def _forget() -> None:
    global _pool
    _pool = None  # a forked child has no helper threads: the next large write starts some


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
