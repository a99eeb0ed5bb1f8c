"""The asyncio side of `dista_runtime.engine`: transports as its streams, asyncio's
protocols as its readers, `create_connection` as its connect and a future as its exit.

The engine (writes, backlogs, slow-reader pausing, refusals) is the runtime's; what is here
is only what asyncio decides.
"""

from __future__ import annotations

import asyncio
from typing import cast

import dista_proto as dp
from dista_runtime.engine import HIGH_WATER, LOW_WATER, SLICE, Engine

__all__ = ["HIGH_WATER", "LOW_WATER", "SLICE", "Host", "LinkBase"]


class LinkBase(asyncio.BaseProtocol):
    """What every link's protocol does but reading: attach, flow control, loss."""

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

    def eof_received(self) -> bool:
        return False  # close our side too: a peer that stops sending is gone

    def connection_lost(self, exc: Exception | None) -> None:
        self.host.detach(self.link)

    def pause_writing(self) -> None:
        self.host.paused.add(self.link)

    def resume_writing(self) -> None:
        self.host.resume(self.link)


class Host(Engine):
    """An engine on an asyncio loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.exited: asyncio.Future[str] = loop.create_future()

    def link_protocol(self, link: int) -> LinkBase:
        """The protocol for a new connection of ``link``: read into place."""
        from ._bufferedlink import BufferedLinkProtocol

        return BufferedLinkProtocol(self, link)

    def connect(self, link: int, address: dp.Address) -> None:
        self.loop.create_task(self._connect(link, address))

    def exit(self, reason: str) -> None:
        if not self.exited.done():
            self.exited.set_result(reason)

    async def _connect(self, link: int, address: dp.Address) -> None:
        try:
            await self.loop.create_connection(
                lambda: self.link_protocol(link), address.host, address.port
            )
        except OSError:
            self.act(self.lost(link))
            return
        self.act(self.opened(link))
