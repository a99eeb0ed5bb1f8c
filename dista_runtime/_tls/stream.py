"""`SocketStream` with TLS, for bindings whose loops run tasks (anyio, gevent).

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
Plaintext TLS still holds when the engine pauses reading is decrypted on the loop's next
turn after it resumes, since the socket may never become readable again for it. A read
fills the whole view the core offers before telling it, as asyncio's TLS does, rather than
once per 16 KiB record (`benchmarks/results/tls.md`: 0.50 to 0.38 s of a driver's CPU per
256 MiB on gevent).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from typing import Any

from .._net.contract import Connections, Secure
from .._net.sockets import READ_SIZE, SocketStream

__all__ = ["TLSStream", "socket_stream"]


class TLSStream(SocketStream):
    """Link ``link`` of ``engine`` over ``sock``, in TLS as ``tls`` says (see the module
    docstring); ``call_soon`` is its loop's."""

    def __init__(
        self,
        engine: Connections,
        link: int,
        sock: socket.socket,
        wake_writer: Callable[[], object],
        wake_reader: Callable[[], object],
        closing: Callable[[socket.socket], object] | None = None,
        *,
        tls: Secure,
        call_soon: Callable[..., object],
    ) -> None:
        super().__init__(engine, link, sock, wake_writer, wake_reader, closing)
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._secure = tls
        server_side = tls.server_side
        self._tls = tls.context.wrap_bio(self._incoming, self._outgoing, server_side=server_side)
        self._call_soon = call_soon
        self._scratch = bytearray(READ_SIZE)
        self._early: list[bytes] = []
        self.handshaken = False
        if not server_side:  # a dialer speaks first, once the binding has attached us
            call_soon(self._handshake)

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
            self._secure.failed(self.link, self._peer, e.reason or str(e))
            self.close()
            return False
        self.handshaken = True
        self._send_tls()
        early, self._early = self._early, []
        for data in early:
            self.write(data)
        self._secure.secured(self.link, self)
        return not (self._closing or self.ended)

    def _send_tls(self) -> None:
        if self._outgoing.pending:
            SocketStream.write(self, self._outgoing.read())


def socket_stream(
    engine: Connections,
    link: int,
    sock: socket.socket,
    wake_writer: Callable[[], object],
    wake_reader: Callable[[], object],
    closing: Callable[[socket.socket], object] | None = None,
    *,
    tls: Secure | None,
    call_soon: Callable[..., object],
) -> SocketStream:
    """The stream for ``sock``: in TLS when the listener or dial has it (``tls``, which
    says which side), else plain. A TLS dialer's handshake starts on the loop's next turn
    (``call_soon``), once the binding has attached the stream."""
    if tls is None:
        return SocketStream(engine, link, sock, wake_writer, wake_reader, closing)
    return TLSStream(
        engine, link, sock, wake_writer, wake_reader, closing, tls=tls, call_soon=call_soon
    )
