"""`dista_runtime._net.contract.Loop` on a gevent hub: its callbacks, timers and io watchers, and two
greenlets per connection.

Every connection is a `dista_runtime._net.sockets.SocketStream` over a non-blocking socket. Its
reader greenlet parks until the socket is readable, then reads once into the buffer the
core offers; its writer greenlet parks until writes queue up, then until the socket takes
them. Each greenlet parks on one `Waiter` at a time, woken by its io watcher or by the
stream (`SocketStream`'s ``wake_reader``/``wake_writer``). A watcher is active only while
its greenlet is parked on it, and the stream stops both before it closes the socket
(libev must not watch a closed descriptor, whose number the next socket may get); the
parked greenlets are then woken, see the stream ended and return.

A worker's ``async def`` tasks run on an asyncio loop in a thread of the hub's threadpool
(the runtime's `Coroutines`); in a monkey-patched process its plain tasks run in greenlets
(`dista_gevent._tasks.GreenletRunner`), else in the runtime's threads.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

import gevent
from gevent import monkey
from gevent import socket as gsocket
from gevent.hub import Hub, Waiter, get_hub

from dista_runtime.binding import (
    AcceptErrors,
    Connections,
    Coroutines,
    CoroutineTask,
    Tls,
    listen_socket,
    socket_address,
    socket_stream,
    unix_path,
)

from ._tasks import GreenletRunner

__all__ = ["GeventLoop", "patched"]

#: How long a listener that cannot accept (out of file descriptors) rests, as asyncio's does.
_ACCEPT_PAUSE_S = 1.0
_READ, _WRITE = 0, 1


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
        self.cancel = self._watcher.close


class GeventLoop:
    """The runtime's view of ``hub`` (default: this thread's); see `dista_runtime._net.contract.Loop`.

    ``runner``: greenlets for a worker's plain tasks in a monkey-patched process (their
    waits cooperate there), else None (the runtime's threads)."""

    def __init__(self, hub: Hub | None = None) -> None:
        self.hub: Hub = hub if hub is not None else get_hub()
        self._threadsafe = self.hub.loop.run_callback_threadsafe  # safe once the loop is gone
        self.call_soon = self.hub.loop.run_callback
        self.closed = False
        self.runner = GreenletRunner(self.hub) if patched() else None
        self._coroutines: Coroutines | None = None

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

    def listen(
        self, engine: Connections, host: str, port: int, sock: Any = None, tls: Tls = None
    ) -> _Listener:
        return _Listener(self.hub, engine, sock or listen_socket(host, port), tls)

    def dial(
        self, engine: Connections, link: int, host: str, port: int, timeout: float, tls: Tls = None
    ) -> None:
        gevent.spawn(_dial, self.hub, engine, link, host, port, timeout, tls)


def _dial(
    hub: Hub, engine: Connections, link: int, host: str, port: int, timeout: float, tls: Tls
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
    _Connection(hub, engine, link, sock, tls)
    engine.dialed(link, "")


class _Listener:
    """Accepts on the hub, whenever the listening socket is readable."""

    def __init__(self, hub: Hub, engine: Connections, sock: socket.socket, tls: Tls):
        self.address = socket_address(sock)
        sock.setblocking(False)
        self._hub, self._engine, self._sock, self._tls = hub, engine, sock, tls
        self._watcher = hub.loop.io(sock.fileno(), 1)
        self._watcher.start(self._accept)
        self._pause = hub.loop.timer(_ACCEPT_PAUSE_S)
        self._errors = AcceptErrors(engine, lambda delay, f: _Timer(hub, delay, f, ()))

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of descriptors, say: rest rather than spin
                self._errors.failed(e)  # logged once a second
                self._watcher.stop()
                self._pause.start(self._watcher.start, self._accept)
                return
            _Connection(self._hub, self._engine, self._engine.accept(), conn, self._tls)

    def close(self) -> None:
        self._pause.close()
        self._watcher.close()
        self._sock.close()


class _Connection:
    """Link ``link`` of ``engine`` over ``sock``: its stream and two greenlets (see the
    module docstring)."""

    def __init__(
        self, hub: Hub, engine: Connections, link: int, sock: socket.socket, tls: Tls
    ) -> None:
        self._hub = hub
        self._watchers = (hub.loop.io(sock.fileno(), 1), hub.loop.io(sock.fileno(), 2))
        self._parked: list[Waiter | None] = [None, None]
        wake = partial(self._wake, _WRITE), partial(self._wake, _READ)
        call_soon = hub.loop.run_callback
        self.stream = socket_stream(
            engine, link, sock, *wake, self._closing, tls=tls, call_soon=call_soon
        )
        engine.attach(link, self.stream)
        gevent.spawn(self._reader)
        gevent.spawn(self._writer)

    def _park(self, side: int, until_ready: bool) -> None:
        """Until woken, or (``until_ready``) until the socket is ready for ``side``."""
        waiter = self._parked[side] = Waiter(self._hub)
        if until_ready:
            self._watchers[side].start(waiter.switch, None)
        try:
            waiter.get()
        finally:
            self._watchers[side].stop()
            self._parked[side] = None

    def _wake(self, side: int) -> None:
        waiter = self._parked[side]
        if waiter is not None:
            self._watchers[side].stop()
            self._hub.loop.run_callback(waiter.switch, None)

    def _closing(self, sock: socket.socket) -> None:
        for watcher in self._watchers:
            watcher.stop()  # before the descriptor goes; `end` wakes who was parked

    def _reader(self) -> None:
        stream = self.stream
        try:
            while not stream.ended:
                self._park(_READ, stream.reading)
                if stream.reading:
                    stream.read()
        finally:
            stream.end()
            self._watchers[_READ].close()

    def _writer(self) -> None:
        stream = self.stream
        try:
            while not stream.ended:
                self._park(_WRITE, False)
                while stream.flush():
                    self._park(_WRITE, True)
        finally:
            stream.end()
            self._watchers[_WRITE].close()
