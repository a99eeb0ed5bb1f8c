"""The head over asyncio: a server whose every connection is a link of the `Head` core.

Links read into place (`BufferedLinkProtocol`): small frames into each connection's reused
buffer, a frame of 1 MiB or more (a large argument) straight into one buffer from
`allocate`, which the head then forwards to a worker as it lies.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time

import dista_proto as dp
from dista_runtime._memory import allocate, ready

from ._host import Host, LinkBase

__all__ = ["HeadServer", "serve_head"]


class HeadServer(Host):
    def __init__(self, loop: asyncio.AbstractEventLoop, head: dp.Head) -> None:
        super().__init__(loop)
        self.head = head
        self.server: asyncio.Server | None = None

    def protocol(self) -> LinkBase:
        return self.link_protocol(self.head.connection_made(time.time_ns()))

    def get_buffer(self, link: int, sizehint: int) -> memoryview:
        return ready(self.head.get_buffer(link, sizehint))

    def updated(self, link: int, nbytes: int) -> list[dp.Decision]:
        head = self.head
        head.buffer_updated(link, nbytes, time.time_ns())
        return head.decisions()

    def lost(self, link: int) -> list[dp.Decision]:
        self.head.connection_lost(link, time.time_ns())
        return self.head.decisions()

    def opened(self, link: int) -> list[dp.Decision]:
        return []  # the head opens no connections

    def head_stop(self, why: str) -> None:
        self.head.stop(why, time.time_ns())
        self.act(self.head.decisions())

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None
        name = self.server.sockets[0].getsockname()
        if isinstance(name, str):  # a Unix socket
            return f"unix:{name}", 0
        host, port = name[:2]
        return host, port

    async def wait_closed(self) -> str:
        """Until the head exits (stopped by an observer, or its last local driver left)."""
        reason: str = await self.exited
        assert self.server is not None
        self.server.close()
        # Let the stop and error frames flush before the connections drop.
        for _ in range(100):
            if not any(t.get_write_buffer_size() for t in self.transports.values()):
                break
            await asyncio.sleep(0.01)
        self.close_all()
        return reason


async def serve_head(
    host: str = "127.0.0.1",
    port: int = 7420,
    *,
    sock: socket.socket | None = None,
    local: bool = False,
    worker_slots: int = 2,
    prefetch: int = 32,
    max_retries: int = 3,
) -> HeadServer:
    """Start a head listening on ``host:port`` (or an already bound ``sock``).

    ``local`` makes it stop itself and its workers when its last driver disconnects.
    ``worker_slots`` is how many tasks each worker gets at once: more than one hides the
    round trip between a result and the next task. ``prefetch`` is how many more a worker
    may get when they are known to be short (their recent runs took at most 0.5 ms), so that
    a stream of tiny tasks flows in batches instead of one round trip each.
    """
    loop = asyncio.get_running_loop()
    rng = random.SystemRandom()
    head = dp.Head(
        epoch=rng.getrandbits(63),
        first_number=rng.randrange(1, 1 << 24),
        max_retries=max_retries,
        worker_slots=worker_slots,
        prefetch=prefetch,
        exit_without_drivers=local,
        allocate=allocate,
    )
    server = HeadServer(loop, head)
    if sock is not None:
        server.server = await loop.create_server(server.protocol, sock=sock)
    else:
        server.server = await loop.create_server(server.protocol, host, port, reuse_address=True)
    return server
