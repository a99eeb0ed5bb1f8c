"""Giving large memory back off the caller's thread.

Unmapping a large object, or closing the last descriptor of its memory file, makes the
kernel free every page of it: 20 to 50 ms for 256 MiB here. The last reference to a
worker's stored value goes when the head frees it, on the worker's I/O loop, usually in
the same read as the next task: freeing it there held that task back by as long (the
timeline showed 50 ms between a task's arrival and its start). `later` hands such a call
to a thread of its own (started on first use, again after a fork), which makes the calls
in order; the memory is unused from the moment it is queued, and gone a moment later.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["later", "settled"]

_calls: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]]] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()
_pending = 0  # calls queued and not yet made (changed under `_lock`)


def later(call: Callable[..., Any], *args: Any) -> None:
    """Make ``call(*args)`` soon, on the reaper's thread (an OSError is ignored: what it
    gives back is already unused)."""
    global _thread, _pending
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_run, name="dista-reaper", daemon=True)
            _thread.start()
        _pending += 1
    _calls.put((call, args))


def settled(timeout: float = 5.0) -> bool:
    """Wait until every call queued so far is made (True), or ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while _pending:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)
    return True


def _run() -> None:
    global _pending
    while True:
        call, args = _calls.get()
        try:
            call(*args)
        except OSError:
            pass  # nothing to tell anyone: the memory was unused
        with _lock:
            _pending -= 1


def _forget() -> None:
    global _thread, _calls, _lock, _pending
    _thread = None  # a forked child has no reaper thread: the next call starts one
    _calls = queue.SimpleQueue()
    _lock = threading.Lock()
    _pending = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
