"""`dista_runtime.loop.Loop` on an asyncio loop: its calls as they are, its servers and
connections as `Link`s that read into the engine's buffers.

With `asyncio.BufferedProtocol` the loop asks where to read (`get_buffer`), reads there,
and says how much it read (`buffer_updated`); uvloop and asyncio's selector loop both do it
with one ``recv_into``, into the buffer the core offers: a large object's own buffer, so
that its bytes are written once, by the read, and never copied in user space.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

from dista_runtime.binding import (
    ACCEPT_LATER,
    HANDSHAKE_TIMEOUT_S,
    AcceptErrors,
    Connections,
    Link,
    listen_socket,
    socket_address,
    unix_path,
)

__all__ = ["AsyncioLoop", "new_event_loop"]


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
    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, engine: Connections):
        self.address = socket_address(sock)
        self._sock = sock
        self._closed = False
        _quiet_accept_errors(loop, engine)
        tls = engine.tls
        if tls is None:
            serving = loop.create_server(lambda: Reader(engine, engine.accept()), sock=sock)
        else:
            # A link once the handshake is done (`ACCEPT_LATER`): a peer that fails it
            # never reaches the core. (asyncio and uvloop drop it without a word; loop.
            # start_tls would let us log it, but uvloop may read the ClientHello before
            # it takes over, and the handshake then hangs.)
            serving = loop.create_server(
                lambda: Reader(engine, ACCEPT_LATER),
                sock=sock,
                ssl=tls.server,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S,
            )
        self._server = loop.create_task(serving)
        self._server.add_done_callback(self._served)

    def _served(self, _: object) -> None:
        if self._closed:
            self.close()  # closed before it served

    def close(self) -> None:
        self._closed = True
        server = self._server
        if not server.done():
            return  # closed once it serves
        if server.cancelled() or server.exception() is not None:
            self._sock.close()
        else:
            server.result().close()


#: What asyncio's listener says when ``accept`` fails for want of descriptors or memory.
_ACCEPT_FAILED = "socket.accept() out of system resource"


def _quiet_accept_errors(loop: asyncio.AbstractEventLoop, engine: Connections) -> None:
    """Log ``loop``'s failed accepts once a second with a count, as the other bindings do.

    asyncio rests its listener a second after one, but (3.11) logs a six-line traceback for
    each of up to 100 accepts a turn and keeps a retry timer for each: a head past
    ``ulimit -n`` wrote 13,735 lines in 5 s. Other exceptions go to the handler there was."""
    errors = AcceptErrors(engine, loop.call_later)
    previous = loop.get_exception_handler()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if context.get("message") == _ACCEPT_FAILED and isinstance(error, OSError):
            errors.failed(error)
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


class AsyncioLoop:
    """The runtime's view of ``loop`` (see `dista_runtime.loop.Loop`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.call_soon = loop.call_soon
        self.call_soon_threadsafe = loop.call_soon_threadsafe
        self.call_later = loop.call_later
        self.create_task = loop.create_task

    def current_task(self) -> object:
        return asyncio.current_task(self.loop)

    def listen(self, engine: Connections, host: str, port: int, sock: Any = None) -> _Listener:
        return _Listener(self.loop, sock or listen_socket(host, port), engine)

    def dial(self, engine: Connections, link: int, host: str, port: int, timeout: float) -> None:
        self.loop.create_task(self._dial(engine, link, host, port, timeout))

    async def _dial(
        self, engine: Connections, link: int, host: str, port: int, timeout: float
    ) -> None:
        path = unix_path(host)
        factory: Callable[[], Reader] = lambda: Reader(engine, link)
        tls: dict[str, Any] = {}
        if engine.tls is not None:  # identity is the certificate's role, not a host name
            tls = {
                "ssl": engine.tls.client,
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
