"""What `Pool`'s asynchronous calls return: `AsyncResult`, `MapResult`, `IMapIterator`.

Their interface is `multiprocessing.pool`'s (``get(timeout)``, ``wait``, ``ready``,
``successful``; ``next(timeout)`` for the iterators), and so is their order of events: a
result's callback runs before the result becomes ready, on the thread that settles
futures (`multiprocessing` has a result-handler thread for it), so a callback that blocks
holds up every result behind it. Two differences: a timeout raises `PoolTimeoutError`,
which is `multiprocessing.TimeoutError` and the builtin `TimeoutError` at once; and a
result cancelled by `Pool.terminate` raises `TaskCancelledError` instead of never being
ready.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from .._errors import GetTimeoutError, TaskCancelledError

__all__ = ["AsyncResult", "IMapIterator", "MapResult", "PoolTimeoutError", "outcome"]

T = TypeVar("T")


class PoolTimeoutError(multiprocessing.TimeoutError, GetTimeoutError):
    """A pool's result was not ready in time: ``except multiprocessing.TimeoutError``, as a
    `multiprocessing.Pool` script has it, catches it, and so does ``except TimeoutError``."""


def _terminated() -> TaskCancelledError:
    return TaskCancelledError("the pool was terminated before this result was ready")


def outcome(future: Future[Any]) -> tuple[bool, Any]:
    """(True, value) or (False, the error) of a done future; a cancelled one failed."""
    if future.cancelled():
        return False, _terminated()
    error = future.exception()
    if error is not None:
        return False, error
    return True, future.result()


class AsyncResult(Generic[T]):
    """The result of `Pool.apply_async` (and the base of `MapResult`)."""

    def __init__(
        self,
        callback: Callable[[T], object] | None = None,
        error_callback: Callable[[BaseException], object] | None = None,
    ) -> None:
        self._event = threading.Event()
        self._callback = callback
        self._error_callback = error_callback
        self._success = False
        self._value: Any = None
        self._once = threading.Lock()
        self._decided = False

    def __repr__(self) -> str:
        state = "ready" if self.ready() else "pending"
        return f"<dista {type(self).__name__} {state}>"

    def ready(self) -> bool:
        return self._event.is_set()

    def successful(self) -> bool:
        """Whether the call returned without raising; `ValueError` if it is not ready."""
        if not self.ready():
            raise ValueError(f"{self!r} not ready")
        return self._success

    def wait(self, timeout: float | None = None) -> None:
        self._event.wait(timeout)

    def get(self, timeout: float | None = None) -> T:
        """The value; raises what the call raised, or `PoolTimeoutError` after ``timeout``."""
        self.wait(timeout)
        if not self.ready():
            raise PoolTimeoutError(f"the result was not ready within {timeout} s")
        if self._success:
            value: T = self._value
            return value
        raise self._value

    def _set(self, success: bool, value: Any, callbacks: bool = True) -> None:
        """Settle once: the callback first, then ready (as `multiprocessing` does)."""
        with self._once:
            if self._decided:
                return
            self._decided = True
        self._success, self._value = success, value
        try:
            if callbacks and success and self._callback is not None:
                self._callback(value)
            if callbacks and not success and self._error_callback is not None:
                self._error_callback(value)
        finally:
            self._event.set()

    def _settle(self, future: Future[Any]) -> None:
        success, value = outcome(future)
        self._set(success, value, callbacks=not future.cancelled())


class MapResult(AsyncResult[list[T]]):
    """The result of `Pool.map_async`: the list of values, once every chunk is in; the
    first error to arrive (in arrival order, as `multiprocessing`), at once."""

    def __init__(
        self,
        length: int,
        chunksize: int,
        callback: Callable[[list[T]], object] | None = None,
        error_callback: Callable[[BaseException], object] | None = None,
    ) -> None:
        super().__init__(callback, error_callback)
        self._lock = threading.Lock()
        self._values: list[Any] = [None] * length
        self._chunksize = chunksize
        self._left = -(-length // chunksize) if length else 0
        if not self._left:
            self._set(True, [])

    def _chunk_done(self, index: int, future: Future[Any]) -> None:
        success, value = outcome(future)
        if not success:
            self._set(False, value, callbacks=not future.cancelled())
            return
        start = index * self._chunksize
        with self._lock:
            self._values[start : start + len(value)] = value
            self._left -= 1
            last = self._left == 0
        if last:
            self._set(True, self._values)


class IMapIterator(Iterator[T]):
    """The iterator of `Pool.imap` (in order) and `Pool.imap_unordered` (as they come).

    Chunks are submitted by a feeder thread as it reads the input (`multiprocessing` has a
    task-handler thread for it), so tasks run even while nobody iterates, and an endless
    input is fine. An error, of a call or of the input itself, is raised at its place (its
    chunk's, for an unordered one); iterating on then goes past it."""

    def __init__(self, ordered: bool) -> None:
        self._ordered = ordered
        self._cond = threading.Condition(threading.Lock())
        self._done: dict[int, tuple[bool, Any]] = {}  # ordered: by chunk index
        self._arrived: deque[tuple[bool, Any]] = deque()  # unordered
        self._taken = 0  # chunks handed out
        self._total: int | None = None  # chunks, once the feeder has read all the input
        self._buffer: deque[Any] = deque()

    def __iter__(self) -> IMapIterator[T]:
        return self

    def __next__(self) -> T:
        return self.next()

    def next(self, timeout: float | None = None) -> T:
        """The next value; `PoolTimeoutError` if none comes within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._buffer:
                got = self._take()
                if got is not None:
                    success, value = got
                    if not success:
                        raise value
                    self._buffer.extend(value)
                    continue
                if self._total is not None and self._taken >= self._total:
                    raise StopIteration
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise PoolTimeoutError(f"no result within {timeout} s")
                self._cond.wait(left)
            item: T = self._buffer.popleft()
            return item

    def _take(self) -> tuple[bool, Any] | None:
        if self._ordered:
            got = self._done.pop(self._taken, None)
        else:
            got = self._arrived.popleft() if self._arrived else None
        if got is not None:
            self._taken += 1
        return got

    def _put(self, index: int, success: bool, value: Any) -> None:
        with self._cond:
            if self._ordered:
                self._done[index] = (success, value)
            else:
                self._arrived.append((success, value))
            self._cond.notify_all()

    def _chunk_done(self, index: int, future: Future[Any]) -> None:
        self._put(index, *outcome(future))

    def _fed(self, chunks: int) -> None:
        """The feeder is through the input: there are ``chunks`` chunks in all."""
        with self._cond:
            self._total = chunks
            self._cond.notify_all()
