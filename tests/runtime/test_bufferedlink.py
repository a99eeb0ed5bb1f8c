"""The engine's large-object path: sliced writes with a backlog, reads into place.

A fake transport checks `Engine.act`'s bookkeeping (order, the mark, the backlog drained on
`resume_writing`, a close deferred until the backlog is out, readers blocked meanwhile).
Then real sockets on asyncio's loop and on uvloop: a worker core's object server sends a
stored value in parts, and a fetcher reads them through the binding's reader straight
into the object's buffer (the value it ends with is the buffer its allocator returned).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest
from dista_asyncio import AsyncioLoop

import dista_proto as dp
from dista_proto._fetcher import Fetcher
from dista_proto._links import Links
from dista_runtime._hosts.engine import Engine
from dista_runtime._net.streams import HIGH_WATER, LOW_WATER, SLICE, Link

MiB = 1 << 20


class FakeTransport:
    """Takes writes into a pretend buffer the test drains; pauses and resumes as asyncio."""

    def __init__(self, protocol: Link) -> None:
        self.protocol = protocol
        self.written = bytearray()
        self.buffered = 0
        self.paused = False
        self.closed = False
        self.reading = True

    def write(self, data: Any) -> None:
        assert not self.closed
        assert len(data) <= max(SLICE, 256 << 10) or isinstance(data, bytes)
        self.written += data
        self.buffered += len(data)
        if self.buffered > HIGH_WATER and not self.paused:
            self.paused = True
            self.protocol.pause_writing()

    def drain(self, n: int) -> None:
        self.buffered = max(0, self.buffered - n)
        if self.paused and self.buffered <= LOW_WATER:
            self.paused = False
            self.protocol.resume_writing()

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default  # no socket, no peer address: an in-memory peer

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


class PlainHost(Engine):
    """Only writes: these tests never read (nor feed its core)."""

    def __init__(self, loop: AsyncioLoop) -> None:
        super().__init__(loop, dp.Observer())


def _host() -> tuple[PlainHost, dict[int, FakeTransport]]:
    loop = asyncio.new_event_loop()
    host = PlainHost(AsyncioLoop(loop))
    transports = {}
    for link in (1, 2):
        transport = FakeTransport(Link(host, link))
        host.attach(link, transport)  # type: ignore[arg-type]
        transports[link] = transport
    loop.close()
    return host, transports


def test_large_buffers_go_in_slices_and_wait_in_a_backlog() -> None:
    host, transports = _host()
    slow = transports[1]
    value = random.Random(1).randbytes(20 * MiB)
    view = memoryview(value)
    buffers: list[dp.frame.Bytes] = [b"head-1", view[: 12 * MiB], b"head-2", view[12 * MiB :]]
    host.act([dp.Write(1, buffers)], source=2)
    assert HIGH_WATER < len(slow.written) <= HIGH_WATER + SLICE
    assert 1 in host.paused and not transports[2].reading  # the link feeding it waits
    host.act([dp.Write(1, [b"tail"])], source=-1)  # queued behind the backlog, in order
    host.act([dp.Close(1, "done")])
    assert not slow.closed  # not before the backlog is out
    while slow.buffered:
        slow.drain(MiB)
    expected = b"head-1" + value[: 12 * MiB] + b"head-2" + value[12 * MiB :] + b"tail"
    assert slow.written == expected
    assert slow.closed and 1 not in host.paused and transports[2].reading


def test_small_writes_are_joined_and_pass_straight_through() -> None:
    host, transports = _host()
    host.act([dp.Write(2, [b"a", b"b", b"c"])])
    host.act([dp.Write(2, [b"d"])])
    assert transports[2].written == b"abcd" and not host.paused


# -- real sockets -------------------------------------------------------------------------------


class ServerHost(Engine):
    """A worker core's object server, with a value in its store."""

    def __init__(self, loop: AsyncioLoop, value: bytes) -> None:
        core = dp.Worker(registry_hash=1, address=dp.Address("127.0.0.1", 1))
        core.store[7] = value
        super().__init__(loop, core)


class FetchCore:
    """A fetcher and its links, reading into place: a `dista_proto.Core` that only dials;
    ``done`` gets what it fetched."""

    def __init__(self, part: int, done: asyncio.Future[Any]) -> None:
        self.links = Links()
        self.allocated: list[bytearray] = []
        self.fetcher = Fetcher(self.links, part, self._allocate)
        self.done = done

    def _allocate(self, n: int) -> bytearray:
        self.allocated.append(bytearray(n))
        return self.allocated[-1]

    def connection_made(self, now: int) -> int:
        raise AssertionError("a fetcher listens for nobody")

    def receive_data(self, link: int, data: dp.frame.Bytes, now: int) -> None:
        raise AssertionError("read into place only")

    def get_buffer(self, link: int, sizehint: int = -1) -> memoryview:
        return self.links.get_buffer(link, sizehint)

    def buffer_updated(self, link: int, nbytes: int, now: int) -> None:
        events, error = self.links.buffer_updated(link, nbytes)
        assert error is None
        for fetched in self.fetcher.receive(link, events):
            self.done.set_result(fetched)

    def connected(self, link: int, now: int) -> None:
        self.links.connected(link)

    def connection_lost(self, link: int, now: int) -> None:
        for fetched in self.fetcher.lost(link, "lost"):
            self.done.set_result(fetched)

    def decisions(self) -> list[dp.Decision]:
        return self.links.decisions()

    def next_deadline(self) -> int | None:
        return None

    def on_timer(self, now: int) -> None:
        pass


class FetchHost(Engine):
    """A `FetchCore` on a loop."""

    def __init__(self, loop: AsyncioLoop, part: int) -> None:
        self.fetching = FetchCore(part, loop.loop.create_future())
        super().__init__(loop, self.fetching)
        self.done = self.fetching.done
        self.allocated = self.fetching.allocated

    def fetch(self, address: dp.Address) -> None:
        self.fetching.fetcher.request(7, address)
        self.transmit()

    def opened(self, link: int) -> None:
        self.fetching.connected(link, 0)
        self.transmit()


def _loops() -> list[Callable[[], asyncio.AbstractEventLoop]]:
    loops: list[Callable[[], asyncio.AbstractEventLoop]] = [asyncio.new_event_loop]
    try:
        import uvloop
    except ImportError:
        return loops
    return [*loops, uvloop.new_event_loop]


@pytest.mark.parametrize("new_loop", _loops(), ids=lambda f: f.__module__.split(".")[0])
@pytest.mark.parametrize(("size", "part"), [(40 * MiB, 8 * MiB), (3 * MiB, 64 * MiB)])
def test_an_object_crosses_a_real_socket_into_its_own_buffer(
    new_loop: Callable[[], asyncio.AbstractEventLoop], size: int, part: int
) -> None:
    value = random.Random(size).randbytes(size)

    async def main() -> Any:
        loop = AsyncioLoop(asyncio.get_running_loop())
        server = ServerHost(loop, value)
        listener = loop.listen(server, "127.0.0.1", 0)
        port = listener.address[1]
        client = FetchHost(loop, part)
        client.fetch(dp.Address("127.0.0.1", port))
        try:
            oid, got, why = await asyncio.wait_for(client.done, 60)
        finally:
            client.close_all()
            server.close_all()
            listener.close()
        return oid, got, why, client.allocated

    loop = new_loop()
    try:
        oid, got, why, allocated = loop.run_until_complete(main())
    finally:
        loop.close()
    assert (oid, why) == (7, "")
    assert got == value
    assert len(allocated) == 1  # one buffer, and the value is it (or a view of it)
    assert got is allocated[0] or got.obj is allocated[0]
