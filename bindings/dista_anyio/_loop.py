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

from dista_runtime.binding import (
    CallQueue,
    Connections,
    Handle,
    Listener,
    SocketListener,
    Steps,
    Timer,
    Tls,
    listen_socket,
    running,
)

from ._net import Pump, Readable, dial

__all__ = ["AnyioLoop", "soon_threadsafe"]

#: The `Handle` whose coroutine runs in this context (`AnyioLoop.current_task`).
_current: ContextVar[Handle | None] = ContextVar("dista_anyio_task", default=None)


def soon_threadsafe() -> Callable[..., object]:
    """The running loop's call-soon-from-any-thread (RuntimeError once it has ended)."""
    if sniffio.current_async_library() != "trio":
        return asyncio.get_running_loop().call_soon_threadsafe
    import trio

    return trio.lowlevel.current_trio_token().run_sync_soon


async def _run_task(
    handle: Handle, scope: anyio.CancelScope, coro: Coroutine[Any, Any, None]
) -> None:
    """``coro`` in ``scope``, as the task ``handle`` (`AnyioLoop.create_task`)."""
    _current.set(handle)  # in this task's own context
    try:
        with scope:
            await coro
    finally:
        handle.ended()


class AnyioLoop:
    """The runtime's view of the anyio loop running ``group`` (see
    `dista_runtime._net.contract.Loop`): what it starts runs in ``group``."""

    def __init__(self, group: TaskGroup) -> None:
        self.group = group
        self.call_later: Callable[..., Timer] = self._sleeper
        self.call_soon: Callable[..., object]
        self.call_soon_threadsafe: Callable[..., object]
        self._native: asyncio.AbstractEventLoop | None = None  # asyncio's, reading on it
        self.after_read: Callable[[], object] | None = None
        if sniffio.current_async_library() == "trio":
            # run_sync_soon wakes trio through a socket on every call: calls made on its own
            # thread go through a queue instead (a round trip 1.5x asyncio's before, ~1.2x now).
            self.calls: CallQueue = CallQueue(lambda: pump.wake())
            pump = Pump(group, None, running(self.calls))  # what runs them
            self.call_soon = self.calls
            self.after_read = self.calls.drain  # what a read set going leaves in this turn
            self.call_soon_threadsafe = partial(soon_threadsafe(), self.calls)
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

    def create_task(self, coro: Coroutine[Any, Any, None]) -> Handle:
        scope = anyio.CancelScope()
        handle = Handle(scope.cancel)
        self.group.start_soon(_run_task, handle, scope, coro)
        return handle

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
        return Pump(self.group, sock, steps).wake

    def closing(self, sock: socket.socket) -> None:
        anyio.notify_closing(sock)  # a closed socket's too: it knows none

    def stop(self) -> None:
        """End what runs in the task group (on the loop)."""
        self.group.cancel_scope.cancel()


async def _later(delay: float, call: Callable[[], object]) -> None:
    await anyio.sleep(delay)
    call()
