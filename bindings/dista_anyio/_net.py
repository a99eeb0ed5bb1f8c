"""Connections on anyio: raw non-blocking sockets driven by `SocketStream`, waited on with
``anyio.wait_readable`` / ``wait_writable`` (both backends).

Each connection runs two tasks in the loop's task group, as `dista_runtime.sockets` asks:
a reader (wait readable, then one ``recv_into`` into the core's buffer) and a writer (wait
until writes queue up, then writable, then flush). Each waits on an event only once it
has seen that it has nothing to do, so a wake-up before the wait is never needed. A
stream that ends calls ``anyio.notify_closing`` before it closes its socket, so that
neither task waits on a closed descriptor; a task cancelled with its task group still
ends its stream, so that no socket is left open.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from dista_runtime.binding import Connections, socket_address, unix_path
from dista_runtime.sockets import SocketStream

__all__ = ["Server", "dial", "serve"]

_log = logging.getLogger("dista.anyio")


def serve(group: TaskGroup, engine: Connections, link: int, sock: socket.socket) -> None:
    """Attach ``sock`` to ``engine`` as ``link`` and start its reader and writer."""
    wakes = [anyio.Event(), anyio.Event()]  # the reader's, the writer's: one per wait
    stream = SocketStream(
        engine, link, sock, lambda: wakes[1].set(), lambda: wakes[0].set(), anyio.notify_closing
    )
    engine.attach(link, stream)

    async def pump(me: int, busy: Callable[[], object], ready: Any, work: Any) -> None:
        """While ``busy()`` says there is work, wait until ``ready`` and do it; else sleep
        until woken. A stream whose task ends (cancelled too) is ended."""
        try:
            while not stream.ended:
                if busy():
                    await ready(sock)
                    if busy():
                        work()
                else:
                    wakes[me] = anyio.Event()
                    await wakes[me].wait()
        except (anyio.ClosedResourceError, OSError):
            pass  # the stream ended under the wait
        finally:
            stream.end()

    group.start_soon(pump, 0, lambda: stream.reading, anyio.wait_readable, stream.read)
    group.start_soon(pump, 1, stream.get_write_buffer_size, anyio.wait_writable, stream.flush)


class Server:
    """``sock`` (listening) served for ``engine`` (`Loop.listen`): connections wait in its
    backlog until accepted."""

    def __init__(self, group: TaskGroup, engine: Connections, sock: socket.socket) -> None:
        self._sock = sock
        sock.setblocking(False)
        self.address = socket_address(sock)
        group.start_soon(self._accept, group, engine)

    async def _accept(self, group: TaskGroup, engine: Connections) -> None:
        while self._sock.fileno() >= 0:  # until `close`
            try:
                await anyio.wait_readable(self._sock)
                conn, _ = self._sock.accept()
            except (anyio.ClosedResourceError, BlockingIOError, ConnectionAbortedError):
                continue
            except OSError as e:  # out of descriptors or memory: give it a moment
                _log.warning("dista: cannot accept a connection: %s", e)
                await anyio.sleep(1)
                continue
            serve(group, engine, engine.accept(), conn)

    def close(self) -> None:
        if self._sock.fileno() >= 0:
            anyio.notify_closing(self._sock)
            self._sock.close()


async def dial(
    group: TaskGroup, engine: Connections, link: int, where: tuple[str, int], timeout: float
) -> None:
    """Connect ``link`` to ``where`` (``unix:PATH`` for a Unix socket) within ``timeout``
    seconds and serve it, then tell ``engine`` how it went (`Loop.dial`)."""
    try:
        with anyio.fail_after(timeout):
            sock = await _connect(*where)
    except OSError as e:  # TimeoutError is one
        engine.dialed(link, str(e) or type(e).__name__)
        return
    serve(group, engine, link, sock)
    engine.dialed(link, "")


async def _connect(host: str, port: int) -> socket.socket:
    """The first of ``host``'s addresses that accepts a connection."""
    path = unix_path(host)
    if path is not None:
        targets: list[Any] = [(socket.AF_UNIX, 0, 0, "", path)]
    else:
        try:  # an IP address needs no resolver thread
            targets = socket.getaddrinfo(
                host, port, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST
            )
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
        except OSError as e:
            error = e
            sock.close()
        except BaseException:
            sock.close()
            raise
    raise error
