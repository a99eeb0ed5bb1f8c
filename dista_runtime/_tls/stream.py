"""`SocketStream` with TLS, and how a binding whose loop runs tasks (anyio, gevent) serves
its sockets, plain or in TLS: `serve_socket` for each connection, `SocketListener` for
`Loop.listen`.

TLS runs in memory (`ssl.SSLObject` over two `ssl.MemoryBIO`s), between the socket and the
core, so that the bindings' reader and writer tasks stay what they are: they wait for the
socket as before and call `read` and `flush`. A wrapped socket (`SSLSocket`) would need
each binding to wait for "readable" or "writable" as the handshake asks, and gevent's and
trio's sockets are not the standard library's. The cost is one copy each way (the BIOs),
small against the cipher.

A read takes what the socket has into a scratch buffer, feeds it to TLS, and decrypts
straight into the buffer the core offers, until TLS has nothing whole left. Writes before
the handshake ends (a dialer's hello) wait for it. The handshake's end hands the peer's
certificate to the connection's `Secure` (``secured``: the engine's
`dista_runtime._tls.handshake.Handshakes`), which checks the role before any frame is read;
a failed one is told to it too (``failed``), never to the engine.

A connection that came in takes its link (``engine.accept()``, the core's
``connection_made``) and is attached only once its handshake is done, as asyncio's TLS
transports are made: a peer that fails it, or does not finish it within its side's
``timeout``, is closed without the core ever hearing of it. Its listener counts it among
the pending handshakes (``Secure.begin``: past a cap the oldest is aborted for the new one)
and holds at most `dista_runtime._net.limits.UNATTACHED` at once (it stops accepting until
one is settled). A dialed one is attached at once (its link is the engine's already).

Plaintext TLS still holds when the engine pauses reading is decrypted on the loop's next
turn after it resumes, since the socket may never become readable again for it. A read
fills the whole view the core offers before telling it, as asyncio's TLS does, rather than
once per 16 KiB record (`benchmarks/results/tls.md`: 0.50 to 0.38 s of a driver's CPU per
256 MiB on gevent).
"""

from __future__ import annotations

import functools
import socket
import ssl
from collections.abc import Callable
from typing import Any

from .._net.address import socket_address
from .._net.admission import AcceptErrors
from .._net.contract import Connections, Secure, Timer
from .._net.limits import UNATTACHED
from .._net.sockets import (
    READ_SIZE,
    SocketStream,
    Steps,
    TaskLoop,
    Wait,
    reading,
    writing,
)
from .._net.streams import ACCEPT_LATER, peer_of

__all__ = ["SocketListener", "TLSStream", "serve_socket"]


class TLSStream(SocketStream):
    """Link ``link`` of ``engine`` over ``sock`` (`ACCEPT_LATER`: one that came in, counted
    once its handshake is done), in TLS as ``tls`` says, on ``loop`` (see the module
    docstring). ``settled`` is called once the handshake is over, whichever way."""

    def __init__(
        self,
        engine: Connections,
        link: int,
        sock: socket.socket,
        closing: Callable[[socket.socket], object] | None = None,
        *,
        tls: Secure,
        loop: TaskLoop,
        settled: Callable[[], object] | None = None,
    ) -> None:
        super().__init__(engine, link, sock, closing)
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._secure = tls
        server_side = tls.server_side
        self._tls = tls.context.wrap_bio(self._incoming, self._outgoing, server_side=server_side)
        self._call_soon = loop.call_soon
        self._scratch = bytearray(READ_SIZE)
        self._early: list[bytes] = []
        self._settled = settled
        self._deadline: Timer | None = None
        self.handshaken = False
        if link == ACCEPT_LATER and tls.timeout:  # not the core's yet: nothing else bounds it
            self._deadline = loop.call_later(tls.timeout, self._too_slow)
        if not server_side:  # a dialer speaks first, once the binding has attached us
            loop.call_soon(self._handshake)

    # -- the engine's side -------------------------------------------------------------------

    def write(self, data: Any) -> None:
        if self._closing or self.ended:
            return
        if not self.handshaken:
            self._early.append(bytes(data))
            return
        view = memoryview(data).cast("B")
        while view:
            view = view[self._tls.write(view) :]
        self._send_tls()

    def resume_reading(self) -> None:
        held = not self.reading and (self._tls.pending() > 0 or self._incoming.pending > 0)
        super().resume_reading()
        if held:
            self._call_soon(self._decrypt)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self._tls if self.handshaken else default
        if name == "peercert":
            return self._tls.getpeercert() if self.handshaken else default
        return super().get_extra_info(name, default)

    # -- the binding's tasks -----------------------------------------------------------------

    def read(self) -> bool:
        if self.ended:
            return False
        try:
            n = self.sock.recv_into(self._scratch)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            n = 0
        if not n:
            self.end()
            return False
        self._incoming.write(memoryview(self._scratch)[:n])
        self._decrypt()
        return not self.ended

    # -- TLS ---------------------------------------------------------------------------------

    def _decrypt(self) -> None:
        if self.ended or (not self.handshaken and not self._handshake()):
            return
        engine, link = self.engine, self.link
        tls: Any = self._tls  # its read into a buffer gives a count (typeshed says bytes)
        ended = False
        while self.reading and not ended:
            # Fill the whole view the core offers, record after record (16 KiB each), and
            # tell the core once: a large object lands in about 60 calls a MiB fewer.
            view = engine.get_buffer(link, READ_SIZE)
            size, filled = len(view), 0
            while filled < size:
                try:
                    got: int = tls.read(size - filled, view[filled:])
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLError:  # the peer closed TLS, or sent garbage under it
                    got = 0
                if not got:
                    ended = True
                    break
                filled += got
            if filled:
                engine.on_updated(link, filled)
            if ended or self.ended:
                self.end()
                return
            if filled < size:
                break  # nothing whole left: wait for the socket
        self._send_tls()  # what TLS wrote while reading (session tickets, key updates)

    def _handshake(self) -> bool:
        if self._closing or self.ended:
            return False
        try:
            self._tls.do_handshake()
        except ssl.SSLWantReadError:
            self._send_tls()
            return False
        except ssl.SSLError as e:
            self._send_tls()  # the alert, so that the peer learns why
            self._fail(e)
            self.close()
            return False
        self.handshaken = True
        self._over()
        self._send_tls()
        early, self._early = self._early, []
        for data in early:
            self.write(data)
        if self.link == ACCEPT_LATER:  # it came in: the core hears of it now
            self.link = self.engine.accept()
            self.engine.attach(self.link, self)
        self._secure.secured(self.link, self)
        return not (self._closing or self.ended)

    def _fail(self, why: str | BaseException) -> None:
        self._over()
        self._secure.failed(self.link, self._peer, why)

    def _too_slow(self) -> None:
        if not (self.handshaken or self.ended):
            self._fail(f"no handshake within {self._secure.timeout:g} s")
            self.abort()

    def _over(self) -> None:
        """The handshake is over (done, failed, or its connection gone): once."""
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        settled, self._settled = self._settled, None
        if settled is not None:
            settled()

    def end(self) -> None:
        if not self.ended:
            self._over()
        super().end()

    def _send_tls(self) -> None:
        if self._outgoing.pending:
            SocketStream.write(self, self._outgoing.read())


def serve_socket(
    engine: Connections,
    link: int,
    sock: socket.socket,
    tls: Secure | None,
    loop: TaskLoop,
    settled: Callable[[], object] | None = None,
) -> SocketStream:
    """Serve ``sock`` as ``link`` of ``engine`` on ``loop``: its stream (in TLS when the
    listener or dial has it) and its reader and writer tasks. A connection that came in
    (``link`` is `ACCEPT_LATER`) takes its link now if plain, once its handshake is done in
    TLS (``settled`` is told when it is over, whichever way); the stream is attached then."""
    stream: SocketStream
    if tls is None:
        if link == ACCEPT_LATER:
            link = engine.accept()
        stream = SocketStream(engine, link, sock, loop.closing)
    else:
        stream = TLSStream(engine, link, sock, loop.closing, tls=tls, loop=loop, settled=settled)
    if stream.link != ACCEPT_LATER:
        engine.attach(stream.link, stream)
    stream.wake_writer = loop.spawn(writing(stream), sock)
    stream.wake_reader = loop.spawn(reading(stream, loop.after_read), sock, reader=True)
    return stream


class SocketListener:
    """``sock`` (listening) served for ``engine`` on ``loop`` (`Loop.listen` for a binding
    that runs tasks): one task accepts each connection when the socket is readable, and
    `serve_socket` serves it. Out of descriptors or memory, it rests (`AcceptErrors`);
    with `Secure.most_pending` connections in their TLS handshake, it waits until one is
    settled."""

    def __init__(
        self, loop: TaskLoop, engine: Connections, sock: socket.socket, tls: Secure | None
    ) -> None:
        sock.setblocking(False)
        self.address: tuple[str, int] = socket_address(sock)
        self._loop, self._engine, self._sock, self._tls = loop, engine, sock, tls
        self._errors = AcceptErrors(engine, loop.call_later)
        self._unattached = 0
        self._wake = loop.spawn(self._accepting(), sock)

    @property
    def _most(self) -> int:
        """How many accepted connections may be in their handshake at once (read each time:
        the engine's limits may come after the listener)."""
        return self._tls.most_pending if self._tls is not None else UNATTACHED

    def _accepting(self) -> Steps:
        while self._sock.fileno() >= 0:  # until `close`
            if self._unattached >= self._most:
                yield Wait.WOKEN
                continue
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                yield Wait.READABLE
                continue
            except OSError as e:  # out of descriptors, say: rest rather than spin
                if rest := self._errors.failed(e):  # logged once a second
                    yield rest
                continue
            tls = self._tls
            if tls is None:
                serve_socket(self._engine, ACCEPT_LATER, conn, None, self._loop)
                continue
            self._unattached += 1
            # Counted among the pending handshakes (at a cap, the oldest is aborted).
            held: list[SocketStream] = []
            ticket = tls.begin(peer_of(conn), functools.partial(_abort_first, held))
            settled = functools.partial(self._settled, ticket)
            held.append(serve_socket(self._engine, ACCEPT_LATER, conn, tls, self._loop, settled))

    def _settled(self, ticket: int) -> None:
        if self._tls is not None:
            self._tls.settle(ticket)
        self._unattached -= 1
        if self._unattached == self._most - 1:
            self._wake()

    def close(self) -> None:
        if self._sock.fileno() < 0:
            return
        self._loop.closing(self._sock)
        self._wake()  # before the socket closes: a wake stops the wait on it
        self._sock.close()


def _abort_first(held: list[SocketStream]) -> None:
    """Abort the stream in ``held`` (an evicted handshake's), if it was made yet."""
    if held:
        held[0].abort()
