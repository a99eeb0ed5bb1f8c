"""Connections on anyio: raw non-blocking sockets driven by `SocketStream`, waited on with
``anyio.wait_readable`` / ``wait_writable`` (both backends).

Each connection runs two tasks in the loop's task group, as `dista_runtime.sockets` asks:
a reader (wait readable, then one ``recv_into`` into the core's buffer) and a writer (woken
when writes queue up; wait writable, then flush). A stream that ends calls
``anyio.notify_closing`` before it closes its socket, so that neither task waits on a
closed descriptor. A task cancelled with the task group still ends its stream, so that
no socket is left open.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from typing import Any

import anyio
from anyio.abc import TaskGroup

from dista_runtime.binding import Connections, listen_socket, socket_address, unix_path
from dista_runtime.sockets import SocketStream

__all__ = ["Server", "dial", "serve"]

_log = logging.getLogger("dista.anyio")
#: Accept errors that say the process is out of something: wait a little before the next.
_STARVED = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class _Wake:
    """A reusable wake-up for one task: a `set` while it does not wait is kept for its
    next `wait` (anyio's events are single use)."""

    __slots__ = ("_event", "_pending")

    def __init__(self) -> None:
        self._event: anyio.Event | None = None
        self._pending = False

    def set(self) -> None:
        if self._event is not None:
            self._event.set()
        else:
            self._pending = True

    async def wait(self) -> None:
        if self._pending:
            self._pending = False
            return
        self._event = anyio.Event()
        try:
            await self._event.wait()
        finally:
            self._event = None


def serve(group: TaskGroup, engine: Connections, link: int, sock: socket.socket) -> None:
    """Attach ``sock`` to ``engine`` as ``link`` and start its reader and writer."""
    reader, writer = _Wake(), _Wake()
    stream = SocketStream(engine, link, sock, writer.set, reader.set, anyio.notify_closing)
    engine.attach(link, stream)
    group.start_soon(_read, stream, reader)
    group.start_soon(_write, stream, writer)


async def _read(stream: SocketStream, wake: _Wake) -> None:
    try:
        while not stream.ended:
            if not stream.reading:
                await wake.wait()  # paused: `resume_reading` wakes us
            else:
                await anyio.wait_readable(stream.sock)
                if stream.reading:
                    stream.read()
    except (anyio.ClosedResourceError, OSError):
        pass  # the stream ended under the wait
    finally:
        stream.end()


async def _write(stream: SocketStream, wake: _Wake) -> None:
    try:
        while not stream.ended:
            if not stream.get_write_buffer_size():
                await wake.wait()  # nothing queued: a write that queues wakes us
            else:
                await anyio.wait_writable(stream.sock)
                stream.flush()
    except (anyio.ClosedResourceError, OSError):
        pass
    finally:
        stream.end()


class Server:
    """A listening socket whose connections are ``engine``'s (`Loop.listen`); the socket
    listens before this returns, so connections wait in its backlog until accepted."""

    def __init__(
        self, group: TaskGroup, engine: Connections, host: str, port: int, sock: Any = None
    ) -> None:
        self._sock: socket.socket = sock or listen_socket(host, port)
        self._sock.setblocking(False)
        self.address = socket_address(self._sock)
        self._scope = anyio.CancelScope()
        group.start_soon(self._accept, group, engine)

    async def _accept(self, group: TaskGroup, engine: Connections) -> None:
        with self._scope:
            while self._sock.fileno() >= 0:  # until `close`
                try:
                    await anyio.wait_readable(self._sock)
                    conn, _ = self._sock.accept()
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    continue
                except anyio.ClosedResourceError:
                    return
                except OSError as e:
                    if self._sock.fileno() >= 0:
                        _log.warning("dista: cannot accept a connection: %s", e)
                        await anyio.sleep(1 if e.errno in _STARVED else 0)
                    continue
                serve(group, engine, engine.accept(), conn)

    def close(self) -> None:
        self._scope.cancel()
        if self._sock.fileno() >= 0:
            anyio.notify_closing(self._sock)
            self._sock.close()


async def dial(
    group: TaskGroup, engine: Connections, link: int, host: str, port: int, timeout: float
) -> None:
    """Connect ``link`` to ``host:port`` (or ``unix:PATH``) within ``timeout`` seconds and
    serve it, then tell ``engine`` how it went (`Loop.dial`)."""
    try:
        with anyio.fail_after(timeout):
            sock = await _connect(host, port)
    except OSError as e:  # TimeoutError is one
        engine.dialed(link, str(e) or type(e).__name__)
        return
    serve(group, engine, link, sock)
    engine.dialed(link, "")


async def _connect(host: str, port: int) -> socket.socket:
    path = unix_path(host)
    if path is not None:
        targets: list[tuple[int, Any]] = [(socket.AF_UNIX, path)]
    else:
        try:  # an IP address needs no resolver thread
            found: list[Any] = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
            )
        except socket.gaierror:
            found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        targets = [(info[0], info[4]) for info in found]
    error = OSError(f"no address for {host}")
    for family, address in targets:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            try:
                sock.connect(address)
            except BlockingIOError:
                await anyio.wait_writable(sock)
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    raise OSError(code, f"{os.strerror(code)} ({host}:{port})") from None
            return sock
        except OSError as e:
            sock.close()
            error = e
        except BaseException:
            sock.close()
            raise
    raise error
