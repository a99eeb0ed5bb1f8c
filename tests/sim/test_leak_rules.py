"""A driver's reference is dropped once: by its release, or by its leaving, never by both.

`Head._lose_driver` used to drop a reference for every object the leaving driver owned,
including ones it had already released. An object released while its task still ran then
went to -1 references when the driver left, so settling the task never forgot it.
"""

from __future__ import annotations

import dista_proto as dp

from .support.cluster import TASK_ID, Sim, arg, deliver_all


def test_released_object_of_a_running_task_is_forgotten_after_its_driver_leaves() -> None:
    sim = Sim(seed=1, workers=1, drivers=1)
    sim.settle()
    d = sim.drivers[0]
    w = sim.workers[0]
    a = d.core.submit(TASK_ID, arg(16))
    sim.driver_call(d)
    deliver_all(sim)
    assert [t.object_id for t in w.running] == [a]
    d.core.release(a)  # fire and forget: the task still runs, so the head keeps a
    sim.driver_call(d)
    deliver_all(sim)
    assert sim.head.tracked(a)
    sim.disconnect(d)  # the driver leaves before the task answers
    sim.settle()  # the task finishes; its answer is dropped and the task settles
    assert not sim.head.tracked(a)
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)
    assert not w.core.store


def test_another_drivers_task_cannot_take_an_object_so_its_leaving_driver_frees_it() -> None:
    # Another driver's task once took a as input and kept it past its owner's leaving; the
    # head now refuses to let a driver name an object that is not its own (Security rules).
    sim = Sim(seed=2, workers=1, drivers=2)
    sim.settle()
    owner, other = sim.drivers
    w = sim.workers[0]
    a = owner.core.submit(TASK_ID, arg(300))  # stored on the worker
    sim.driver_call(owner)
    sim.settle()
    assert a in owner.located
    b = other.core.submit_after(TASK_ID, [a])
    sim.driver_call(other)
    sim.settle()
    why = f"object {a:#x} is not this driver's: a driver may only use objects it holds"
    assert other.failed[b] == why
    owner.core.release(a)
    sim.driver_call(owner)
    sim.disconnect(owner)
    sim.settle()
    assert not sim.head.tracked(a)
    other.core.release(b)
    sim.driver_call(other)
    sim.settle()
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)
    assert not w.core.store
