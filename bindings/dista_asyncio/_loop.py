"""`dista_runtime._net.contract.Loop` on an asyncio loop: its calls as they are, its servers and
connections as `Link`s that read into the engine's buffers.

With `asyncio.BufferedProtocol` the loop asks where to read (`get_buffer`), reads there,
and says how much it read (`buffer_updated`); uvloop and asyncio's selector loop both do it
with one ``recv_into``, into the buffer the core offers: a large object's own buffer, so
that its bytes are written once, by the read, and never copied in user space.
"""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Callable, Coroutine
from typing import Any

from dista_runtime.binding import (
    ACCEPT_LATER,
    HANDSHAKE_TIMEOUT_S,
    SHUTDOWN_TIMEOUT_S,
    UNATTACHED,
    AcceptErrors,
    Connections,
    Link,
    Tls,
    listen_socket,
    peer_of,
    socket_address,
    unix_path,
)

__all__ = ["AsyncioLoop", "new_event_loop"]

_NO_DEADLINE_S = 365 * 86400.0


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop: uvloop's when it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


class Reader(Link, asyncio.BufferedProtocol):
    __slots__ = ()


class _Listener:
    """``sock`` served for ``engine``: each connection accepted here and made a transport
    with ``connect_accepted_socket`` (in ``tls``, once its handshake is done: a peer that
    fails it never reaches the core).

    Not ``create_server``, nor ``sock_accept``: in 3.11 the first's ``Server.close`` races
    a connection accepted in the same turn (CPython gh-109564: its transport fails to
    attach, and its socket stays open), and a cancelled ``sock_accept`` may still accept
    one and drop it. Removing the reader here takes back an accept already queued too."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, sock: socket.socket, engine: Connections, tls: Tls
    ) -> None:
        self.address: tuple[str, int] = socket_address(sock)
        self._tls = tls
        sock.setblocking(False)
        self._loop = loop
        self._sock = sock
        self._engine = engine
        self._errors = AcceptErrors(engine, loop.call_later)
        self._rest: asyncio.TimerHandle | None = None
        self._reading = False
        self._unattached = 0  # accepted, their transports not made yet
        self._read()

    def _read(self) -> None:
        """Accept when the socket is readable, unless resting, closed or at the bound."""
        if self._reading or self._rest is not None or self._sock.fileno() < 0:
            return
        if self._unattached < self._most():
            self._loop.add_reader(self._sock, self._accept)
            self._reading = True

    def _most(self) -> int:
        return self._tls.most_pending if self._tls is not None else UNATTACHED

    def _unread(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._sock)
            self._reading = False

    def _accept(self) -> None:
        while self._unattached < self._most():
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as e:  # out of descriptors or memory: rest (logged once a second)
                rest = self._errors.failed(e)
                if rest:
                    self._unread()
                    self._rest = self._loop.call_later(rest, self._rested)
                    return
                continue
            conn.setblocking(False)
            self._unattached += 1
            task = self._loop.create_task(self._connect(conn))
            # In TLS, counted among the pending handshakes: the oldest is cancelled at a cap.
            ticket = self._tls.begin(peer_of(conn), task.cancel) if self._tls else 0
            task.add_done_callback(functools.partial(self._connected, conn, ticket))
        self._unread()  # until some of them are attached (`_connected`)

    def _rested(self) -> None:
        self._rest = None
        self._read()

    def _connected(self, conn: socket.socket, ticket: int, task: asyncio.Task[None]) -> None:
        self._unattached -= 1
        if self._tls is not None:
            self._tls.settle(ticket)
        if task.cancelled():  # evicted, or its loop closing: ``conn`` may still be open
            conn.close()
        self._read()

    async def _connect(self, conn: socket.socket) -> None:
        engine, secure = self._engine, self._tls
        tls: dict[str, Any] = {}
        if secure is not None:
            # 0 is no deadline: asyncio has no such value (None is its 60 s), a year is one.
            timeout = secure.timeout or _NO_DEADLINE_S
            tls = {"ssl": secure.context, "ssl_handshake_timeout": timeout}
            tls["ssl_shutdown_timeout"] = SHUTDOWN_TIMEOUT_S
        peer = peer_of(conn) if secure else None  # named in the log if its handshake fails
        try:
            await self._loop.connect_accepted_socket(
                lambda: Reader(engine, ACCEPT_LATER, secure), conn, **tls
            )
        except OSError as e:  # ssl.SSLError, a reset, the handshake's timeout
            conn.close()  # a transport that was made has closed it already
            if secure is not None:
                secure.failed(ACCEPT_LATER, peer, e)

    def close(self) -> None:
        if self._rest is not None:
            self._rest.cancel()
            self._rest = None
        self._unread()
        self._sock.close()


class AsyncioLoop:
    """The runtime's view of ``loop`` (see `dista_runtime._net.contract.Loop`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # The loop's own bound methods, not methods calling them: the hot path pays no call.
        self.call_soon: Callable[..., asyncio.Handle] = loop.call_soon
        self.call_soon_threadsafe: Callable[..., asyncio.Handle] = loop.call_soon_threadsafe
        self.call_later: Callable[..., asyncio.TimerHandle] = loop.call_later

    def create_task(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        return self.loop.create_task(coro)

    def current_task(self) -> object:
        return asyncio.current_task(self.loop)

    def listen(
        self, engine: Connections, host: str, port: int, sock: Any = None, tls: Tls = None
    ) -> _Listener:
        return _Listener(self.loop, sock or listen_socket(host, port), engine, tls)

    def dial(
        self, engine: Connections, link: int, host: str, port: int, timeout: float, tls: Tls = None
    ) -> None:
        self.loop.create_task(self._dial(engine, link, host, port, timeout, tls))

    async def _dial(
        self, engine: Connections, link: int, host: str, port: int, timeout: float, secure: Tls
    ) -> None:
        path = unix_path(host)
        factory: Callable[[], Reader] = lambda: Reader(engine, link, secure)
        tls: dict[str, Any] = {}
        if secure is not None:  # identity is the certificate's role, not a host name
            tls = {
                "ssl": secure.context,
                "server_hostname": "",
                "ssl_handshake_timeout": HANDSHAKE_TIMEOUT_S,
            }
        try:
            if path is not None:
                connecting = self.loop.create_unix_connection(factory, path, **tls)
            else:
                connecting = self.loop.create_connection(factory, host, port, **tls)
            await asyncio.wait_for(connecting, timeout)
        except (OSError, TimeoutError, OverflowError) as e:  # Overflow: a port over 65535
            engine.dialed(link, str(e) or type(e).__name__)
            return
        engine.dialed(link, "")
