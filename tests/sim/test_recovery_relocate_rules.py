"""A driver whose fetch fails because the worker it was told of drained away while the
driver's head link was down asks, with its resume, where the object lives now, and reads
it there: before, it failed the object (recovery seed 14101384 of the issue, with the sim
of then: "fetch from 10.0.0.4:7000 failed: connection lost"; and seed 34258)."""

from __future__ import annotations

from .support.actors import SimActors, result_of
from .test_recovery_rules import _call, _holder, _host, _release, _sim, _start_actor


def test_a_fetch_from_a_worker_gone_while_the_head_link_was_down_reads_it_elsewhere() -> None:
    sim = _sim(seed=26, workers=3)
    SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=0)
    first = _call(sim, d, actor, 1)
    sim.settle()
    # A stored object (a call's stretched result) on a worker the driver was told of.
    big = _call(sim, d, actor, 4)
    sim.settle()
    host = _holder(sim, big)
    assert host is _host(sim, actor) and d.core._located[big] == host.address
    # The driver's head link goes down unseen by the head; meanwhile the worker drains,
    # its objects move, and it leaves: the news of the move never reaches the driver.
    sim.cut(d.core, reset=True, head_sees=False)
    sim.drain(host)
    while host.alive and sim.step():
        pass
    assert not host.alive
    # Now the driver reads the object from where it was told: the worker is gone.
    d.got.pop(big, None)
    d.core.fetch(big)
    sim.driver_call(d)
    sim.reconnect(d.core)
    sim.settle()
    assert big not in d.failed, d.failed.get(big)
    assert d.got[big] == result_of(5, 4)
    d.core.kill_actor(actor)
    sim.driver_call(d)
    _release(sim, d, first, big)
