"""A connection as a `Stream` over a non-blocking socket, for bindings whose loops run tasks
(anyio on asyncio or trio, gevent's greenlets) rather than asyncio's protocols.

The binding runs two small tasks a connection, whose only loop-specific part is how they
wait for the socket:

- the reader: while `SocketStream.reading`, wait until the socket is readable, then
  `SocketStream.read` (one ``recv_into`` straight into the buffer the core offers: a large
  object's own buffer); when it returns False the connection has ended;
- the writer: woken by ``wake_writer`` when writes queue up, wait until the socket is
  writable, then `SocketStream.flush`, until it returns False.

`write` sends at once what the socket takes and queues the rest, as views (never copied,
as uvloop keeps them); above `HIGH_WATER` queued bytes the engine is told the link is
paused (`Connections.pause_writing`), and below `LOW_WATER` that it can go on
(`Connections.resume_writing`). `close` sends what is
queued first. The binding says how to wake each task and what to do before the socket is
closed under a task waiting on it (``closing``: trio's ``notify_closing``).
"""

from __future__ import annotations

import os
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from socket import AI_NUMERICHOST
from typing import Any, Final

from dista_proto.frame import Bytes

from .address import unix_path
from .contract import Connections
from .streams import HIGH_WATER, LOW_WATER, nodelay, peer_of

__all__ = ["READ_SIZE", "SocketStream", "connect_socket"]

#: What one read asks for when the core has no better size in mind.
READ_SIZE: Final = 256 << 10


class SocketStream:
    """Link ``link`` of ``engine`` over ``sock`` (see the module docstring)."""

    def __init__(
        self,
        engine: Connections,
        link: int,
        sock: socket.socket,
        wake_writer: Callable[[], object],
        wake_reader: Callable[[], object],
        closing: Callable[[socket.socket], object] | None = None,
    ) -> None:
        sock.setblocking(False)
        nodelay(sock)
        self.engine = engine
        self.link = link
        self.sock = sock
        self._wake_writer = wake_writer
        self._wake_reader = wake_reader
        self._closing_hook = closing
        self._queue: deque[Bytes] = deque()
        self._size = 0
        self._paused = False  # the engine was told this link is over the mark
        self.reading = True
        self._closing = False
        self.ended = False
        self._peer: Any = peer_of(sock)

    # -- the engine's side (Stream) ----------------------------------------------------------

    def write(self, data: Any) -> None:
        if self._closing or self.ended:
            return
        if isinstance(data, bytearray):
            data = bytes(data)  # its writer may change it once write returns
        elif not isinstance(data, bytes):
            data = memoryview(data).cast("B")  # lengths in bytes, whatever the items are
        if not self._queue:
            try:
                sent = self.sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError:
                self.end()
                return
            if sent == len(data):
                return
            data = memoryview(data)[sent:] if sent else data
        self._queue.append(data)
        self._size += len(data)
        if len(self._queue) == 1:
            self._wake_writer()
        if not self._paused and self._size > HIGH_WATER:
            self._paused = True
            self.engine.pause_writing(self.link)

    def get_write_buffer_size(self) -> int:
        return self._size

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        if not self.reading:
            self.reading = True
            self._wake_reader()

    def is_closing(self) -> bool:
        return self._closing or self.ended

    def close(self) -> None:
        """Close once what is queued is sent."""
        if self._closing or self.ended:
            return
        self._closing = True
        if not self._queue:
            self.end()

    def abort(self) -> None:
        """Close now, dropping what is queued."""
        self.end()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "socket":
            return self.sock
        if name == "peername":
            return self._peer
        return default

    # -- the binding's tasks -----------------------------------------------------------------

    def read(self) -> bool:
        """One read into the core's buffer (the socket is readable); False once ended."""
        if self.ended:
            return False
        try:
            n = self.sock.recv_into(self.engine.get_buffer(self.link, READ_SIZE))
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            n = 0
        if not n:
            self.end()
            return False
        self.engine.on_updated(self.link, n)
        return not self.ended

    def flush(self) -> bool:
        """Send what is queued while the socket takes it; whether some still waits."""
        queue = self._queue
        while queue and not self.ended:
            data = queue[0]
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self.end()
                return False
            self._size -= sent
            if sent == len(data):
                queue.popleft()
            else:
                queue[0] = memoryview(data)[sent:]
                break
        if self._paused and self._size <= LOW_WATER:
            self._paused = False
            self.engine.resume_writing(self.link)
        if not queue and self._closing:
            self.end()
        return bool(queue) and not self.ended

    def end(self) -> None:
        """The connection is over: close the socket and tell the engine (once)."""
        if self.ended:
            return
        self.ended = True
        self._closing = True
        self._queue.clear()
        self._size = 0
        if self._closing_hook is not None:
            self._closing_hook(self.sock)
        self.sock.close()
        self._wake_reader()
        self._wake_writer()
        self.engine.detach(self.link)


async def connect_socket(
    host: str,
    port: int,
    wait_writable: Callable[[socket.socket], Awaitable[object]],
    resolve: Callable[[str, int], Awaitable[list[Any]]],
) -> socket.socket:
    """A non-blocking socket connected to the first of ``host``'s addresses that accepts
    (``unix:PATH`` for a Unix socket), for a loop that waits with ``wait_writable``; a
    host name (not an IP address) is looked up with ``resolve`` (its loop's resolver)."""
    if (path := unix_path(host)) is not None:
        targets: list[Any] = [(socket.AF_UNIX, 0, 0, "", path)]
    else:
        try:  # an IP address needs no resolver thread
            targets = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, AI_NUMERICHOST)
        except socket.gaierror:
            targets = await resolve(host, port)
    error = OSError(f"no address for {host}")
    for family, _, _, _, address in targets:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            try:
                sock.connect(address)
            except BlockingIOError:
                await wait_writable(sock)
                if code := sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    raise OSError(code, f"{os.strerror(code)} ({host}:{port})") from None
            return sock
        except BaseException as e:
            sock.close()
            if not isinstance(e, OSError):
                raise
            error = e
    raise error
