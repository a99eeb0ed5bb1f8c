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
import os
import socket
from collections.abc import Callable
from socket import AI_NUMERICHOST
from typing import Any

import anyio
import sniffio

from dista_runtime import binding as rt
from dista_runtime.binding import AcceptErrors, Connections, socket_address, unix_path

__all__ = ["Server", "dial", "serve"]


def serve(anyio_loop: Any, engine: Connections, link: int, sock: socket.socket) -> None:
    """Attach ``sock`` to ``engine`` as ``link`` and start reading and writing it, in the
    task group of ``anyio_loop`` (an `AnyioLoop`)."""
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

    stream = rt.socket_stream(engine, link, sock, lambda: wakes[1].set(), wake_reader, closing)
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

    def __init__(self, loop: Any, engine: Connections, sock: socket.socket) -> None:
        self._sock = sock
        sock.setblocking(False)
        self.address = socket_address(sock)
        loop.group.start_soon(self._accept, loop, engine)

    async def _accept(self, loop: Any, engine: Connections) -> None:
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
            serve(loop, engine, engine.accept(), conn)

    def close(self) -> None:
        anyio.notify_closing(self._sock)  # a closed socket's too: it knows none
        self._sock.close()


async def dial(
    loop: Any, engine: Connections, link: int, where: tuple[str, int], timeout: float
) -> None:
    """Connect ``link`` to ``where`` (``unix:PATH`` for a Unix socket) within ``timeout``
    seconds and serve it, then tell ``engine`` how it went (`Loop.dial`)."""
    try:
        with anyio.fail_after(timeout):
            sock = await _connect(*where)
    except OSError as e:  # TimeoutError is one
        engine.dialed(link, str(e) or type(e).__name__)
        return
    serve(loop, engine, link, sock)
    engine.dialed(link, "")


async def _connect(host: str, port: int) -> socket.socket:
    """The first of ``host``'s addresses that accepts a connection."""
    if (path := unix_path(host)) is not None:
        targets: list[Any] = [(socket.AF_UNIX, 0, 0, "", path)]
    else:
        try:  # an IP address needs no resolver thread
            targets = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, AI_NUMERICHOST)
        except socket.gaierror:
            targets = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    error = OSError(f"no address for {host}")
    for family, _, _, _, address in targets:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            try:
                sock.connect(address)
            except BlockingIOError:
                await anyio.wait_writable(sock)
                if code := sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    raise OSError(code, f"{os.strerror(code)} ({host}:{port})") from None
            return sock
        except BaseException as e:
            sock.close()
            if not isinstance(e, OSError):
                raise
            error = e
    raise error
