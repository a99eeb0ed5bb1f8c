"""What a binding implements: one event loop, as the runtime uses it.

Everything Dista does on a loop (carrying out a core's decisions, a worker's tasks, joining
a cluster, a local cluster's head) is written once in the runtime against `Loop`, a handful
of calls that asyncio, anyio (on asyncio or trio) and gevent each offer in their own words:

- calls: `call_soon`, `call_soon_threadsafe` (from any thread), `call_later` (a `Timer`);
- coroutines: `create_task` (a worker's ``async def`` tasks) and `current_task`;
- the network: `listen` and `dial`, whose connections the binding reads into the buffers
  an engine offers (`dista_runtime._hosts.engine.Engine.get_buffer` / `on_updated`) and writes
  through a `dista_runtime._hosts.engine.Stream`.

What finishes later (a welcome, a worker's exit, a head's answer) is a `Latch`: the runtime
sets it on the loop; whoever waits for it waits the way their loop waits (a binding's
``wait``: a future on asyncio, an event on trio, a cooperative wait on gevent, or
`Latch.wait` from a plain thread).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "Background",
    "CallQueue",
    "Connections",
    "Latch",
    "Listener",
    "Loop",
    "TaskHandle",
    "Timer",
]

T = TypeVar("T")


class Timer(Protocol):
    """A `Loop.call_later` call that has not run yet (asyncio's `TimerHandle` is one)."""

    def cancel(self) -> object: ...


class TaskHandle(Protocol):
    """A coroutine the loop runs (asyncio's `Task` is one): it can be cancelled."""

    def cancel(self) -> object: ...

    def add_done_callback(self, callback: Callable[[Any], object], /) -> None: ...


class Listener(Protocol):
    """A listening socket a binding serves (`Loop.listen`)."""

    #: Where it listens: ``(host, port)``, or ``("unix:PATH", 0)``.
    address: tuple[str, int]

    def close(self) -> None: ...


class Connections(Protocol):
    """What a binding's connections are read into and report to (an `Engine`)."""

    #: Links whose stream is over its high-water mark (a stream adds its link when it
    #: passes the mark, and calls `resume` when it drains below the low one).
    paused: set[int]
    #: Mutual TLS for every connection (`dista_runtime._tls.config.TLS`), or None for plain TCP.
    tls: Any

    def accept(self) -> int:
        """A connection came in: its link number."""
        ...

    def attach(self, link: int, stream: Any) -> None:
        """``link`` is carried by ``stream`` (a `dista_runtime._hosts.engine.Stream`)."""
        ...

    def detach(self, link: int) -> None:
        """``link``'s connection ended."""
        ...

    def dialed(self, link: int, error: str) -> None:
        """`Loop.dial` for ``link`` ended: attached (``error`` empty), or failed."""
        ...

    def get_buffer(self, link: int, sizehint: int) -> memoryview:
        """Where ``link``'s next bytes are read to."""
        ...

    def on_updated(self, link: int, nbytes: int) -> None:
        """``nbytes`` were read into the view `get_buffer` gave."""
        ...

    def resume(self, link: int) -> None:
        """``link``'s stream drained below its low-water mark: write to it again."""
        ...

    def dialed_here(self, link: int) -> bool:
        """Whether ``link`` is a connection this end opened (`Loop.dial`), not accepted."""
        ...

    def secured(self, link: int, stream: Any) -> None:
        """``link``'s TLS handshake is done: its peer's certificate is known (the engine
        closes the link, before any frame is read, if its role may not be here)."""
        ...

    def tls_failed(self, link: int, stream: Any, why: str) -> None:
        """``link``'s TLS handshake failed (no certificate, another CA's, an expired one)."""
        ...


class Loop(Protocol):
    """One event loop, as the runtime drives it (see the module docstring)."""

    def call_soon(self, callback: Callable[..., object], *args: Any) -> object:
        """Call ``callback(*args)`` on the loop's next turn (from the loop's own thread)."""
        ...

    def call_soon_threadsafe(self, callback: Callable[..., object], *args: Any) -> object:
        """`call_soon` from any thread; RuntimeError once the loop is closed."""
        ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer:
        """Call ``callback(*args)`` in ``delay`` seconds, unless cancelled first."""
        ...

    def create_task(self, coro: Coroutine[Any, Any, None]) -> TaskHandle:
        """Run ``coro`` on the loop (a worker's ``async def`` task)."""
        ...

    def current_task(self) -> object:
        """The handle `create_task` gave for the coroutine running now, or None."""
        ...

    def listen(self, engine: Connections, host: str, port: int, sock: Any = None) -> Listener:
        """Serve ``host:port`` (or the bound socket ``sock``): each connection gets a link
        from ``engine.accept()``, is attached with ``engine.attach`` and read into the
        engine; its end is ``engine.detach``. Listening starts before this returns."""
        ...

    def dial(self, engine: Connections, link: int, host: str, port: int, timeout: float) -> None:
        """Connect ``link`` to ``host:port`` (``unix:PATH`` and port 0 for a Unix socket):
        ``engine.attach`` it and call ``engine.dialed(link, "")``, or
        ``engine.dialed(link, why)`` if it fails within ``timeout`` seconds."""
        ...


class Background(Protocol):
    """A loop serving blocking callers (a binding's ``background()``)."""

    loop: Loop

    def stop(self) -> None:
        """End the loop (and its thread, if it has one of its own)."""
        ...


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
