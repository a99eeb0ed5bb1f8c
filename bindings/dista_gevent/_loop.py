"""`dista_runtime._net.contract.Loop` on a gevent hub: its callbacks, timers and io watchers,
and a greenlet for each task the runtime's `Steps` tell (`dista_runtime.binding.serve_socket`
and `SocketListener` say what to do with a socket: two a connection, one a listener).

Each greenlet parks on one `Waiter` at a time (`_Pump`), woken by an io watcher (the socket
readable or writable), a timer (a rest), or a wake-up. A watcher is active only while its
greenlet is parked on it, and a wake stops it: a stream wakes its greenlets before it
closes the socket (libev must not watch a closed descriptor, whose number the next socket
may get); they then see it ended and return.

A worker's ``async def`` tasks run on an asyncio loop in a thread of the hub's threadpool
(the runtime's `Coroutines`); in a monkey-patched process its plain tasks run in greenlets
(`dista_gevent._tasks.GreenletRunner`), else in the runtime's threads.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import gevent
from gevent import monkey
from gevent import socket as gsocket
from gevent.hub import Hub, Waiter, get_hub

from dista_runtime.binding import (
    Connections,
    Coroutines,
    CoroutineTask,
    Latch,
    SocketListener,
    Steps,
    Tls,
    Wait,
    listen_socket,
    serve_socket,
    unix_path,
)

from ._tasks import GreenletRunner

__all__ = ["GeventLoop", "patched"]


def patched() -> bool:
    """Whether gevent has patched ``threading``: then the runtime's blocking waits (a
    `Latch`, a blocking get) are cooperative, and the caller's hub can serve them."""
    return bool(monkey.is_module_patched("threading"))


class _Timer:
    """A `Loop.call_later` call: a one-shot timer watcher, timed from now (``update``), not
    from the start of the loop's turn."""

    def __init__(self, hub: Hub, delay: float, callback: Callable[..., object], args: Any):
        self._watcher = hub.loop.timer(max(0.0, delay))
        self._watcher.start(callback, *args, update=True)
        self.cancel: Callable[[], None] = self._watcher.close


class GeventLoop:
    """The runtime's view of ``hub`` (default: this thread's); see `dista_runtime._net.contract.Loop`.

    ``runner``: greenlets for a worker's plain tasks in a monkey-patched process (their
    waits cooperate there), else None (the runtime's threads)."""

    def __init__(self, hub: Hub | None = None) -> None:
        self.hub: Hub = hub if hub is not None else get_hub()
        self._threadsafe = self.hub.loop.run_callback_threadsafe  # safe once the loop is gone
        self.call_soon: Callable[..., object] = self.hub.loop.run_callback
        self.closed: bool = False
        self.runner: GreenletRunner | None = GreenletRunner(self.hub) if patched() else None
        self._coroutines: Coroutines | None = None
        self._ended: Any = None  # what ends `serve`
        self.after_read: Callable[[], object] | None = None  # nothing to run after a read

    def call_soon_threadsafe(self, callback: Callable[..., object], *args: Any) -> object:
        if self.closed:
            raise RuntimeError("this gevent loop is closed")
        return self._threadsafe(callback, *args)

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> _Timer:
        return _Timer(self.hub, delay, callback, args)

    def create_task(self, coro: Coroutine[Any, Any, None]) -> CoroutineTask:
        if self._coroutines is None:  # asyncio's own selector: it blocks its thread, not a hub
            selector = monkey.get_original("selectors", "DefaultSelector")()
            self._coroutines = Coroutines(self, self.hub.threadpool.spawn, selector)
        return self._coroutines.start(coro)

    def current_task(self) -> object:
        return self._coroutines.current() if self._coroutines is not None else None

    def close(self) -> None:
        """End what runs beside the hub: the coroutines' asyncio loop (and its thread)."""
        if self._coroutines is not None:
            self._coroutines.stop()

    def serve(self, started: Latch[GeventLoop]) -> None:
        """Run this thread's hub (`LoopThread`) until `stop`, then end it."""
        self._ended = self.hub.loop.async_()  # active while waited for: the hub runs on
        started.set(self)
        self.hub.wait(self._ended)
        self.close()
        self.hub.destroy(destroy_loop=True)

    def stop(self) -> None:
        """End `serve` (on the hub); calls from other threads raise RuntimeError from now."""
        self.closed = True
        self._ended.send()

    def listen(
        self, engine: Connections, host: str, port: int, sock: Any = None, tls: Tls = None
    ) -> SocketListener:
        return SocketListener(self, engine, sock or listen_socket(host, port), tls)

    def dial(
        self, engine: Connections, link: int, host: str, port: int, timeout: float, tls: Tls = None
    ) -> None:
        gevent.spawn(_dial, self, engine, link, host, port, timeout, tls)

    def spawn(
        self, steps: Steps, sock: socket.socket, *, reader: bool = False
    ) -> Callable[[], object]:
        return _Pump(self.hub, sock, steps).wake

    def closing(self, sock: socket.socket) -> None:
        """Nothing: the stream wakes its greenlets (stopping their watchers) first."""


def _dial(
    loop: GeventLoop,
    engine: Connections,
    link: int,
    host: str,
    port: int,
    timeout: float,
    tls: Tls,
) -> None:
    path = unix_path(host)
    sock = None
    try:
        if path is None:
            sock = gsocket.create_connection((host, port), timeout)
        else:
            sock = gsocket.socket(socket.AF_UNIX)
            sock.settimeout(timeout)
            sock.connect(path)
    except OSError as e:
        if sock is not None:
            sock.close()
        engine.dialed(link, str(e) or type(e).__name__)
        return
    serve_socket(engine, link, sock, tls, loop)
    engine.dialed(link, "")


class _Pump:
    """``steps`` run in a greenlet on ``hub``, parked on ``sock``'s io watchers as they
    say (see the module docstring)."""

    def __init__(self, hub: Hub, sock: socket.socket, steps: Steps) -> None:
        self._hub = hub
        self._fd = sock.fileno()
        self._watchers: dict[Wait, Any] = {}  # made once, started while parked
        self._watching: Any = None
        self._parked: Waiter | None = None
        gevent.spawn(self._run, steps)

    def _run(self, steps: Steps) -> None:
        with contextlib.closing(steps):
            for wait in steps:
                waiter = self._parked = Waiter(self._hub)
                self._watching = self._watcher(wait)
                if self._watching is not None:
                    self._watching.start(waiter.switch, None)
                try:
                    waiter.get()
                finally:
                    self._unwatch()
                    self._parked = None
        for watcher in self._watchers.values():
            watcher.close()

    def _watcher(self, wait: Wait | float) -> Any:
        """What wakes a greenlet parked for ``wait`` besides `wake`: an io watcher (one for
        each, kept), a timer, or nothing."""
        if wait is Wait.WOKEN:
            return None
        if not isinstance(wait, Wait):
            return self._hub.loop.timer(wait)
        if wait not in self._watchers:
            events = 1 if wait is Wait.READABLE else 2  # libev's EV_READ, EV_WRITE
            self._watchers[wait] = self._hub.loop.io(self._fd, events)
        return self._watchers[wait]

    def _unwatch(self) -> None:
        if self._watching is not None:
            self._watching.stop()
            self._watching = None

    def wake(self) -> None:
        if self._parked is not None:
            self._unwatch()
            self._hub.loop.run_callback(self._parked.switch, None)
