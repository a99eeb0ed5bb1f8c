"""The head's watch past hello, in virtual time: idle drivers and observers closed (a
keepalive keeps a driver), slow-drip frames closed by the rate floor (time the head paused
reading not counted), and the observer cap."""

from __future__ import annotations

import dista_proto as dp
from dista_proto import frame as F

from .support.security_peers import REGISTRY, Net, Raw

S = 1_000_000_000


def _observer(net: Net, now: int = 0) -> Raw:
    o = net.connect(now)
    o.send(dp.Hello(F.ROLE_OBSERVER, registry_hash=0), now=now)
    return o


def test_an_idle_observer_and_driver_are_closed_and_told_why() -> None:
    net = Net(idle_ns=30 * S)
    d = net.driver()
    o = net.connect()
    o.send(dp.Hello(F.ROLE_OBSERVER, registry_hash=0))
    o.send(dp.Status(), now=20 * S)  # heard at 20 s: its idle clock starts again
    o.take()
    net.head.on_timer(30 * S)
    net.pump()
    assert d.closed is not None and d.closed.startswith("idle: nothing sent for 30 s")
    assert o.closed is None
    assert any(isinstance(e, dp.Error) and "idle" in e.message for e in d.take())
    net.head.on_timer(50 * S + 1)
    net.pump()
    assert o.closed is not None and o.closed.startswith("idle:")


def test_a_keepalive_keeps_a_driver_and_gets_no_reply() -> None:
    net = Net(idle_ns=30 * S)
    d = net.driver()
    for t in range(10, 300, 10):
        d.send(dp.Stats(None, dp.STATS_NO_REPLY), now=t * S)
        net.head.on_timer(t * S)
        net.pump()
    assert d.closed is None
    assert d.take() == []  # a keepalive asks nothing
    d.send(dp.Stats(), now=300 * S)
    (reply,) = d.take()
    assert isinstance(reply, dp.Stats) and reply.counts is not None


def test_workers_are_left_to_their_heartbeat_and_zero_turns_idle_off() -> None:
    net = Net(idle_ns=30 * S, liveness_ns=0)
    w = net.worker()
    net.head.on_timer(3600 * S)
    net.pump()
    assert w.closed is None
    off = Net(idle_ns=0)
    d = off.driver()
    assert off.head.next_deadline() is None
    off.head.on_timer(3600 * S)
    off.pump()
    assert d.closed is None


def test_a_driver_keepalive_comes_from_the_core_on_its_timer() -> None:
    driver = dp.Driver(registry_hash=REGISTRY, keepalive_ns=15 * S)
    driver.start(0)
    driver.decisions()
    welcome = dp.encode_event(dp.Welcome(5, 7), from_head=True)
    driver.receive_data(dp.HEAD_LINK, welcome, 1 * S)
    driver.decisions()
    assert driver.next_deadline() == 16 * S
    driver.on_timer(16 * S)
    (write,) = [d for d in driver.decisions() if isinstance(d, dp.Write)]
    data = b"".join(bytes(b) for b in write.buffers)
    # A stats request (kind 13, empty) with STATS_NO_REPLY in the task-ID field.
    assert data == dp.encode_event(dp.Stats(None, dp.STATS_NO_REPLY))
    assert data[4] == F.KIND_STATS and int.from_bytes(data[13:21], "little") == 1
    assert driver.next_deadline() == 31 * S
    # A reply nobody asked for (a head that knows only the page answers keepalives too)
    # is dropped, not taken for the answer of a later request.
    reply = dp.encode_event(dp.Stats(dp.HeadStats(1, 2, 3, 4, 5)), from_head=True)
    driver.receive_data(dp.HEAD_LINK, reply, 17 * S)
    assert not [d for d in driver.decisions() if isinstance(d, dp.StatsReceived)]


def test_a_frame_dripped_below_the_floor_is_closed_after_the_grace() -> None:
    net = Net(min_rate=1024, rate_grace_ns=10 * S, idle_ns=0)
    d = net.driver()
    fast = net.driver()
    frame = dp.encode_event(dp.Task(d.oid(1), 9, b"x" * 100_000))
    fast_frame = dp.encode_event(dp.Task(fast.oid(1), 9, b"y" * 100_000))
    for t in range(11):  # one byte a second, for the 10 s of grace
        net.head.receive_data(d.link, frame[t : t + 1], t * S)
        net.head.receive_data(fast.link, fast_frame[t * 8000 : (t + 1) * 8000], t * S)
        net.head.on_timer(t * S)
        net.pump()
    assert d.closed is None  # within its grace
    net.head.receive_data(d.link, frame[11:12], 11 * S)
    net.head.on_timer(11 * S)
    net.pump()
    assert d.closed is not None and d.closed.startswith("too slow: 12 bytes of a frame in 11")
    assert fast.closed is None  # 8,000 bytes a second: well above the floor


def test_time_the_head_paused_reading_is_not_counted() -> None:
    net = Net(min_rate=1024, rate_grace_ns=10 * S, idle_ns=0)
    d = net.driver()
    frame = dp.encode_event(dp.Task(d.oid(1), 9, b"x" * 100_000))
    net.head.receive_data(d.link, frame[:5000], 0)
    net.head.watch.paused(d.link, 1 * S)
    net.head.on_timer(60 * S)  # paused for 59 s: 1 s counted, 5,000 bytes in it
    net.pump()
    assert d.closed is None
    net.head.watch.resumed(d.link, 60 * S)
    net.head.on_timer(70 * S)  # 11 s counted, 5,000 bytes: under 1,024 a second
    net.pump()
    assert d.closed is not None and d.closed.startswith("too slow")


def test_a_frame_sent_fast_then_stopped_is_closed_once_silent_for_the_grace() -> None:
    net = Net(min_rate=1024, rate_grace_ns=10 * S, idle_ns=0)
    d = net.driver()
    frame = dp.encode_event(dp.Task(d.oid(1), 9, b"x" * 2_000_000))
    net.head.receive_data(d.link, frame[:1_500_000], 0)  # fast: its average stays high
    net.head.on_timer(10 * S)
    net.pump()
    assert d.closed is None  # silent for the grace, not past it
    net.head.watch.paused(d.link, 10 * S)
    net.head.on_timer(30 * S)  # the head stopped reading it: its silence is the head's
    net.pump()
    assert d.closed is None
    net.head.watch.resumed(d.link, 30 * S)
    net.head.on_timer(39 * S)
    net.pump()
    assert d.closed is None
    net.head.on_timer(41 * S)
    net.pump()
    assert d.closed is not None and d.closed.startswith("too slow: no byte of a frame begun")


def test_a_whole_frame_ends_the_count_and_zero_turns_the_floor_off() -> None:
    net = Net(min_rate=1024, rate_grace_ns=10 * S, idle_ns=0)
    d = net.driver()
    frame = dp.encode_event(dp.Task(d.oid(1), 9, b"x" * 100))
    net.head.receive_data(d.link, frame[:10], 0)
    net.head.receive_data(d.link, frame[10:], 5 * S)  # whole: no frame in progress
    net.head.on_timer(100 * S)
    net.pump()
    assert d.closed is None
    off = Net(min_rate=0, idle_ns=0)
    slow = off.driver()
    off.head.receive_data(slow.link, frame[:3], 0)
    off.head.on_timer(100 * S)
    off.pump()
    assert slow.closed is None


def test_observers_past_the_cap_are_refused_and_room_comes_back() -> None:
    net = Net(max_observers=2)
    first, second = _observer(net), _observer(net)
    third = _observer(net)
    assert first.closed is None and second.closed is None
    assert third.closed is not None
    (err,) = third.take()
    assert isinstance(err, dp.Error) and "too many observers" in err.message
    assert "DISTA_MAX_OBSERVERS" in err.message
    d = net.driver()  # drivers are not observers: room for them whatever the cap
    assert d.closed is None
    net.head.connection_lost(first.link, 0)
    fourth = _observer(net)
    assert fourth.closed is None


def test_a_quiet_driver_that_owns_work_or_an_actor_is_spared_until_it_owns_nothing() -> None:
    # A driver that follows only the page sends no keepalive: it waits, silent, for its
    # task. It is closed for idleness only once it owns nothing at the head.
    net = Net(idle_ns=30 * S, liveness_ns=0)
    workers = [net.worker(7000), net.worker(7001)]  # one hosts the actor, one the task
    d = net.driver()
    a = net.driver()
    oid = d.oid(1)
    a.send(dp.ActorCreate(a.oid(1), 9, b"", checkpoint_every=0))
    d.send(dp.Task(oid, 9, b"x"))
    net.pump()
    (w,) = [w for w in workers if any(isinstance(e, dp.Task) for e in w.take())]
    net.head.on_timer(3600 * S)  # the task runs for an hour; the actor lives
    net.pump()
    assert d.closed is None and a.closed is None
    w.send(dp.Result(oid, b"42"), now=3601 * S)
    net.pump()
    assert any(isinstance(e, dp.Result) and e.object_id == oid for e in d.take())
    net.head.on_timer(3700 * S)  # the answer is held: still its object
    net.pump()
    assert d.closed is None and a.closed is None
    d.send(dp.Release(oid), now=3700 * S)
    net.head.on_timer(3731 * S)  # owns nothing and silent for 31 s
    net.pump()
    assert d.closed is not None and d.closed.startswith("idle: nothing sent for 30 s")
    assert a.closed is None  # its actor lives
