"""Security rules over whole cores in memory: the inline cap, end to end through a worker
core and a driver core (docs/protocol.md "Security rules")."""

from __future__ import annotations

import dista_proto as dp

from .support.cluster import TASK_ID, Sim, arg, compute


def test_past_the_inline_cap_results_come_stored_and_the_values_are_right() -> None:
    sim = Sim(seed=11, workers=2, drivers=2)
    sim.head.inline_cap_bytes = 500
    sim.settle()
    d, other = sim.drivers
    oids = []
    for i in range(12):  # 100-byte results, inline under the sim's threshold
        oids.append(d.core.submit(TASK_ID, arg(100, i)))
        d.live.append(oids[-1])
        sim.driver_call(d)
        sim.settle()
    assert all(d.got[o] == compute(arg(100, i), (), False) for i, o in enumerate(oids))
    stored = {o for o in oids if o in d.located}
    assert len(stored) >= 6  # past 500 bytes held, each was stored and fetched
    assert sim.head.inline_bytes(d.core.number) <= 600
    mine = other.core.submit(TASK_ID, arg(100))
    sim.driver_call(other)
    sim.settle()
    assert mine not in other.located and other.got[mine] == compute(arg(100), (), False)
    for o in oids:
        d.core.release(o)
    other.core.release(mine)
    sim.driver_call(d)
    sim.driver_call(other)
    sim.settle()
    assert sim.head.inline_bytes(d.core.number) == 0
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 2)
    assert not any(w.core.store for w in sim.workers)
