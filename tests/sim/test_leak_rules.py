"""A driver's reference is dropped once: by its release, or by its leaving, never by both.

`Head._lose_driver` used to drop a reference for every object the leaving driver owned,
including ones it had already released. An object released while its task still ran then
went to -1 references when the driver left, so settling the task never forgot it.
"""

from __future__ import annotations

import dista_proto as dp

from .cluster import TASK_ID, Sim, arg, compute, deliver_all


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


def test_leaving_driver_does_not_free_what_another_drivers_task_still_takes() -> None:
    sim = Sim(seed=2, workers=1, drivers=2)
    sim.settle()
    owner, other = sim.drivers
    w = sim.workers[0]
    a = owner.core.submit(TASK_ID, arg(300))  # stored on the worker
    sim.driver_call(owner)
    sim.settle()
    assert a in owner.located
    slow = other.core.submit(TASK_ID, arg(16))
    sim.driver_call(other)
    deliver_all(sim)  # slow takes the only slot
    b = other.core.submit_after(TASK_ID, [slow, a], gather=True)  # waits for slow; refs a
    sim.driver_call(other)
    deliver_all(sim)
    owner.core.release(a)  # b's reference keeps a
    sim.driver_call(owner)
    deliver_all(sim)
    sim.disconnect(owner)
    deliver_all(sim)
    assert sim.head.tracked(a), "b still takes a"
    assert a in w.core.store
    other.live.extend([slow, b])
    sim.settle()
    inputs = (compute(arg(16), (), False), compute(arg(300), (), False))
    assert other.got[b] == compute(None, inputs, True)
    for oid in (slow, b):
        other.core.release(oid)
    sim.driver_call(other)
    sim.settle()
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)
    assert not w.core.store
