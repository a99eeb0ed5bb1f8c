"""`dista_runtime._net.contract.Loop` over a running anyio task group, on asyncio or on trio.

Calls go to the backend's own scheduler, the cheapest way each offers: asyncio's
``call_soon``, ``call_soon_threadsafe`` and ``call_later`` as they are. On trio, calls
made on the loop's own thread go through a `CallQueue` that one task runs, woken by an
event (``run_sync_soon`` writes to trio's wake-up socket on every call); those from other
threads reach the queue by ``run_sync_soon``; timers are sleeping tasks that `Task.cancel`
cancels. A call that raises is logged, as asyncio's loop does, rather than ending the run
(as trio would). Whatever runs in the task group (a worker's ``async def`` tasks, trio's
calls and timers, each connection's reader and writer: `dista_anyio._net`) ends with it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Coroutine
from contextvars import Context, ContextVar
from functools import partial
from typing import Any

import anyio
import sniffio
from anyio.abc import TaskGroup
from anyio.lowlevel import checkpoint

from dista_runtime.binding import (
    CallQueue,
    Connections,
    Listener,
    SocketListener,
    Steps,
    Timer,
    Tls,
    listen_socket,
)

from ._net import Pump, Readable, dial

__all__ = ["AnyioLoop", "Task", "soon_threadsafe"]

#: The `Task` whose coroutine runs in this context (`AnyioLoop.current_task`).
_current: ContextVar[Task | None] = ContextVar("dista_anyio_task", default=None)


def soon_threadsafe() -> Callable[..., object]:
    """The running loop's call-soon-from-any-thread (RuntimeError once it has ended)."""
    if sniffio.current_async_library() != "trio":
        return asyncio.get_running_loop().call_soon_threadsafe
    import trio

    return trio.lowlevel.current_trio_token().run_sync_soon


class Task:
    """A coroutine run in the task group (`AnyioLoop.create_task`): `cancel` cancels its
    scope, and done callbacks get this handle, as asyncio's tasks do."""

    __slots__ = ("_callbacks", "_scope")

    def __init__(self) -> None:
        self._scope = anyio.CancelScope()
        self._callbacks: list[Callable[[Any], object]] | None = []

    def cancel(self) -> None:
        self._scope.cancel()

    def add_done_callback(self, callback: Callable[[Any], object], /) -> None:
        if self._callbacks is None:
            callback(self)
        else:
            self._callbacks.append(callback)

    async def run(self, coro: Coroutine[Any, Any, None]) -> None:
        _current.set(self)  # in this task's own context
        try:
            with self._scope:
                await coro
        finally:
            callbacks, self._callbacks = self._callbacks or [], None
            for callback in callbacks:
                callback(self)


class AnyioLoop:
    """The runtime's view of the anyio loop running ``group`` (see
    `dista_runtime._net.contract.Loop`): what it starts runs in ``group``."""

    def __init__(self, group: TaskGroup) -> None:
        self.group = group
        self.call_later: Callable[..., Timer] = self._sleeper
        self._native: asyncio.AbstractEventLoop | None = None  # asyncio's, reading on it
        if sniffio.current_async_library() == "trio":
            # run_sync_soon wakes trio through a socket on every call: calls made on its own
            # thread go through a queue instead (a round trip 1.5x asyncio's before, ~1.2x now).
            wakes = [anyio.Event()]
            self.calls = calls = CallQueue(lambda: wakes[0].set())
            self.call_soon: Callable[..., object] = calls
            self.call_soon_threadsafe: Callable[..., object] = partial(soon_threadsafe(), calls)
            group.start_soon(_run_calls, calls, wakes)
        else:
            # asyncio runs plain callbacks outside any task, where sniffio (so anyio) finds
            # no async library: ours run in a context that names it, so that they can start
            # tasks, make cancel scopes and notify closings.
            named, loop = Context(), asyncio.get_running_loop()
            self._native = loop
            named.run(sniffio.current_async_library_cvar.set, "asyncio")
            self.call_soon_threadsafe = partial(loop.call_soon_threadsafe, context=named)
            self.call_soon = partial(loop.call_soon, context=named)
            self.call_later = partial(loop.call_later, context=named)

    def _sleeper(self, delay: float, callback: Callable[..., object], *args: Any) -> Timer:
        return self.create_task(_later(delay, partial(self.call_soon, callback, *args)))

    def create_task(self, coro: Coroutine[Any, Any, None]) -> Task:
        task = Task()
        self.group.start_soon(task.run, coro)
        return task

    def current_task(self) -> object:
        return _current.get()

    def listen(
        self, engine: Connections, host: str, port: int, sock: Any = None, tls: Tls = None
    ) -> Listener:
        return SocketListener(self, engine, sock or listen_socket(host, port), tls)

    def dial(
        self, engine: Connections, link: int, host: str, port: int, timeout: float, tls: Tls = None
    ) -> None:
        self.group.start_soon(dial, self, engine, link, (host, port), timeout, tls)

    def spawn(
        self, steps: Steps, sock: socket.socket, *, reader: bool = False
    ) -> Callable[[], object]:
        if reader and self._native is not None:
            return Readable(self._native, sock, steps).wake
        return Pump(self.group, sock, steps, self.calls.drain if reader else None).wake

    def closing(self, sock: socket.socket) -> None:
        anyio.notify_closing(sock)  # a closed socket's too: it knows none

    def stop(self) -> None:
        """End what runs in the task group (on the loop)."""
        self.group.cancel_scope.cancel()


async def _later(delay: float, call: Callable[[], object]) -> None:
    await anyio.sleep(delay)
    call()


async def _run_calls(calls: CallQueue, wakes: list[anyio.Event]) -> None:
    """Run ``calls`` as they come (trio), in turns with the loop's other tasks."""
    while True:
        if calls.run_queued():
            await checkpoint()
        else:
            wakes[0] = anyio.Event()
            await wakes[0].wait()
