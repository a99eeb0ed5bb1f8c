"""`Engine.close_all`: every connection closes, a stuck one within `CLOSE_GRACE_S`, and
``drained`` says when none is left (what ends a loop waits for it)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
from dista_asyncio._loop import AsyncioLoop

import dista_proto as dp
from dista_runtime.engine import CLOSE_GRACE_S, Engine, Stream

pytestmark = pytest.mark.timeout(60)


class Keeping(Engine):
    """An engine that keeps every connection and reads nothing from it."""

    role_name = "test"

    def __init__(self, loop: AsyncioLoop) -> None:
        super().__init__(loop)
        self.links = 0
        self.lost_links: list[int] = []

    def accept(self) -> int:
        self.links += 1
        return self.links

    def get_buffer(self, link: int, sizehint: int) -> memoryview:
        return memoryview(bytearray(65536))

    def updated(self, link: int, nbytes: int) -> list[dp.Decision]:
        return []

    def lost(self, link: int) -> list[dp.Decision]:
        self.lost_links.append(link)
        return []


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    running = asyncio.new_event_loop()
    yield running
    running.close()


def run_for(loop: asyncio.AbstractEventLoop, seconds: float) -> None:
    loop.run_until_complete(asyncio.sleep(seconds))


def serving(loop: asyncio.AbstractEventLoop, clients: int) -> tuple[Keeping, list[socket.socket]]:
    engine = Keeping(AsyncioLoop(loop))
    listener = engine.loop.listen(engine, "127.0.0.1", 0)
    peers = [socket.create_connection(listener.address, timeout=5) for _ in range(clients)]
    run_for(loop, 0.05)
    assert len(engine.transports) == clients
    listener.close()
    return engine, peers


def test_close_all_with_nothing_buffered_drains_at_once(loop: asyncio.AbstractEventLoop) -> None:
    engine, peers = serving(loop, 3)
    engine.close_all()
    run_for(loop, 0.01)
    assert engine.drained.done()
    assert sorted(engine.lost_links) == [1, 2, 3]
    for peer in peers:
        assert peer.recv(1) == b""
        peer.close()


def test_a_peer_that_stops_reading_is_aborted_after_the_grace(
    loop: asyncio.AbstractEventLoop,
) -> None:
    engine, (stuck, reading) = serving(loop, 2)
    transport: Stream = engine.transports[1]
    transport.write(bytes(32 << 20))  # far more than the sockets hold: most stays buffered
    run_for(loop, 0.05)
    assert transport.get_write_buffer_size() > 0
    began = time.monotonic()
    engine.close_all()
    run_for(loop, 0.1)
    assert reading.recv(1) == b""  # closed at once: it had nothing buffered
    assert not engine.drained.done()  # the stuck one is still flushing
    loop.run_until_complete(asyncio.wait_for(_settled(engine), CLOSE_GRACE_S + 2))
    took = time.monotonic() - began
    assert CLOSE_GRACE_S <= took < CLOSE_GRACE_S + 1.5
    assert sorted(engine.lost_links) == [1, 2]
    assert ends(stuck)  # what the kernel had of it, then the end
    stuck.close()
    reading.close()


def ends(peer: socket.socket) -> bool:
    """Whether ``peer``'s connection ends (EOF or reset) within 10 s of reading."""
    deadline = time.monotonic() + 10
    peer.settimeout(1)
    while time.monotonic() < deadline:
        try:
            if not peer.recv(1 << 20):
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            pass
    return False


async def _settled(engine: Engine) -> None:
    while not engine.drained.done():
        await asyncio.sleep(0.01)
