"""A head keeps nothing for peers that are gone: a fuzz run's thousands of workers with
registries of their own, and drivers' tasks no worker could run, left a deque or a queue
each in the head for ever (the 1M-frame fuzz: 2,943 gone workers held this way)."""

from __future__ import annotations

import dista_proto as dp
from dista_proto import frame as F

from .support.security_peers import REGISTRY, Net

TASK_ID = 0x51


def test_gone_idle_workers_of_many_registries_leave_nothing_behind() -> None:
    net = Net()
    gone = []
    for i in range(300):
        w = net.connect()
        w.send(dp.Hello(F.ROLE_WORKER, 1000 + i, dp.Address("10.0.0.2", 7000 + i)))
        gone.append(w)
    stay = net.worker()
    assert len(net.head._scheduler.idle) == 301
    for w in gone:
        net.head.connection_lost(w.link, 0)
        net.pump()
    assert list(net.head._scheduler.idle) == [REGISTRY]
    # The worker left still gets work.
    d = net.driver()
    d.send(dp.Task(d.oid(1), TASK_ID, b"x"))
    assert stay.take() == [dp.Task(d.oid(1), TASK_ID, b"x")]
    stay.send(dp.Result(d.oid(1), b"y"))
    assert dp.Result(d.oid(1), b"y") in d.take()
    net.head.connection_lost(stay.link, 0)
    assert net.head._scheduler.idle == {}


def test_a_registry_whose_tasks_failed_for_want_of_a_worker_keeps_no_queue() -> None:
    net = Net(no_worker_grace_ns=1_000)
    net.worker()
    lonely = net.connect()
    lonely.send(dp.Hello(F.ROLE_DRIVER, registry_hash=REGISTRY + 1))
    (welcome,) = lonely.take()
    assert isinstance(welcome, dp.Welcome)
    lonely.number = welcome.number
    lonely.send(dp.Task(lonely.oid(1), TASK_ID, b"x"))
    assert REGISTRY + 1 in net.head._scheduler.ready
    net.head.on_timer(2_000)
    net.pump()
    (error,) = lonely.take()
    assert isinstance(error, dp.Error) and "none of the connected workers" in error.message
    assert REGISTRY + 1 not in net.head._scheduler.ready
    # A later task of that registry waits (and fails) as the first did.
    lonely.send(dp.Task(lonely.oid(2), TASK_ID, b"x"), now=3_000)
    net.head.on_timer(5_000)
    net.pump()
    (error,) = lonely.take()
    assert isinstance(error, dp.Error) and error.object_id == lonely.oid(2)
    assert REGISTRY + 1 not in net.head._scheduler.ready


def test_a_task_whose_last_worker_died_waits_the_grace_then_fails() -> None:
    net = Net(no_worker_grace_ns=1_000)
    w = net.worker()
    d = net.driver()
    d.send(dp.Task(d.oid(1), TASK_ID, b"x"))
    assert w.take() == [dp.Task(d.oid(1), TASK_ID, b"x")]
    net.head.connection_lost(w.link, 10)  # killed while running it: no worker left
    net.pump()
    assert d.take() == []
    assert net.head.next_deadline() is not None, "a deadline for the orphaned task"
    net.head.on_timer(2_000)
    net.pump()
    (error,) = d.take()
    assert isinstance(error, dp.Error) and error.object_id == d.oid(1)
    assert "none of the connected workers" in error.message
    assert net.head.stats().pending == 0


def test_a_worker_that_comes_within_the_grace_runs_the_task() -> None:
    net = Net(no_worker_grace_ns=1_000)
    w = net.worker()
    d = net.driver()
    d.send(dp.Task(d.oid(1), TASK_ID, b"x"))
    w.take()
    net.head.connection_lost(w.link, 10)
    net.pump()
    again = net.worker(port=7001)  # a supervisor's replacement
    assert again.take() == [dp.Task(d.oid(1), TASK_ID, b"x")]
    net.head.on_timer(2_000)
    net.pump()
    again.send(dp.Result(d.oid(1), b"y"))
    assert dp.Result(d.oid(1), b"y") in d.take()
