"""The binding contract, once for every binding: asyncio (on its own loop, and on uvloop
when installed), anyio on asyncio, anyio on trio, and gevent.

Everything the runtime asks of a binding (`dista_runtime._net.contract.Loop` and `dista_runtime._net.latch.Latch`, the
streams of `dista_runtime._net.streams` and `.sockets`, TLS below them, and how a binding
is started: ``run``, ``background``, ``wait``) is checked here in process, over a bare
engine whose core only records what it reads (`tests.bindings.support.contract`, which
holds everything that touches the engine and connection interface). Per-binding tests
keep only what is about one binding (trio's runs, gevent's greenlets and patching).
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import random
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dista_runtime._hosts.engine import CLOSE_GRACE_S
from dista_runtime._net.contract import Loop
from dista_runtime._net.latch import CallQueue, Latch
from dista_runtime._net.limits import Limits
from dista_runtime._net.streams import HIGH_WATER
from tests.bindings.support.contract import (
    BINDINGS,
    Binding,
    Rig,
    blackhole,
    client_context,
    digest,
    ends,
    make_certificates,
    open_sockets,
    read_digest,
    read_to_end,
    tls_config,
    tls_refused,
    until,
)

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=BINDINGS)
def binding(request: pytest.FixtureRequest) -> Binding:
    return Binding(request.param)


@pytest.fixture
def make_rig(binding: Binding) -> Iterator[Callable[..., Rig]]:
    """Rigs on the binding (`Rig`'s options), each stopped at the test's end; the threads
    their loops ran on are gone by then."""
    threads = threading.active_count()
    made: list[Rig] = []

    def make(**options: Any) -> Rig:
        made.append(Rig(binding, **options))
        return made[-1]

    try:
        yield make
    finally:
        for rig in made:
            rig.stop()
        until(lambda: threading.active_count() <= threads, 5)


@pytest.fixture
def rig(make_rig: Callable[..., Rig]) -> Rig:
    return make_rig()


def payload(size: int, seed: int = 23) -> bytes:
    return random.Random(seed).randbytes(size)


# -- how a binding is started: wait, run, background --------------------------------------------


def test_wait_for_a_latch_without_blocking_the_loop(binding: Binding) -> None:
    def body() -> None:
        done: Latch[int] = Latch()
        done.set(1)
        assert binding.waited(done)[0] == 1
        later: Latch[int] = Latch()
        settler = threading.Timer(0.1, later.set, (2,))  # settled on another thread
        settler.start()
        value, ticks = binding.waited(later, 5)
        settler.join()
        assert value == 2
        assert ticks >= 3  # the loop ran on meanwhile
        with pytest.raises(TimeoutError):
            binding.waited(Latch(), 0.05)
        failed: Latch[int] = Latch()
        failed.fail(ValueError("no"))
        with pytest.raises(ValueError, match="no"):
            binding.waited(failed)

    binding.own_thread(body)


def test_run_a_role_and_leave_the_thread_as_it_was(binding: Binding) -> None:
    def start(running: Loop) -> Latch[str]:
        done: Latch[str] = Latch()
        running.call_later(0.01, done.set, "ran")
        return done

    def broken(running: Loop) -> Latch[str]:
        raise OSError("cannot listen")

    def body() -> None:
        assert binding.run(start) == "ran"
        with pytest.raises(OSError, match="cannot listen"):  # as it is, not in a group
            binding.run(broken)
        asyncio.run(asyncio.sleep(0))  # another loop can run on this thread, and so can
        assert binding.run(start) == "ran"  # the binding's again

    binding.own_thread(body)


def test_a_background_loop_runs_every_call_made_before_it_stops(binding: Binding) -> None:
    ran: list[int] = []
    for i in range(50):  # a driver's close, scheduled as it leaves, is one such call
        served = binding.background()
        served.loop.call_soon_threadsafe(ran.append, i)
        served.stop()
    assert ran == list(range(50))
    with pytest.raises(RuntimeError):
        served.loop.call_soon_threadsafe(print)  # its loop is gone


# -- calls, timers and tasks -------------------------------------------------------------------


def test_tasks_and_calls(rig: Rig, binding: Binding) -> None:
    loop = rig.loop
    seen: list[object] = []
    ended: list[object] = []
    fired: list[int] = []

    async def coro() -> None:
        seen.append(loop.current_task())
        await binding.sleep(30)

    def start() -> Any:
        handle = loop.create_task(coro())
        handle.add_done_callback(ended.append)
        loop.call_soon(lambda: 1 / 0)  # logged; the loop goes on
        loop.call_soon(fired.append, 4)
        return handle

    handle = rig.call(start)
    other = threading.Thread(target=loop.call_soon_threadsafe, args=(fired.append, 3))
    other.start()
    other.join()
    until(lambda: seen and sorted(fired) == [3, 4])
    assert rig.call(lambda: (seen, loop.current_task())) == ([handle], None)  # the very handle
    assert ended == []
    rig.call(handle.cancel)  # a task cancelled: its done callbacks run
    until(lambda: ended == [handle])
    rig.call(handle.add_done_callback, ended.append)  # done already: called (soon)
    until(lambda: ended == [handle, handle])


def test_timers_run_in_order_and_a_cancelled_one_never(rig: Rig) -> None:
    loop = rig.loop
    fired: list[str] = []
    threads: set[int] = set()

    def fire(label: str) -> None:
        fired.append(label)
        threads.add(threading.get_ident())

    def start() -> None:
        loop.call_later(0.12, fire, "last")
        loop.call_later(0.01, fire, "first")
        loop.call_later(0.06, fire, "second")
        loop.call_later(0.03, fire, "cancelled at once").cancel()
        later = loop.call_later(0.09, fire, "cancelled by a timer")
        loop.call_later(0.02, later.cancel)
        loop.call_later(0, fire, "now")

    rig.call(start)
    until(lambda: len(fired) == 4)
    time.sleep(0.05)
    assert fired == ["now", "first", "second", "last"]
    assert threads == {rig.call(threading.get_ident)}  # on the loop's thread


def test_calls_from_other_threads_run_on_the_loop_in_order(rig: Rig) -> None:
    calls: list[tuple[int, int, int]] = []

    def record(thread: int, i: int) -> None:
        calls.append((thread, i, threading.get_ident()))

    def send(thread: int) -> None:
        for i in range(1000):
            rig.loop.call_soon_threadsafe(record, thread, i)

    senders = [threading.Thread(target=send, args=(t,)) for t in range(8)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(10)
    until(lambda: len(calls) == 8000, 20)
    assert {ident for _, _, ident in calls} == {rig.call(threading.get_ident)}
    for thread in range(8):
        assert [i for t, i, _ in calls if t == thread] == list(range(1000))


def test_a_call_queue_runs_calls_in_order_a_turn_at_a_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`CallQueue` (trio's call_soon): woken when it stops being empty; calls made by a
    run's calls wait for the next run; one that raises is logged."""
    wakes: list[int] = []
    ran: list[int] = []
    calls = CallQueue(lambda: wakes.append(1))
    calls(ran.append, 1)
    calls(lambda: calls(ran.append, 4))
    calls(lambda: 1 / 0)
    calls(ran.append, 2)
    assert wakes == [1]  # once: the first call found it empty
    assert calls.run_queued() is True  # a call was queued meanwhile: another turn
    assert ran == [1, 2] and "ZeroDivisionError" in caplog.text
    assert calls.run_queued() is False
    assert ran == [1, 2, 4] and wakes == [1]  # the runner knew more waited: no wake-up


# -- listening and dialing ---------------------------------------------------------------------


def _where(family: str, tmp_path: Path) -> str:
    return "127.0.0.1" if family == "tcp" else f"unix:{tmp_path}/sock"


@pytest.mark.parametrize("family", ["tcp", "unix"])
def test_listen_and_dial_carry_bytes_both_ways_exactly(
    rig: Rig, family: str, tmp_path: Path
) -> None:
    where = _where(family, tmp_path)
    address = rig.listen(where)
    assert address[0] == where if family == "unix" else address[1] > 0
    rig.dial(100, address)
    assert rig.dialed(100) == ""
    rig.until_links([1, 100])
    up, down = payload(3 << 20, 1), payload((1 << 20) + 7, 2)
    rig.write(100, up[:10], up[10:300_000], up[300_000:])  # small ones joined, large sliced
    rig.write(1, down)
    until(lambda: rig.received(1).count >= len(up) and rig.received(100).count >= len(down))
    assert rig.received(1).digest() == digest(up) and rig.received(1).count == len(up)
    assert rig.received(100).digest() == digest(down)
    rig.close(1)  # one end closes: both ends are told
    until(lambda: sorted(rig.lost()) == [1, 100])
    assert rig.links() == []


@pytest.mark.parametrize("family", ["tcp", "unix"])
def test_a_dial_that_fails_says_why(rig: Rig, family: str, tmp_path: Path) -> None:
    if family == "tcp":
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            address = closed.getsockname()  # nobody listens there once it is closed
    else:
        address = (f"unix:{tmp_path}/nobody", 0)
    rig.dial(101, address)
    assert rig.dialed(101)  # the reason, whatever the loop says
    until(lambda: rig.lost() == [101])  # the core forgets the link
    assert rig.links() == []


def test_a_dial_to_a_blackhole_ends_at_its_timeout(rig: Rig) -> None:
    with blackhole() as address:
        before = open_sockets()
        began = time.monotonic()
        rig.dial(102, address, timeout=0.3)
        why = rig.dialed(102)
        took = time.monotonic() - began
        assert why, "a dial that timed out must say so"
        assert 0.25 <= took < 3, took
        until(lambda: rig.lost() == [102])
        until(lambda: open_sockets() <= before, 5)  # the cancelled dial's socket is closed


# -- large writes and flow control -------------------------------------------------------------


@pytest.mark.parametrize("family", ["tcp", "unix"])
def test_a_large_write_arrives_whole(rig: Rig, family: str, tmp_path: Path) -> None:
    rig.dial(100, rig.listen(_where(family, tmp_path)))
    assert rig.dialed(100) == ""
    rig.until_links([1, 100])
    data = payload(64 << 20)
    rig.write(100, memoryview(data))  # over the mark many times: its writer waits for room
    until(lambda: rig.received(1).count >= len(data), 20)
    assert rig.received(1).count == len(data)
    assert rig.received(1).digest() == digest(data)


def test_a_peer_that_stops_reading_pauses_its_source_then_resumes(rig: Rig) -> None:
    """What link 1 reads is written to link 2, whose peer does not read: once link 2's
    stream passes the mark, link 1 is not read, so its sender stalls and link 2's buffer
    stays near the mark; when the peer reads again, everything arrives, in order."""
    address = rig.listen()
    source = socket.create_connection(address, timeout=5)
    rig.until_links([1])
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    slow.connect(address)
    rig.until_links([1, 2])
    rig.forward(1, 2)
    total = 48 << 20
    data = payload(total)
    sent = [0]

    def send() -> None:
        source.settimeout(20)
        view = memoryview(data)
        while sent[0] < total:
            sent[0] += source.send(view[sent[0] : sent[0] + (256 << 10)])

    sender = threading.Thread(target=send)
    sender.start()
    try:
        until(lambda: rig.paused(2))
        peak = 0
        for _ in range(40):
            peak = max(peak, rig.buffered(2))
            time.sleep(0.01)
        deadline = time.monotonic() + 10
        while True:  # until the sender stalls, or ends: then the source was never held
            before = sent[0]
            time.sleep(0.2)
            if sent[0] == before or sent[0] == total:
                break
            assert time.monotonic() < deadline, "the sender never stalled"
        assert sent[0] < total, "the source went on being read"
        assert peak <= HIGH_WATER + (1 << 20), f"{peak} bytes buffered for a slow peer"
        assert rig.paused(2)
        got = read_digest(slow, total)  # the peer reads again: the source resumes
        sender.join(20)
        assert not sender.is_alive() and sent[0] == total
        assert got == digest(data)
        until(lambda: not rig.paused(2))
    finally:
        for sock in (source, slow):
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a sender still waiting
            except OSError:
                pass
        sender.join(5)
        source.close()
        slow.close()


# -- closing -----------------------------------------------------------------------------------


def _peers(rig: Rig, n: int) -> list[socket.socket]:
    """``n`` connections to a new listener of ``rig``, attached as links 1..n, the
    listener closed; each reads little at a time (a small receive buffer)."""
    address = rig.listen()
    peers = []
    for _ in range(n):
        peer = socket.socket()
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
        peer.connect(address)
        peers.append(peer)
    rig.until_links(list(range(1, n + 1)))
    rig.close_listeners()
    return peers


def test_close_flushes_what_is_buffered_and_abort_drops_it(rig: Rig) -> None:
    kept, streamed, dropped = _peers(rig, 3)
    data = payload(16 << 20)
    with kept, streamed, dropped:
        rig.write(1, data)  # most of it waits in the engine, for room in the stream
        rig.close(1)
        rig.write_stream(2, data)  # all of it in the stream's own buffer
        rig.close(2)
        rig.write(3, data)
        rig.abort(3)
        for peer in (kept, streamed):
            got, how = read_to_end(peer)
            assert len(got) == len(data) and got == data and how == "eof"
        got, _ = read_to_end(dropped)
        assert len(got) < len(data) and data.startswith(got)
    until(lambda: sorted(rig.lost()) == [1, 2, 3])


def test_the_listener_serves_until_closed(rig: Rig) -> None:
    address = rig.listen()
    clients = [socket.create_connection(address, timeout=5) for _ in range(20)]
    rig.until_links(list(range(1, 21)))
    rig.close_listeners()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=5)
    rig.close_all()
    for client in clients:
        assert ends(client)
        client.close()


def _after_turns(loop: Loop, turns: int, then: Callable[[], object]) -> None:
    """``then()`` after ``turns`` turns of ``loop`` (on the loop)."""
    if turns:
        loop.call_soon(_after_turns, loop, turns - 1, then)
    else:
        then()


@pytest.mark.parametrize("wait", range(8))
def test_a_connection_accepted_as_the_listener_closes_is_closed(
    make_rig: Callable[..., Rig], wait: int
) -> None:
    """Its engine has stopped, so every connection it gets is aborted at once; the one
    accepted in the turn its listener closes too (CPython gh-109564 left that one open
    with asyncio's ``create_server``)."""
    rig = make_rig(stopped=True)
    address = rig.listen()
    listener = rig.listeners.pop()
    before = open_sockets()
    with socket.create_connection(address, timeout=5) as client:
        closed: Latch[None] = Latch()
        # One turn of the loop each: the accept is in one of them.
        then = lambda: _after_turns(rig.loop, 10, lambda: closed.set(None))
        rig.call(_after_turns, rig.loop, wait, lambda: (listener.close(), then()))
        closed.wait(5)
        # The peer sees the end: its connection was closed, not left to the collector.
        assert ends(client, within=5)
    time.sleep(0.01)  # uvloop lets go of a closed handle's descriptor a turn later
    rig.call(gc.collect)
    assert open_sockets() < before  # the listening socket is closed too, and nothing leaked


def test_close_all_with_nothing_buffered_drains_at_once(rig: Rig) -> None:
    peers = _peers(rig, 3)
    rig.close_all()
    until(rig.drained, 1)
    assert sorted(rig.lost()) == [1, 2, 3]
    for peer in peers:
        assert ends(peer)
        peer.close()


def test_a_peer_that_stops_reading_is_aborted_after_the_grace(rig: Rig) -> None:
    stuck, reading = _peers(rig, 2)
    rig.write_stream(1, bytes(32 << 20))  # far more than the sockets hold: most stays buffered
    until(lambda: rig.buffered(1) > 0)
    began = time.monotonic()
    rig.close_all()
    assert ends(reading, within=1)  # closed at once: it had nothing buffered
    assert not rig.drained()  # the stuck one is still flushing
    until(rig.drained, CLOSE_GRACE_S + 2)
    took = time.monotonic() - began
    assert CLOSE_GRACE_S <= took < CLOSE_GRACE_S + 1.5
    assert sorted(rig.lost()) == [1, 2]
    assert ends(stuck)  # what the kernel had of it, then the end
    stuck.close()
    reading.close()


# -- TLS ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("cryptography", reason="dista certs needs the tls extra")
    folder = tmp_path_factory.mktemp("tls")
    make_certificates(folder)
    return folder


def test_a_tls_round_trip(make_rig: Callable[..., Rig], tls_dir: Path) -> None:
    rig = make_rig(tls=tls_config(tls_dir, "worker"))
    rig.dial(100, rig.listen())
    assert rig.dialed(100) == ""
    rig.until_links([1, 100])
    up, down = payload((8 << 20) + 3, 1), payload((1 << 20) + 7, 2)
    rig.write(100, up)
    rig.write(1, down)
    until(lambda: rig.received(1).count >= len(up) and rig.received(100).count >= len(down))
    assert rig.received(1).count == len(up) and rig.received(1).digest() == digest(up)
    assert rig.received(100).digest() == digest(down)
    assert rig.tls_failures() == []
    # The core is told which certificate the accepted link showed (a driver's secret is
    # bound to it): the SHA-256 of the dialer's DER, and its subject for log lines.
    der = ssl.PEM_cert_to_DER_cert((tls_dir / "worker.pem").read_text())
    (identity,) = rig.identities().values()
    assert identity.digest == hashlib.sha256(der).digest()
    assert "worker" in identity.subject
    rig.close(100)
    until(lambda: sorted(rig.lost()) == [1, 100])


CLIENTS = [pytest.param(None, id="no-certificate"), pytest.param("stranger", id="another-CA")]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_failed_tls_handshake_is_reported_and_nothing_is_read(
    make_rig: Callable[..., Rig], tls_dir: Path, client: str | None
) -> None:
    rig = make_rig(tls=tls_config(tls_dir, "worker"))
    address = rig.listen()
    assert tls_refused(address, client_context(tls_dir, client))
    until(lambda: rig.tls_failures())
    assert len(rig.tls_failures()) == 1
    assert rig.reading_links() == []  # no byte reached the core
    until(lambda: rig.links() == [])


def test_a_failed_tls_handshake_never_reaches_the_core(
    make_rig: Callable[..., Rig], tls_dir: Path
) -> None:
    rig = make_rig(tls=tls_config(tls_dir, "worker"))
    address = rig.listen()
    assert tls_refused(address, client_context(tls_dir, None))
    until(lambda: rig.tls_failures())
    assert rig.counted() == 0  # the core never heard of it
    assert rig.lost() == []


def _open(sock: socket.socket) -> bool:
    """Whether ``sock``'s connection is still open (nothing to read, no end)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


@pytest.mark.parametrize("cap", [4, 130])  # 130: past the listener's default bound (100)
def test_pending_tls_handshakes_past_the_cap_close_the_oldest_for_the_newest(
    make_rig: Callable[..., Rig], tls_dir: Path, cap: int
) -> None:
    rig = make_rig(tls=tls_config(tls_dir, "worker"))
    # No deadline (0): only the cap closes a silent connection here.
    limits = Limits(1000, max_handshakes=cap, max_handshakes_per_host=cap, handshake_timeout=0)
    rig.call(rig.engine.limit, limits)
    address = rig.listen()
    silent = [socket.create_connection(address, timeout=5) for _ in range(cap + 3)]
    try:
        assert all(ends(s, 5) for s in silent[:3])  # the oldest went for the newest
        time.sleep(0.2)
        assert all(_open(s) for s in silent[3:])  # none refused, none timed out
        # A peer that answers gets in at once amid them, and the next oldest goes for it.
        with (
            socket.create_connection(address, timeout=5) as raw,
            client_context(tls_dir, "driver").wrap_socket(raw) as tls,
        ):
            tls.sendall(b"hello")
            until(
                lambda: (
                    [r.count for r in rig.call(lambda: list(rig.core.received.values()))] == [5]
                )
            )
            assert ends(silent[3], 5)
    finally:
        for s in silent:
            s.close()
