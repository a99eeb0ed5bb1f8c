"""One connection as the runtime writes it: the `Link` that reads a protocol-style
connection into an engine (asyncio's `BufferedProtocol`, the in-memory link), how buffers
are written to a `dista_runtime._net.contract.Stream`, and how a peer is named.

Flow control: every stream's write buffer has a high-water mark (`HIGH_WATER`). When a
peer reads slowly and its buffer passes the mark, the engine stops reading the link whose
input produced more writes to it, until the slow peer drains below `LOW_WATER`.

Large buffers are not handed to a stream whole (`write`): they go in slices of `SLICE`
while it is under the mark, and the rest waits, as views, until it asks for more.
"""

from __future__ import annotations

import socket
from collections import deque
from typing import Any, Final

from dista_proto.frame import Bytes

from .contract import Connections, Secure, Stream

__all__ = [
    "ACCEPT_LATER",
    "HIGH_WATER",
    "LOW_WATER",
    "PEER_LABEL",
    "SLICE",
    "Link",
    "nodelay",
    "peer_ip",
    "peer_name",
    "peer_of",
    "write",
]

HIGH_WATER: Final = 4 << 20
LOW_WATER: Final = 1 << 20
_JOIN_BELOW: Final = 256 << 10  # buffers smaller than this are joined into one write
#: Large buffers are handed to a transport this much at a time, while it is under HIGH_WATER.
SLICE: Final = 1 << 20
#: A stream's extra info: how to name its peer in a log line, when not by its address.
PEER_LABEL: Final = "dista_peer_label"
#: A `Link` made for a listener's connection before it has a link number: it takes one
#: from ``engine.accept()`` when the connection is made (after a TLS handshake).
ACCEPT_LATER: Final = -1


class Link:
    """A connection's reader, for a binding whose connections call back as asyncio's
    protocols do (asyncio's `BufferedProtocol`, `dista_runtime._net.memlink`): it attaches the
    connection to ``engine`` as ``link``, reads into the place the core offers, passes on
    write pressure and the end. With ``tls``, the connection is told to it once attached
    (a TLS transport is made only once its handshake is done)."""

    __slots__ = ("engine", "link", "tls", "transport")

    def __init__(self, engine: Connections, link: int, tls: Secure | None = None) -> None:
        self.engine: Connections = engine
        self.link: int = link
        self.tls: Secure | None = tls
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        limits = getattr(transport, "set_write_buffer_limits", None)
        if limits is not None:
            limits(high=HIGH_WATER, low=LOW_WATER)
        nodelay(transport.get_extra_info("socket"))
        if self.link == ACCEPT_LATER:
            # A TLS listener's connection counts once its handshake is done: one that
            # fails it never reaches the core (asyncio tells its protocol nothing then).
            self.link = self.engine.accept()
        self.engine.attach(self.link, transport)
        if self.tls is not None:
            self.tls.secured(self.link, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.engine.get_buffer(self.link, sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.engine.on_updated(self.link, nbytes)

    def eof_received(self) -> bool:
        return False  # close our side too: a peer that stops sending is gone

    def connection_lost(self, exc: Exception | None) -> None:
        self.engine.detach(self.link)

    def pause_writing(self) -> None:
        self.engine.pause_writing(self.link)

    def resume_writing(self) -> None:
        self.engine.resume_writing(self.link)


def nodelay(sock: Any) -> None:
    """Small frames go at once: a task's result should not wait for Nagle's timer."""
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


def peer_ip(peername: Any) -> str:
    """The host a peer connects from: its IP address, or 127.0.0.1 for a Unix-socket or
    in-memory link (a process on this machine)."""
    if isinstance(peername, tuple) and peername and isinstance(peername[0], str):
        return peername[0]
    return "127.0.0.1"


def peer_of(sock: Any) -> Any:
    """``sock``'s peer address, or None once it is gone (a reset before it was asked)."""
    try:
        return sock.getpeername()
    except OSError:
        return None


def peer_name(peername: Any) -> str:
    """A transport's ``peername`` as a person reads it: ``host:port``, or what there is."""
    if isinstance(peername, tuple) and len(peername) >= 2:
        host, port = peername[0], peername[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    if isinstance(peername, bytes):
        peername = peername.decode(errors="replace")
    if isinstance(peername, str):
        return f"unix:{peername}" if peername else "(a local socket)"
    return "(unknown address)"  # a socket gone before it was asked


def write(transport: Stream, buffers: list[Bytes]) -> deque[Bytes] | None:
    """Write ``buffers`` in order, small ones joined, large ones in slices while the
    transport is under the mark; what it can't take yet (as views, in order), or None."""
    if len(buffers) == 1 and len(buffers[0]) <= SLICE:
        transport.write(buffers[0])
        return None
    small: list[Bytes] = []
    for i, buffer in enumerate(buffers):
        if len(buffer) < _JOIN_BELOW:
            small.append(buffer)
            continue
        if small:
            transport.write(b"".join(small) if len(small) > 1 else small[0])
            small = []
        size = len(buffer)
        if size <= SLICE and transport.get_write_buffer_size() <= HIGH_WATER:
            transport.write(buffer)
            continue
        view = memoryview(buffer)
        pos = 0
        while pos < size:
            if transport.get_write_buffer_size() > HIGH_WATER:
                rest: deque[Bytes] = deque(buffers[i + 1 :])
                rest.appendleft(view[pos:] if pos else buffer)
                return rest
            transport.write(view[pos : pos + SLICE])
            pos += SLICE
    if small:
        transport.write(b"".join(small) if len(small) > 1 else small[0])
    return None
