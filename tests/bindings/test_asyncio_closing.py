"""The asyncio binding lets go of every connection when the engine is done with it.

- Its listener closes every connection it accepted, also one accepted in the turn it closes
  (CPython gh-109564: with ``create_server`` that connection's transport failed to attach,
  and its socket stayed open until collected).
- `Engine.close_all` closes every connection, a stuck one within `CLOSE_GRACE_S`, and
  ``drained`` says when none is left (what ends a loop waits for it).
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import time
from collections.abc import Iterator

import pytest
from dista_asyncio._loop import AsyncioLoop

from dista_runtime._hosts.engine import CLOSE_GRACE_S
from dista_runtime._net.streams import Stream
from tests.bindings.support.bare_engine import BareEngine, ends

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["asyncio", "uvloop"])
def loop(request: pytest.FixtureRequest) -> Iterator[asyncio.AbstractEventLoop]:
    """asyncio's own loop, and uvloop's when it is installed (what the binding prefers)."""
    if request.param == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        running: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    else:
        running = asyncio.new_event_loop()
    yield running
    running.close()


def run_for(loop: asyncio.AbstractEventLoop, seconds: float) -> None:
    loop.run_until_complete(asyncio.sleep(seconds))


def open_sockets() -> int:
    """This process's open sockets (uvloop opens a spare /dev/null on first accept: not
    counted)."""
    where = f"/proc/{os.getpid()}/fd"
    count = 0
    for fd in os.listdir(where):
        try:
            count += os.readlink(f"{where}/{fd}").startswith("socket:")
        except OSError:
            pass  # the listing's own descriptor, closed by now
    return count


# -- the listener -----------------------------------------------------------------------------


@pytest.mark.parametrize("wait", range(8))
def test_a_connection_accepted_as_the_listener_closes_is_closed(
    loop: asyncio.AbstractEventLoop, wait: int
) -> None:
    engine = BareEngine(AsyncioLoop(loop), stopped=True)
    listener = engine.loop.listen(engine, "127.0.0.1", 0)
    run_for(loop, 0)  # listening
    before = open_sockets()

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
        assert ends(client, within=5)
    run_for(loop, 0.01)  # uvloop lets go of a closed handle's descriptor a turn later
    gc.collect()
    assert open_sockets() < before  # the listening socket is closed too, and nothing leaked


def test_the_listener_serves_until_closed(loop: asyncio.AbstractEventLoop) -> None:
    engine = BareEngine(AsyncioLoop(loop))
    listener = engine.loop.listen(engine, "127.0.0.1", 0)
    clients = [socket.create_connection(listener.address, timeout=5) for _ in range(20)]
    run_for(loop, 0.05)
    assert sorted(engine.transports) == list(range(1, 21))
    listener.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(listener.address, timeout=5)
    engine.close_all()
    run_for(loop, 0.01)
    for client in clients:
        assert ends(client)
        client.close()


# -- close_all --------------------------------------------------------------------------------


def serving(
    loop: asyncio.AbstractEventLoop, clients: int
) -> tuple[BareEngine, list[socket.socket]]:
    engine = BareEngine(AsyncioLoop(loop))
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
        assert ends(peer)
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
    assert ends(reading, within=1)  # closed at once: it had nothing buffered
    assert not engine.drained.done()  # the stuck one is still flushing
    loop.run_until_complete(asyncio.wait_for(_drained(engine), CLOSE_GRACE_S + 2))
    took = time.monotonic() - began
    assert CLOSE_GRACE_S <= took < CLOSE_GRACE_S + 1.5
    assert sorted(engine.lost_links) == [1, 2]
    assert ends(stuck)  # what the kernel had of it, then the end
    stuck.close()
    reading.close()


async def _drained(engine: BareEngine) -> None:
    while not engine.drained.done():
        await asyncio.sleep(0.01)
