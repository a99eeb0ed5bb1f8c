"""A connection as a `Stream` over a non-blocking socket, for bindings whose loops run tasks
(anyio on asyncio or trio, gevent's greenlets) rather than asyncio's protocols.

What such a binding runs is written here once, as step generators (`Steps`): each says
what it waits for next (`Wait`: the socket readable or writable, a wake-up, or a number of
seconds), and the binding's `TaskLoop.spawn` waits that way and resumes it. A connection
has two:

- `reading`: while `SocketStream.reading`, wait until the socket is readable, then
  `SocketStream.read` (one ``recv_into`` straight into the buffer the core offers: a large
  object's own buffer); paused, wait to be woken (``wake_reader``);
- `writing`: while writes are queued, wait until the socket is writable, then
  `SocketStream.flush`; else wait to be woken (``wake_writer``).

A listener's accept loop is a third (`dista_runtime._tls.stream.SocketListener`). Each
generator waits to be woken only once it has seen that it has nothing to do, so a wake-up
before the wait is never needed; a wake stops what the step waits for and resumes it soon.

`write` sends at once what the socket takes and queues the rest, as views (never copied,
as uvloop keeps them); above `HIGH_WATER` queued bytes the engine is told the link is
paused (`Connections.pause_writing`), and below `LOW_WATER` that it can go on
(`Connections.resume_writing`). `close` sends what is queued first. A stream made for a
connection not counted yet (`ACCEPT_LATER`: a TLS listener's, in its handshake) tells the
engine nothing until it has a link. Before the socket closes, the binding is told
(`TaskLoop.closing`: trio's ``notify_closing``) and both generators are woken, so that
nothing waits on a closed descriptor.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Generator
from enum import Enum
from socket import AI_NUMERICHOST
from typing import Any, Final, Protocol, TypeAlias

from dista_proto.frame import Bytes

from .address import unix_path
from .contract import Connections, Loop
from .latch import CallQueue
from .streams import ACCEPT_LATER, HIGH_WATER, LOW_WATER, nodelay, peer_of

__all__ = [
    "READ_SIZE",
    "SocketStream",
    "Steps",
    "TaskLoop",
    "Wait",
    "connect_socket",
    "reading",
    "running",
    "writing",
]

#: What one read asks for when the core has no better size in mind.
READ_SIZE: Final = 256 << 10


class Wait(Enum):
    """What a step of a `Steps` generator waits for (a number instead: that many seconds,
    or a wake-up, whichever comes first)."""

    READABLE = "readable"
    WRITABLE = "writable"
    WOKEN = "woken"


#: A task's story, step by step: each yield is what it waits for next (see the module
#: docstring); it ends when the task is done.
Steps: TypeAlias = Generator["Wait | float", None, None]


class TaskLoop(Loop, Protocol):
    """A `Loop` whose binding runs `Steps` (anyio's tasks, gevent's greenlets)."""

    #: What a connection's reader calls after each read, before it waits again, if
    #: anything: trio's queued calls (`CallQueue.drain`), so that what the read set going
    #: leaves in this turn.
    after_read: Callable[[], object] | None

    def spawn(
        self, steps: Steps, sock: socket.socket, *, reader: bool = False
    ) -> Callable[[], object]:
        """Run ``steps`` until they end, each waiting as it says on ``sock``; return what
        wakes it (`Wait.WOKEN`, or early). ``reader``: a connection's `reading` (a binding
        may drive it from its loop's own readiness callback). The steps' generator is
        closed however the task ends (cancelled too), so that its stream ends."""
        ...

    def closing(self, sock: socket.socket) -> None:
        """``sock`` is about to close: nothing may wait on it once it has (trio and anyio
        say so with ``notify_closing``)."""
        ...


def _nothing() -> None:
    return None


class SocketStream:
    """Link ``link`` of ``engine`` over ``sock`` (see the module docstring)."""

    def __init__(
        self,
        engine: Connections,
        link: int,
        sock: socket.socket,
        closing: Callable[[socket.socket], object] | None = None,
    ) -> None:
        sock.setblocking(False)
        nodelay(sock)
        self.engine = engine
        self.link = link
        self.sock = sock
        #: What wakes the writer's and the reader's task (`TaskLoop.spawn` gives them).
        self.wake_writer: Callable[[], object] = _nothing
        self.wake_reader: Callable[[], object] = _nothing
        self._closing_hook = closing
        self._queue: deque[Bytes] = deque()
        self._size = 0
        self._paused = False  # the engine was told this link is over the mark
        self.reading: bool = True
        self._closing = False
        self.ended: bool = False
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
            self.wake_writer()
        if not self._paused and self._size > HIGH_WATER and self.link != ACCEPT_LATER:
            self._paused = True
            self.engine.pause_writing(self.link)

    def get_write_buffer_size(self) -> int:
        return self._size

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        if not self.reading:
            self.reading = True
            self.wake_reader()

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
        self.wake_reader()  # before the socket closes: a wake stops the waits on it
        self.wake_writer()
        self.sock.close()
        if self.link != ACCEPT_LATER:  # one never counted is not the engine's to forget
            self.engine.detach(self.link)


def reading(stream: SocketStream, after_read: Callable[[], object] | None = None) -> Steps:
    """The reader task of ``stream`` (see the module docstring); ``after_read``:
    `TaskLoop.after_read`."""
    try:
        while not stream.ended:
            if stream.reading:
                yield Wait.READABLE
                if stream.reading:
                    stream.read()
                    if after_read is not None:
                        after_read()
            else:
                yield Wait.WOKEN
    finally:
        stream.end()


def writing(stream: SocketStream) -> Steps:
    """The writer task of ``stream`` (see the module docstring)."""
    try:
        while not stream.ended:
            if stream.get_write_buffer_size():
                yield Wait.WRITABLE
                stream.flush()
            else:
                yield Wait.WOKEN
    finally:
        stream.end()


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


def running(calls: CallQueue) -> Steps:
    """The task that runs ``calls`` (trio's, whose ``wake`` must wake it): what is queued,
    then a turn for the loop's other tasks (a rest of 0) if more was queued meanwhile,
    else a wait to be woken."""
    while True:
        yield 0.0 if calls.run_queued() else Wait.WOKEN
