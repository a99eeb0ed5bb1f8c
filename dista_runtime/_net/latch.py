"""How results and calls cross threads and loop turns, whatever the loop.

- `Latch`: what finishes later (a welcome, a worker's exit, a head's answer, a ref's
  value). The runtime settles it on its loop; whoever waits for it waits the way their loop
  waits (a binding's `Backend.wait`: a future on asyncio, an event on trio, a cooperative
  wait on gevent), or with `Latch.wait` from a plain thread.
- `CallQueue`: call-soon for a loop whose own call-soon wakes it on every call (trio).
- `Handle`: a coroutine a binding runs in a task of its own (`Loop.create_task`), as the
  runtime holds it: cancelled the binding's way, its done callbacks kept here.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["CallQueue", "Handle", "Latch"]

T = TypeVar("T")


class CallQueue:
    """`Loop.call_soon` for a loop whose own call-soon wakes it on every call (trio's
    ``run_sync_soon`` writes to a socket each time): calls made on the loop's thread queue
    up, in order, and one task of the loop runs them (`run_queued`), woken by ``wake`` when
    the queue stops being empty. A call that raises is logged, as asyncio logs a callback's
    exception, and the others run on."""

    __slots__ = ("_queue", "_wake")

    def __init__(self, wake: Callable[[], object]) -> None:
        self._queue: deque[tuple[Callable[..., object], tuple[Any, ...]]] = deque()
        self._wake = wake

    def __call__(self, callback: Callable[..., object], *args: Any) -> None:
        self._queue.append((callback, args))
        if len(self._queue) == 1:
            self._wake()

    def run_queued(self) -> bool:
        """Run the calls queued now, in order (those they make wait for the next turn);
        whether any wait."""
        queue = self._queue
        for _ in range(len(queue)):
            callback, args = queue.popleft()
            try:
                callback(*args)
            except Exception:  # logged: the loop goes on
                logging.getLogger("dista").exception("dista: exception in %r", callback)
        return bool(queue)

    def drain(self) -> None:
        """Run the queued calls, and those they queue, until none is left: a task of the
        loop that just read calls this before it waits again, so that what the read set
        going (a reply through an in-memory link, a finished task's result) goes in this
        turn, not in the queue task's next one."""
        while self.run_queued():
            pass


class Handle:
    """A `dista_runtime._net.contract.TaskHandle` for a coroutine a binding runs: ``cancel``
    is the binding's; `ended` runs the done callbacks (given this handle) once."""

    __slots__ = ("_callbacks", "_cancel")

    def __init__(self, cancel: Callable[[], object]) -> None:
        self._cancel = cancel
        self._callbacks: list[Callable[[Any], object]] | None = []

    # A method, not the callable in a slot: pyright takes a slot's callable for a method
    # to bind, and then no `Handle` for a `TaskHandle` (nor the anyio loop for a `Loop`).
    def cancel(self) -> object:
        return self._cancel()

    def add_done_callback(self, callback: Callable[[Any], object], /) -> None:
        if self._callbacks is None:
            callback(self)
        else:
            self._callbacks.append(callback)

    def ended(self) -> None:
        """The coroutine has ended (cancelled too)."""
        callbacks, self._callbacks = self._callbacks or [], None
        for callback in callbacks:
            callback(self)


class Latch(Generic[T]):
    """A result that arrives once, from any thread: a value or an exception.

    Callbacks run on the thread that settles it (the loop's, for everything the runtime
    settles); `wait` blocks a plain thread until it is settled. Cheap to make (one per
    ``await ref``): the event a blocked thread needs is made only when one waits.
    """

    __slots__ = ("_callbacks", "_done", "_error", "_event", "_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[Latch[T]], object]] = []
        self._value: T | None = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._done

    def failed(self) -> bool:
        """Whether it is settled with an error."""
        return self._done and self._error is not None

    def error(self) -> BaseException | None:
        """The error it is settled with, if any."""
        return self._error

    def set(self, value: T) -> None:
        """Settle with ``value`` (a second settle is ignored)."""
        self._settle(value, None)

    def fail(self, error: BaseException) -> None:
        """Settle with ``error``: `result` raises it."""
        self._settle(None, error)

    def _settle(self, value: T | None, error: BaseException | None) -> None:
        with self._lock:
            if self._done:
                return
            self._value, self._error = value, error
            self._done = True
            callbacks, self._callbacks = self._callbacks, []
            event = self._event
        if event is not None:
            event.set()
        for callback in callbacks:
            callback(self)

    def add_callback(self, callback: Callable[[Latch[T]], object]) -> None:
        """Call ``callback(self)`` once settled (now, if it is)."""
        with self._lock:
            if not self._done:
                self._callbacks.append(callback)
                return
        callback(self)

    def notify(
        self, call_soon_threadsafe: Callable[..., object], wake: Callable[[], object]
    ) -> None:
        """Once settled, ``wake()`` on the waiter's loop (through its
        ``call_soon_threadsafe``), unless that loop has ended: nobody waits any more."""

        def settled(_: object) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed
                call_soon_threadsafe(wake)

        self.add_callback(settled)

    def result(self) -> T:
        """The value, or raise the error; RuntimeError if not settled yet."""
        if not self._done:
            raise RuntimeError("the latch is not settled yet")
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def wait(self, timeout: float | None = None) -> T:
        """Block this thread until settled (TimeoutError after ``timeout`` seconds)."""
        with self._lock:
            event = self._event
            if event is None and not self._done:
                event = self._event = threading.Event()
        if event is not None and not event.wait(timeout):
            raise TimeoutError(f"not settled within {timeout} s")
        return self.result()
