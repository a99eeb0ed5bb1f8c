"""Fetch grants, from the head's side and end to end over the in-memory cluster.

The head grants an object to a fetcher's host on the holding worker's link before it tells
the fetcher where the object lies; the seeded cluster (`tests/sim/support/hosts.py`, fetches
checked, no timers firing) shows every fetch between workers and from drivers finds its
grant: a forgotten one would leave the fetch waiting for ever.
"""

from __future__ import annotations

import pytest

import dista_proto as dp
from dista_proto import frame as F
from tests.sim.support.cluster import TASK_ID, Sim, SimWorker, arg, compute, deliver_all
from tests.sim.support.hosts import SecureRecoverySim, SecureSim

REGISTRY = 7
WORKER = dp.Address("10.0.0.2", 7000)


class Wire:
    """A `Head` and raw links to it; every frame it writes, in order, as (link, event)."""

    def __init__(self) -> None:
        self.head = dp.Head(epoch=1, first_number=1)
        self.sent: list[tuple[int, dp.Event]] = []

    def link(self, host: str | None) -> int:
        link = self.head.connection_made(0)
        if host is not None:
            self.head.peer(link, host)
        return link

    def send(self, link: int, *events: dp.Event) -> None:
        self.head.receive_data(link, b"".join(dp.encode_event(e) for e in events), 0)
        for d in self.head.decisions():
            if isinstance(d, dp.Write):
                data = b"".join(bytes(b) for b in d.buffers)
                self.sent += [(d.link, e) for e in frames_from_head(data)]

    def take(self) -> list[tuple[int, dp.Event]]:
        out, self.sent = self.sent, []
        return out


def frames_from_head(data: bytes) -> list[dp.Event]:
    out: list[dp.Event] = []
    pos = 0
    while pos < len(data):
        end = pos + F.PREFIX + F.frame_length(data[pos : pos + F.PREFIX])
        out.append(dp.decode_event(data[pos:end], from_head=True))
        pos = end
    return out


def stored_result(driver_host: str | None) -> tuple[Wire, int, int, int]:
    """A driver's task whose result the worker keeps: (wire, worker, driver, object)."""
    wire = Wire()
    worker = wire.link("10.0.0.2")
    wire.send(worker, dp.Hello(F.ROLE_WORKER, REGISTRY, WORKER))
    driver = wire.link(driver_host)
    wire.send(driver, dp.Hello(F.ROLE_DRIVER, REGISTRY))
    ((_, welcome),) = wire.take()
    assert isinstance(welcome, dp.Welcome)
    oid = welcome.number << dp.ID_BITS | 1
    wire.send(driver, dp.Task(oid, TASK_ID, b"x"))
    assert wire.take() == [(worker, dp.Task(oid, TASK_ID, b"x"))]
    wire.send(worker, dp.Stored(oid, 1000))
    return wire, worker, driver, oid


@pytest.mark.parametrize(
    ("host", "granted"),
    [
        ("10.0.1.5", "10.0.1.5"),
        ("::ffff:10.0.1.5", "10.0.1.5"),
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.3.4", "127.0.0.1"),
        ("::1", "127.0.0.1"),
    ],
)
def test_the_head_grants_the_drivers_host_before_it_says_where_the_result_is(
    host: str, granted: str
) -> None:
    wire, worker, driver, oid = stored_result(host)
    assert wire.take() == [
        (worker, dp.Located(oid, dp.Address(granted, 0))),
        (driver, dp.Located(oid, WORKER)),
    ]


def test_a_holder_on_loopback_is_told_to_let_its_own_machine_fetch() -> None:
    """A worker that joined by 127.0.0.1 and a driver that dialed the head by the machine's
    own address: the driver fetches from 127.0.0.1, so the grant names the head's machine."""
    wire = Wire()
    worker = wire.link("127.0.0.1")
    wire.send(worker, dp.Hello(F.ROLE_WORKER, REGISTRY, dp.Address("127.0.0.1", 7000)))
    driver = wire.link("192.0.2.2")
    wire.send(driver, dp.Hello(F.ROLE_DRIVER, REGISTRY))
    ((_, welcome),) = wire.take()
    assert isinstance(welcome, dp.Welcome)
    oid = welcome.number << dp.ID_BITS | 1
    wire.send(driver, dp.Task(oid, TASK_ID, b"x"))
    wire.take()
    wire.send(worker, dp.Stored(oid, 1000))
    assert wire.take() == [
        (worker, dp.Located(oid, dp.Address("127.0.0.1", 0))),
        (driver, dp.Located(oid, dp.Address("127.0.0.1", 7000))),
    ]


@pytest.mark.parametrize("host", [None, "fe80::1", "not an address"])
def test_no_grant_goes_for_a_host_an_address_cannot_carry(host: str | None) -> None:
    wire, _, driver, oid = stored_result(host)
    assert wire.take() == [(driver, dp.Located(oid, WORKER))]


def test_a_grant_decodes_as_a_located_frame_the_worker_may_receive() -> None:
    grant = dp.encode_event(dp.Located(5, dp.Address("10.0.1.5", 0)), from_head=True)
    assert len(grant) == F.PREFIX + F.HEADER + F.ADDR_SIZE
    assert F.KIND_LOCATED in dp.allowed_kinds(dp.Role.HEAD, dp.Role.WORKER)


# -- end to end, in memory -------------------------------------------------------------------


def _holding(sim: Sim, oid: int) -> SimWorker:
    (w,) = [w for w in sim.workers if w.alive and oid in w.core.store]
    return w


def test_drivers_fetch_their_stored_results_from_every_host() -> None:
    # Driver 0 runs on the head's machine (granted as 127.0.0.1), driver 1 on its own.
    sim = SecureSim(seed=3, workers=2, drivers=2)
    sim.settle()
    oids = {}
    for d in sim.drivers:
        oids[d.index] = a = d.core.submit(TASK_ID, arg(300, d.index))
        d.live.append(a)
        sim.driver_call(d)
    sim.settle()
    for d in sim.drivers:
        assert d.got[oids[d.index]] == compute(arg(300, d.index), (), False)


def test_a_worker_fetches_a_task_input_from_another_worker() -> None:
    sim = SecureSim(seed=4, workers=2, drivers=1, worker_slots=1)
    sim.settle()
    d = sim.drivers[0]
    a = d.core.submit(TASK_ID, arg(300))
    sim.driver_call(d)
    deliver_all(sim)
    (holder,) = [w for w in sim.workers if w.running]
    sim.finish_task(holder)
    deliver_all(sim)
    # Both workers busy, then the task taking ``a`` waits; the one not holding it frees.
    for tag in (1, 2):
        d.core.submit(TASK_ID, arg(16, tag))
    b = d.core.submit_after(TASK_ID, [a])
    sim.driver_call(d)
    deliver_all(sim)
    (other,) = [w for w in sim.workers if w is not holder]
    assert len(other.running) == 1 and len(holder.running) == 1
    sim.finish_task(other)
    deliver_all(sim)
    (task,) = [t for t in other.running if t.object_id == b]
    assert task.inputs == (compute(arg(300), (), False),)  # fetched from the holder


def test_an_adopted_object_moves_and_its_driver_fetches_it_from_the_adopter() -> None:
    sim = SecureRecoverySim(seed=5, workers=2, drivers=1, jump_rate=0.0)
    sim.settle()
    d = sim.drivers[0]
    a = d.core.submit(TASK_ID, arg(300))
    d.live.append(a)
    sim.driver_call(d)
    sim.settle()
    old = _holding(sim, a)
    d.got.clear()
    sim.drain(old)
    sim.settle()
    assert not old.alive  # it left once its object was adopted
    assert _holding(sim, a) is not old
    d.core.fetch(a)  # read again: from the adopter, which the head granted it to
    sim.driver_call(d)
    sim.settle()
    assert d.got[a] == compute(arg(300), (), False)


def test_a_fetch_the_head_never_grants_fails_for_the_driver_naming_the_object() -> None:
    # The head does not know driver 1's host (its binding never said), and driver 1 fetches
    # as a page-only driver would, without its token: no grant can name it.
    sim = SecureSim(seed=6, workers=1, drivers=2)
    sim.settle()
    d = sim.drivers[1]
    d.core._fetcher.token = b""
    for link, peer in sim.head._wire.peers.items():
        if peer.number == d.core.number:
            sim.head.peer(link, "fe80::1")  # IPv6: an address cannot carry it
    a = d.core.submit(TASK_ID, arg(300))
    d.live.append(a)
    sim.driver_call(d)
    sim.settle()
    assert a not in d.got and a not in d.failed  # its fetch waits for a grant
    (w,) = sim.workers
    waits = 0
    while a not in d.failed:  # (the driver asks the head where it is once more first)
        deadline = w.core.next_deadline()
        assert deadline is not None and waits < 10
        waits += 1
        sim.now = deadline
        w.core.on_timer(sim.now)
        sim._run_decisions(w.core)
        sim.settle()
    assert f"object {a:#x} was not offered to 10.0.1.2 by the head within 5 s" in d.failed[a]
