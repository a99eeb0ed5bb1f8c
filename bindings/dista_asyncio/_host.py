"""Moving bytes between asyncio transports and a sans-IO core: the whole binding's engine.

A `Host` maps the core's link numbers to transports and carries out its decisions: write
buffers (small frames joined into one write, large payloads passed as they lie), open a
connection, close one, exit. One `LinkProtocol` per connection feeds bytes back in.

Flow control: every transport's write buffer has a high-water mark (`HIGH_WATER`). When a
peer reads slowly and its buffer passes the mark, the link whose input produced more
writes to it stops being read until the slow peer drains below the low-water mark, so the
memory one slow peer can pin is bounded by the mark plus one read (`READ_SIZE`) of output
per link feeding it, instead of growing with whatever the others send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Final, cast

import dista_proto as dp
from dista_proto.frame import Bytes

__all__ = ["HIGH_WATER", "LOW_WATER", "Host", "LinkProtocol"]

HIGH_WATER: Final = 4 << 20
LOW_WATER: Final = 1 << 20
_JOIN_BELOW: Final = 256 << 10  # buffers smaller than this are joined into one write


class LinkProtocol(asyncio.Protocol):
    __slots__ = ("host", "link", "transport")

    def __init__(self, host: Host, link: int) -> None:
        self.host = host
        self.link = link
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=HIGH_WATER, low=LOW_WATER)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                import socket

                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self.host.attach(self.link, transport)

    def data_received(self, data: bytes) -> None:
        self.host.on_data(self.link, data)

    def eof_received(self) -> bool:
        return False  # close our side too: a peer that stops sending is gone

    def connection_lost(self, exc: Exception | None) -> None:
        self.host.detach(self.link)

    def pause_writing(self) -> None:
        self.host.paused.add(self.link)

    def resume_writing(self) -> None:
        self.host.resume(self.link)


class Host:
    """The transports of one core; subclasses say how to feed the core."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transports: dict[int, asyncio.Transport] = {}
        self.paused: set[int] = set()
        self._blocked: dict[int, set[int]] = {}  # slow link -> links not read because of it
        self.exited = loop.create_future()

    # -- the core's side (subclasses) -------------------------------------------------------

    def feed(self, link: int, data: bytes) -> list[dp.Decision]:
        raise NotImplementedError

    def lost(self, link: int) -> list[dp.Decision]:
        raise NotImplementedError

    def opened(self, link: int) -> list[dp.Decision]:
        """A connection asked for with `Connect` is up."""
        raise NotImplementedError

    def other(self, decision: dp.Decision) -> None:
        """A decision that is not I/O (a task to run, a result): the subclass's business."""

    # -- transports -----------------------------------------------------------------------

    def attach(self, link: int, transport: asyncio.Transport) -> None:
        self.transports[link] = transport

    def detach(self, link: int) -> None:
        if self.transports.pop(link, None) is None:
            return
        self.resume(link)
        self.act(self.lost(link))

    def on_data(self, link: int, data: bytes) -> None:
        decisions = self.feed(link, data)
        if decisions:
            self.act(decisions, link)

    def resume(self, link: int) -> None:
        self.paused.discard(link)
        for reader in self._blocked.pop(link, ()):
            transport = self.transports.get(reader)
            if transport is not None and not transport.is_closing():
                transport.resume_reading()

    def act(self, decisions: Iterable[dp.Decision], source: int = -1) -> None:
        for d in decisions:
            if isinstance(d, dp.Write):
                transport = self.transports.get(d.link)
                if transport is None or transport.is_closing():
                    continue
                write(transport, d.buffers)
                if d.link in self.paused and source >= 0:
                    self._block(source, d.link)
            elif isinstance(d, dp.Close):
                transport = self.transports.get(d.link)
                if transport is not None:
                    transport.close()  # flushes what is buffered first
            elif isinstance(d, dp.Connect):
                self.loop.create_task(self._connect(d.link, d.address))
            elif isinstance(d, dp.Exit):
                if not self.exited.done():
                    self.exited.set_result(d.reason)
            else:
                self.other(d)

    def _block(self, reader: int, slow: int) -> None:
        transport = self.transports.get(reader)
        if transport is None or transport.is_closing():
            return
        readers = self._blocked.setdefault(slow, set())
        if reader not in readers:
            readers.add(reader)
            transport.pause_reading()

    async def _connect(self, link: int, address: dp.Address) -> None:
        try:
            await self.loop.create_connection(
                lambda: LinkProtocol(self, link), address.host, address.port
            )
        except OSError:
            self.act(self.lost(link))
            return
        self.act(self.opened(link))

    def close_all(self) -> None:
        for transport in list(self.transports.values()):
            transport.close()


def write(transport: asyncio.Transport, buffers: list[Bytes]) -> None:
    if len(buffers) == 1:
        transport.write(buffers[0])
        return
    small: list[Bytes] = []
    for buffer in buffers:
        if len(buffer) < _JOIN_BELOW:
            small.append(buffer)
            continue
        if small:
            transport.write(b"".join(small))
            small = []
        transport.write(buffer)
    if small:
        transport.write(b"".join(small) if len(small) > 1 else small[0])
