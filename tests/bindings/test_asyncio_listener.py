"""The asyncio binding's listener closes every connection it accepted, whenever it is
closed: also one accepted in the turn it closes (CPython gh-109564: with ``create_server``
that connection's transport failed to attach, and its socket stayed open)."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
from collections.abc import Iterator

import pytest
from dista_asyncio._loop import AsyncioLoop

import dista_proto as dp
from dista_runtime.engine import Engine

pytestmark = pytest.mark.timeout(60)


class Stopped(Engine):
    """An engine whose core has exited: every connection that reaches it is aborted."""

    role_name = "test"

    def __init__(self, loop: AsyncioLoop) -> None:
        super().__init__(loop)
        self.links = 0
        self.exited.set("stopped")

    def accept(self) -> int:
        self.links += 1
        return self.links

    def lost(self, link: int) -> list[dp.Decision]:
        return []


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    running = asyncio.new_event_loop()
    yield running
    running.close()


def turns(loop: asyncio.AbstractEventLoop, n: int) -> None:
    for _ in range(n):
        loop.run_until_complete(asyncio.sleep(0))


def ended(client: socket.socket) -> bool:
    """Whether the peer closed ``client`` (reset: it closed it unaccepted, in its backlog)."""
    try:
        return client.recv(1) == b""
    except ConnectionResetError:
        return True


def open_fds() -> int:
    return len(os.listdir(f"/proc/{os.getpid()}/fd"))


@pytest.mark.parametrize("wait", range(8))
def test_a_connection_accepted_as_the_listener_closes_is_closed(
    loop: asyncio.AbstractEventLoop, wait: int
) -> None:
    engine = Stopped(AsyncioLoop(loop))
    listener = engine.loop.listen(engine, "127.0.0.1", 0)
    turns(loop, 2)  # listening
    before = open_fds()

    async def close_after_connect() -> socket.socket:
        client = socket.create_connection(listener.address, timeout=5)
        for _ in range(wait):  # one turn of the loop each: the accept is in one of them
            await asyncio.sleep(0)
        listener.close()
        for _ in range(10):
            await asyncio.sleep(0)
        return client

    with loop.run_until_complete(close_after_connect()) as client:
        # The peer sees the end: its connection was closed, not left to the collector.
        assert ended(client)
    gc.collect()
    assert open_fds() < before  # the listening socket is closed too, and nothing leaked


def test_the_listener_serves_until_closed(loop: asyncio.AbstractEventLoop) -> None:
    accepted: list[int] = []

    class Serving(Stopped):
        def attach(self, link: int, transport: object) -> None:
            accepted.append(link)
            super().attach(link, transport)  # type: ignore[arg-type]

    engine = Serving(AsyncioLoop(loop))
    listener = engine.loop.listen(engine, "127.0.0.1", 0)
    clients = [socket.create_connection(listener.address, timeout=5) for _ in range(20)]
    turns(loop, 30)
    assert sorted(accepted) == list(range(1, 21))
    listener.close()
    turns(loop, 3)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(listener.address, timeout=5)
    for client in clients:
        assert ended(client)
        client.close()
