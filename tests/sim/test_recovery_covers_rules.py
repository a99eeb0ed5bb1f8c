"""Rules for calls the checkpoint an actor came back from has already: sent again by their
callers after a head restart, they are answered from that checkpoint and take no place in
the actor's order (the restore answer tells the head which they are), so that a later
head restoring from the same checkpoint finds no place that no call ran at."""

from __future__ import annotations

from .support.actors import Instance, SimActors, result_of
from .support.cluster import deliver_all
from .test_recovery_rules import _call, _host, _release, _restart, _sim, _start_actor


def test_calls_the_restored_checkpoint_has_take_no_place_in_the_order() -> None:
    sim = _sim(seed=41, workers=3)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=1)  # a checkpoint after each call
    calls = [_call(sim, d, actor, v) for v in (1, 2, 3)]
    deliver_all(sim)
    host = _host(sim, actor)
    sim.cut(d.core, reset=True, head_sees=False)  # no answer reaches the driver
    while max(actors.disk.get(actor, {0: None})) < 3:  # run and checkpointed, each
        actors.run_all(host)
        deliver_all(sim)
    sim.crash(host)  # the worker and the head die together
    _restart(sim)  # restored from the checkpoint covering 3 calls; the driver resends 3
    assert actors.restored_newest[-1] == (actor, 3)
    assert [d.got[c] for c in calls] == [result_of(1, 1), result_of(3, 2), result_of(6, 3)]
    assert all(actors.runs[c] == 1 for c in calls)
    later = _call(sim, d, actor, 4)
    sim.settle()
    assert d.got[later] == result_of(10, 4)
    # The later call is the 4th in the order, not the 7th: the three resent calls took
    # no place (the head numbered none of them, and the worker counted none).
    (host,) = [w for w in sim.workers if w.alive and isinstance(w.hosted, Instance)]
    assert isinstance(host.hosted, Instance)
    assert (host.hosted.label, host.hosted.count) == (4, 4)
    assert max(actors.disk[actor]) == 4
    # A second restart from that checkpoint leaves the state exact.
    sim.crash(host)
    _restart(sim)
    again = _call(sim, d, actor, 5)
    sim.settle()
    assert d.got[again] == result_of(15, 5)
    d.core.kill_actor(actor)
    sim.driver_call(d)
    _release(sim, d, *calls, later, again)
