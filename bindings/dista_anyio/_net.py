"""Connections on anyio: raw non-blocking sockets driven by `SocketStream`.

Each connection has a writer task in the loop's task group, as `dista_runtime._net.sockets`
asks (it waits until writes queue up, then until ``anyio.wait_writable``, then flushes),
and a reader: on trio a task too (``anyio.wait_readable``, then one ``recv_into`` into the
core's buffer); on asyncio the loop's own readiness callback, registered while reading is
on, which reads at once. A reader task there costs a task wake-up and two ``epoll_ctl``
calls a read: a round trip 1.4x asyncio's own, against 1.1x this way.

Each task waits on an event only once it has seen that it has nothing to do, so a wake-up
before the wait is never needed. A stream that ends calls ``anyio.notify_closing`` (and
drops asyncio's reader) before it closes its socket, so that nothing waits on a closed
descriptor; a task cancelled with its task group still ends its stream, so that no socket
is left open.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import Any

import anyio
import sniffio

from dista_runtime.binding import (
    AcceptErrors,
    Connections,
    Tls,
    connect_socket,
    socket_address,
    socket_stream,
)

__all__ = ["Server", "dial", "serve"]


def serve(anyio_loop: Any, engine: Connections, link: int, sock: socket.socket, tls: Tls) -> None:
    """Attach ``sock`` to ``engine`` as ``link`` (in ``tls``, if given) and start reading
    and writing it, in the task group of ``anyio_loop`` (an `AnyioLoop`)."""
    wakes = [anyio.Event(), anyio.Event()]  # the reader task's, the writer's: one per wait
    native = sniffio.current_async_library() == "asyncio"
    loop: Any = asyncio.get_running_loop() if native else None

    def readable() -> None:  # asyncio's readiness callback (see the module docstring)
        sniffio.current_async_library_cvar.set("asyncio")  # for anyio: see `AnyioLoop`
        if stream.reading:
            stream.read()
        elif not stream.ended:  # paused: `wake_reader` adds it again
            loop.remove_reader(sock)

    def wake_reader() -> None:
        if not native:
            wakes[0].set()
        elif not stream.ended:
            loop.add_reader(sock, readable)

    def closing(sock: socket.socket) -> None:
        if native:
            loop.remove_reader(sock)
        anyio.notify_closing(sock)

    wake_writer = lambda: wakes[1].set()
    stream = socket_stream(
        engine,
        link,
        sock,
        wake_writer,
        wake_reader,
        closing,
        tls=tls,
        call_soon=anyio_loop.call_soon,
    )
    engine.attach(link, stream)

    async def pump(me: int, busy: Callable[[], object], ready: Any, work: Any) -> None:
        """While ``busy()`` says there is work, wait until ``ready`` and do it; else sleep
        until woken. A stream whose task ends (cancelled too) is ended."""
        try:
            with contextlib.suppress(anyio.ClosedResourceError, OSError):  # ended under us
                while not stream.ended:
                    if busy():
                        await ready(sock)
                        if busy():
                            work()
                    else:
                        wakes[me] = anyio.Event()
                        await wakes[me].wait()
        finally:
            stream.end()

    wake_reader()
    if not native:  # what a read sets going runs before the reader waits again
        work = lambda: (stream.read(), anyio_loop.calls.drain())
        anyio_loop.group.start_soon(pump, 0, lambda: stream.reading, anyio.wait_readable, work)
    group = anyio_loop.group
    group.start_soon(pump, 1, stream.get_write_buffer_size, anyio.wait_writable, stream.flush)


class Server:
    """``sock`` (listening) served for ``engine`` (`Loop.listen`): connections wait in its
    backlog until accepted."""

    def __init__(self, loop: Any, engine: Connections, sock: socket.socket, tls: Tls) -> None:
        self._sock = sock
        sock.setblocking(False)
        self.address = socket_address(sock)
        loop.group.start_soon(self._accept, loop, engine, tls)

    async def _accept(self, loop: Any, engine: Connections, tls: Tls) -> None:
        errors = AcceptErrors(engine, loop.call_later)
        while self._sock.fileno() >= 0:  # until `close`
            try:
                await anyio.wait_readable(self._sock)
                conn, _ = self._sock.accept()
            except (anyio.ClosedResourceError, BlockingIOError, ConnectionAbortedError):
                continue
            except OSError as e:  # out of descriptors or memory: rest (logged once a second)
                await anyio.sleep(errors.failed(e))
                continue
            serve(loop, engine, engine.accept(), conn, tls)

    def close(self) -> None:
        anyio.notify_closing(self._sock)  # a closed socket's too: it knows none
        self._sock.close()


async def dial(
    loop: Any, engine: Connections, link: int, where: tuple[str, int], timeout: float, tls: Tls
) -> None:
    """Connect ``link`` to ``where`` (``unix:PATH`` for a Unix socket) within ``timeout``
    seconds and serve it, then tell ``engine`` how it went (`Loop.dial`)."""
    try:
        with anyio.fail_after(timeout):
            sock = await connect_socket(*where, anyio.wait_writable, _resolve)
    except OSError as e:  # TimeoutError is one
        engine.dialed(link, str(e) or type(e).__name__)
        return
    serve(loop, engine, link, sock, tls)
    engine.dialed(link, "")


async def _resolve(host: str, port: int) -> list[Any]:
    return await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
