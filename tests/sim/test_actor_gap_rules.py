"""Smaller actor rules, driven step by step over the simulated cluster: which worker an actor
goes to when only some have a checkpoint store, actor calls in the head's timeline, and what
status says when actors hold every worker.
"""

from __future__ import annotations

import dista_proto as dp
from dista_proto._head_actor_placement import NO_STORE

from .support.actors import ACTOR_TYPE, ADD, CAPABILITY, SimActors, result_of, u64
from .support.cluster import TASK_ID, Sim, SimDriver, SimObserver, SimWorker, arg, compute


def _cluster(seed: int, stores: list[bool]) -> tuple[Sim, SimActors]:
    """Workers joining in order (10.0.0.1, 10.0.0.2, ...), each with a store or not."""
    sim = Sim(seed=seed, workers=0, drivers=1)
    actors = SimActors(sim)
    for store in stores:
        sim.add_worker(checkpoints=store)
    sim.settle()
    return sim, actors


def _create(sim: Sim, d: SimDriver, every: int = 0) -> int:
    actor = d.core.create_actor(ACTOR_TYPE, u64(0), every, capability=CAPABILITY)
    sim.driver_call(d)
    return actor


def _call(sim: Sim, d: SimDriver, actor: int, value: int) -> int:
    d.core.open_actor(actor, CAPABILITY)
    oid = d.core.call_actor(actor, ADD, u64(value))
    d.live.append(oid)
    sim.driver_call(d)
    return oid


def _status_line(sim: Sim, prefix: str) -> str:
    lines = [x for x in sim.head.status().splitlines() if x.startswith(prefix)]
    assert len(lines) == 1, sim.head.status()
    return lines[0]


def test_an_actor_prefers_a_worker_with_a_checkpoint_store() -> None:
    # Both free; the store-less one comes first by address (the old tie-break).
    sim, actors = _cluster(seed=21, stores=[False, True])
    bare, stored = sim.workers
    actor = _create(sim, sim.drivers[0])
    sim.settle()
    assert actors.host(actor) is stored
    assert _status_line(sim, f"worker {bare.address}:").endswith(", no checkpoint store")
    assert _status_line(sim, f"worker {stored.address}:").endswith(", checkpoint store")


def test_an_actor_without_a_store_worker_still_starts_on_one_without() -> None:
    sim, actors = _cluster(seed=22, stores=[False])
    d = sim.drivers[0]
    actor = _create(sim, d)
    call = _call(sim, d, actor, 5)
    sim.settle()
    assert actors.host(actor) is sim.workers[0] and d.got[call] == result_of(5, 5)


def _checkpointed_then_lost(sim: Sim, actors: SimActors) -> tuple[int, list[int], SimWorker]:
    """An actor on the store worker, a checkpoint covering its 2 calls, then its worker
    SIGKILLed: the actor, its calls, the worker it was on."""
    d = sim.drivers[0]
    actor = _create(sim, d, every=2)
    calls = [_call(sim, d, actor, v) for v in (1, 2)]
    sim.settle()
    (record,) = [a for a in sim.head.actors() if a.actor_id == actor]
    assert record.covered == 2
    host = actors.host(actor)
    assert host is not None
    sim.crash(host)
    sim.settle()
    return actor, calls, host


def test_a_restore_never_lands_on_a_worker_without_a_store_and_waits_saying_why() -> None:
    sim, actors = _cluster(seed=23, stores=[True, False])
    d = sim.drivers[0]
    actor, _, _ = _checkpointed_then_lost(sim, actors)
    later = _call(sim, d, actor, 3)
    sim.settle()
    assert actors.host(actor) is None  # not on the free worker without a store
    assert later not in d.answers
    assert _status_line(sim, f"actor {actor:#x} ") == (
        f"actor {actor:#x} (type {ACTOR_TYPE:#x}): WAITING: {NO_STORE}; 3 calls queued"
    )
    new = sim.add_worker(checkpoints=True)
    sim.settle()
    assert actors.host(actor) is new
    assert actors.starts[-1] == (actor, 2)  # restored from the checkpoint, not built anew
    assert d.got[later] == result_of(6, 3)


def test_a_restore_with_no_store_anywhere_fails_after_the_no_worker_grace() -> None:
    sim, actors = _cluster(seed=24, stores=[True, False])
    d = sim.drivers[0]
    actor, calls, _ = _checkpointed_then_lost(sim, actors)
    head = sim.head
    deadline = head.next_deadline()
    assert deadline is not None  # the grace runs: no worker with a store is connected
    head.on_timer(deadline)
    sim._run_decisions(head)
    sim.settle()
    why = d.failed[actor]
    assert why.startswith(f"no worker can host actor {actor:#x} after losing its worker")
    assert why.endswith(f"{NO_STORE} (waited 10 s for one)")
    assert all(d.got[c] for c in calls)  # answered before: they stay answered


def test_actor_calls_are_in_the_timeline_under_their_class_and_method() -> None:
    sim, _ = _cluster(seed=26, stores=[True, True])
    d = sim.drivers[0]
    actor = _create(sim, d)
    calls = [_call(sim, d, actor, v) for v in (1, 2, 3)]
    task = d.core.submit(TASK_ID, arg(16, 1))
    sim.driver_call(d)
    sim.settle()
    seen = SimObserver(sim).ask(dp.Timeline())
    assert isinstance(seen, dp.Timeline) and seen.records is not None
    by_oid = {r.object_id: r for r in seen.records}
    assert set(by_oid) == {*calls, task}
    label = dp.actor_call_task_id(ACTOR_TYPE, ADD)
    for oid in calls:
        r = by_oid[oid]
        assert r.task_id == label != ADD  # the method's ID alone names no class
        assert 0 < r.arrived <= r.started <= r.ended and r.settled > 0
        assert (r.submitted, r.queued, r.dispatched) == (0, 0, 0)  # unknown for a call
    assert by_oid[task].task_id == TASK_ID
    d.core.request_timeline()  # the caller takes its own, calls included
    sim.driver_call(d)
    sim.settle()
    assert {r.object_id for r in d.timeline} == {*calls, task}


def test_status_says_why_tasks_wait_where_actors_hold_every_worker() -> None:
    sim, _ = _cluster(seed=27, stores=[True, True])
    d = sim.drivers[0]
    actors = [_create(sim, d) for _ in range(2)]
    sim.settle()
    assert all(a in d.got for a in actors)
    task = d.core.submit(TASK_ID, arg(16, 4))
    sim.driver_call(d)
    sim.settle()
    assert task not in d.answers
    assert _status_line(sim, f"registry {sim.registry:#018x}:") == (
        f"registry {sim.registry:#018x}: drivers 1, workers 2, queued 1  every worker of "
        f"registry {sim.registry:#018x} hosts an actor (2 actors): its tasks wait: start "
        "another worker"
    )
    sim.add_worker()
    sim.settle()
    assert d.got[task] == compute(arg(16, 4), (), False)
    assert "hosts an actor" not in _status_line(sim, f"registry {sim.registry:#018x}:")
