"""Bounded work per request (issue 24, attack 5): answers in passes bounded per peer, held
frames dropped with their peer, and one cap on partly received large frames (docs/protocol.md,
"Bounded answers" and "Partial frames")."""

from __future__ import annotations

import struct

import dista_proto as dp
from dista_proto import frame as F

from .support.security_peers import Net, Raw

TASK = 0x5EED
_HEADER = struct.Struct("<IBQQ")


def observer(net: Net) -> Raw:
    o = net.connect()
    o.send(dp.Hello(F.ROLE_OBSERVER, 0))
    return o


def finished(net: Net, driver: Raw, worker: Raw, n: int) -> None:
    """``n`` tasks of ``driver`` run on ``worker``: n timeline records."""
    for i in range(1, n + 1):
        oid = driver.oid(i)
        driver.send(dp.Task(oid, TASK, b""))
        worker.take()
        worker.send(dp.Span(oid, 10 + i, 20 + i, 30 + i), dp.Result(oid, b"v"))
    driver.take()


def test_a_read_of_many_requests_is_answered_a_pass_at_a_time_and_dropped_with_its_peer() -> None:
    net = Net()
    o = observer(net)
    per_pass = dp.ANSWER_BOUND // (64 << 10)  # status answers are small: each costs the floor
    o.send(*[dp.Status()] * 1000)
    assert len(o.take()) == per_pass
    assert net.head.holding(o.link)
    net.head.writable(o.link, 0)  # the binding wrote them: one more pass
    net.pump()
    assert len(o.take()) == per_pass
    # Another peer is answered meanwhile, at once.
    d = net.driver()
    d.send(dp.Stats())
    assert [type(e) for e in d.take()] == [dp.Stats]
    # The observer goes: what it sent is dropped, nothing more is built for it.
    net.head.connection_lost(o.link, 0)
    assert not net.head.holding(o.link)
    net.head.writable(o.link, 0)
    net.pump()
    assert o.take() == []


def test_frames_after_held_ones_wait_behind_them_in_order() -> None:
    net = Net(answer_bound=1)  # every answer spends the pass
    d = net.driver()
    d.send(dp.Stats(), dp.Timeline(), dp.Stats())
    assert [type(e) for e in d.take()] == [dp.Stats]
    d.send(dp.Stats())  # a read while frames are held: after them, a pass of its own
    assert [type(e) for e in d.take()] == [dp.Timeline]
    for _ in range(2):
        net.head.writable(d.link, 0)
        net.pump()
    assert [type(e) for e in d.take()] == [dp.Stats, dp.Stats]
    assert not net.head.holding(d.link)


def test_an_observers_timeline_is_packed_the_same_and_a_drivers_empty_take_is_none() -> None:
    net = Net()
    w = net.worker()
    d = net.driver()
    finished(net, d, w, 5)
    o = observer(net)
    o.send(dp.Timeline(), dp.Timeline())
    first, second = o.take()
    assert isinstance(first, dp.Timeline) and first.records is not None
    assert first == second and len(first.records) == 5
    assert [r.object_id for r in first.records] == [d.oid(i) for i in range(1, 6)]
    assert first.records[0].address == dp.Address("10.0.0.1", 7000)
    d.send(dp.Timeline(), dp.Timeline())
    mine, again = d.take()
    assert mine == first and again == dp.Timeline(())
    o.send(dp.Timeline())
    assert o.take() == [dp.Timeline(())]


def test_status_names_the_peers_answered_the_most() -> None:
    net = Net(answer_bound=100)
    o = observer(net)
    o.send(*[dp.Status()] * 3)
    for _ in range(2):
        net.head.writable(o.link, 0)
    assert f"answered observer on link {o.link}: 3 requests" in net.head.status()


def _announce(peer: Raw, size: int, body: int) -> None:
    """A task frame announcing ``size`` bytes of argument, of which ``body`` are sent."""
    header = _HEADER.pack(F.HEADER + size, F.KIND_TASK, peer.oid(1), TASK)
    peer.net.head.receive_data(peer.link, header + bytes(body), 0)
    peer.net.pump()


def test_past_the_partial_cap_a_new_large_frame_is_refused_and_those_in_progress_go_on() -> None:
    net = Net(partial_cap_bytes=3 << 20)
    w = net.worker()
    a, b, c = net.driver(), net.driver(), net.driver()
    _announce(a, 2 << 20, 1 << 20)  # 2 MiB reserved, half of it here
    _announce(b, 2 << 20, 4096)  # would make 4 MiB: refused from its header
    (error,) = b.take()
    assert isinstance(error, dp.Error)
    assert "past its cap of 3145728 bytes (2097169 held by frames in progress)" in error.message
    assert b.closed is not None and "partly received frames" in b.closed
    net.head.receive_data(a.link, bytes(1 << 20), 0)  # the one in progress goes on
    net.pump()
    (task,) = w.take()
    assert isinstance(task, dp.Task) and len(task.argument) == 2 << 20
    _announce(c, 2 << 20, 0)  # a's frame is whole: room again
    assert c.closed is None and c.take() == []
    net.head.connection_lost(c.link, 0)  # announced, never sent: freed with its link
    d = net.driver()
    _announce(d, (3 << 20) - 64, 0)
    assert d.closed is None


def test_the_partial_cap_holds_on_the_receive_into_path_too() -> None:
    head = dp.Head(epoch=1, first_number=1, partial_cap_bytes=3 << 20)
    links = []
    for _ in range(2):
        link = head.connection_made(0)
        hello = dp.encode_event(dp.Hello(F.ROLE_DRIVER, 7))
        frame = _HEADER.pack(F.HEADER + (2 << 20), F.KIND_TASK, (1 << 40) | 1, TASK)
        data = hello + frame + bytes(1000)
        view = head.get_buffer(link)
        view[: len(data)] = data
        head.buffer_updated(link, len(data), 0)
        links.append(link)
    closes = [d for d in head.decisions() if isinstance(d, dp.Close)]
    assert [d.link for d in closes] == [links[1]]
    assert "past its cap" in closes[0].reason
