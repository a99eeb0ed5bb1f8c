"""Any set of task modules (task-names, docs/protocol.md "Extensions: any set of task
modules"): a worker serves every driver whose tasks it has, not only one whose registry hash
equals its own; a driver whose tasks no worker has all of is told which ones are missing."""

from __future__ import annotations

import dista_proto as dp
from dista_proto import frame as F

from .support.security_peers import Net, Raw

A, B, C = 0xA1, 0xB2, 0xC3  # task IDs: the hashes of three task names
DRIVER_REGISTRY = 0x1111
WORKER_REGISTRY = 0x2222


def _driver(net: Net, registry: int, names: tuple[int, ...] | None) -> Raw:
    d = net.connect()
    d.send(dp.Hello(F.ROLE_DRIVER, registry_hash=registry))
    (welcome,) = d.take()
    assert isinstance(welcome, dp.Welcome)
    d.number = welcome.number
    if names is not None:
        d.send(dp.TaskNames(names))
    return d


def _worker(net: Net, registry: int, names: tuple[int, ...] | None, port: int = 7000) -> Raw:
    w = net.connect()
    w.send(dp.Hello(F.ROLE_WORKER, registry, dp.Address("10.0.0.1", port)))
    if names is not None:
        w.send(dp.TaskNames(names))
    return w


def test_a_worker_serves_a_driver_whose_tasks_it_has() -> None:
    net = Net()
    w = _worker(net, WORKER_REGISTRY, (A, B, C))
    d = _driver(net, DRIVER_REGISTRY, (A, B))
    d.send(dp.Task(d.oid(1), A, b"x"))
    assert w.take() == [dp.Task(d.oid(1), A, b"x")]
    w.send(dp.Result(d.oid(1), b"y"))
    assert dp.Result(d.oid(1), b"y") in d.take()


def test_tasks_queued_before_the_names_go_once_they_come() -> None:
    net = Net()
    w = _worker(net, WORKER_REGISTRY, (A, B, C))
    d = _driver(net, DRIVER_REGISTRY, None)
    d.send(dp.Task(d.oid(1), B, b"x"))
    assert w.take() == []  # registries differ, and the driver has not said its tasks
    d.send(dp.TaskNames((B,)))
    assert w.take() == [dp.Task(d.oid(1), B, b"x")]


def test_names_that_are_not_a_subset_or_not_sent_match_exactly_as_the_page() -> None:
    net = Net(no_worker_grace_ns=1_000)
    w = _worker(net, WORKER_REGISTRY, (A, B))
    plain = _worker(net, DRIVER_REGISTRY + 1, None, port=7001)
    d = _driver(net, DRIVER_REGISTRY, (A, C))
    d.send(dp.Task(d.oid(1), A, b"x"))
    assert w.take() == [] and plain.take() == []
    net.head.on_timer(2_000)
    net.pump()
    (error,) = d.take()
    assert isinstance(error, dp.Error)
    # The closest workers (registry 0x2222) lack task C: the driver names its module.
    assert f"the workers of registry {WORKER_REGISTRY:#018x} lack tasks {C:#x}" in error.message
    # A driver of the plain worker's own registry, without names, runs there as ever.
    same = _driver(net, DRIVER_REGISTRY + 1, None)
    same.send(dp.Task(same.oid(1), A, b"x"))
    assert plain.take() == [dp.Task(same.oid(1), A, b"x")]


def test_the_last_serving_worker_gone_its_driver_waits_then_fails() -> None:
    net = Net(no_worker_grace_ns=1_000)
    w = _worker(net, WORKER_REGISTRY, (A, B))
    d = _driver(net, DRIVER_REGISTRY, (A,))
    net.head.connection_lost(w.link, 0)
    net.pump()
    assert WORKER_REGISTRY not in net.head._scheduler.registries.names_of  # nothing kept
    d.send(dp.Task(d.oid(1), A, b"x"))
    net.head.on_timer(2_000)
    net.pump()
    (error,) = d.take()
    assert isinstance(error, dp.Error) and "none of the connected workers" in error.message
    # A new superset worker serves the driver's next task.
    w2 = _worker(net, WORKER_REGISTRY, (A, B), port=7002)
    d.send(dp.Task(d.oid(2), A, b"x"), now=3_000)
    assert w2.take() == [dp.Task(d.oid(2), A, b"x")]


def test_a_second_task_names_is_a_protocol_error_and_the_worker_is_lost() -> None:
    net = Net()
    w = _worker(net, WORKER_REGISTRY, (A,))
    w.send(dp.TaskNames((A, B)))
    assert w.link not in net.head._wire.peers
    assert WORKER_REGISTRY not in net.head._scheduler.workers_of
    assert net.head._scheduler.registries.names_of == {}
    d = _driver(net, DRIVER_REGISTRY, (A,))
    d.send(dp.Task(d.oid(1), A, b"x"))
    assert not any(isinstance(e, dp.Task) for e in w.take())


def test_actors_of_a_served_driver_go_to_its_servers() -> None:
    net = Net()
    w = _worker(net, WORKER_REGISTRY, (A, B))
    d = _driver(net, DRIVER_REGISTRY, (A,))
    assert net.head._scheduler.workers_for(DRIVER_REGISTRY) == {net.head._wire.peers[w.link]}
    actor = d.oid(1)
    d.send(dp.ActorCreate(actor, A, b"state", 0))
    assert any(isinstance(e, dp.ActorCreate) for e in w.take())


def test_an_actor_waiting_goes_to_a_worker_once_its_names_say_it_serves() -> None:
    """(Found by the actor sim, seed 421: a worker's names come after its hello, when
    waiting actors were already looked at.)"""
    net = Net()
    d = _driver(net, DRIVER_REGISTRY, (A,))
    d.send(dp.ActorCreate(d.oid(1), A, b"state", 0))
    w = _worker(net, WORKER_REGISTRY, None)
    assert not any(isinstance(e, dp.ActorCreate) for e in w.take())
    w.send(dp.TaskNames((A, B)))
    assert any(isinstance(e, dp.ActorCreate) for e in w.take())
