"""After a head restart, a Dista driver hears why its actor calls wait: the actor waits for
the worker that hosted it to rejoin (`ERROR_AWAITS_HOST`, with how long at most), once per
driver and wait however many calls it makes meanwhile, and again when the actor runs."""

from __future__ import annotations

import dista_proto as dp

from .support.actors import SimActors, result_of
from .support.cluster import deliver_all
from .support.recovery import GRACE_NS
from .test_recovery_rules import _call, _host, _restart, _sim, _start_actor


def test_the_mark_carries_the_wait_and_reads_back() -> None:
    assert dp.awaited_ms(dp.awaits_host_mark(30_000)) == 30_000
    assert dp.awaited_ms(dp.awaits_host_mark(0)) == 0
    assert dp.awaited_ms(dp.ERROR_WARNING) is None
    assert dp.awaited_ms(dp.hosts_mark(6)) is None  # (another mark's bits above the byte)


def test_a_driver_hears_once_that_its_actor_waits_for_its_host_and_when_it_runs() -> None:
    sim = _sim(seed=15, workers=2)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=2)
    calls = [_call(sim, d, actor, v) for v in (1, 2, 3)]
    deliver_all(sim)
    host = _host(sim, actor)
    actors.run_all(host)
    sim.crash(host)  # the worker and the head die together
    _restart(sim)
    waits, runs = d.notices
    assert (waits.actor_id, runs.actor_id) == (actor, actor)
    assert 0 < waits.wait_ms <= GRACE_NS // 1_000_000  # the grace at most
    assert runs.wait_ms == 0 and "again" in runs.message
    assert not d.warnings and not d.failed  # a notice, not a failure
    assert [d.got[c] for c in calls] == [result_of(1, 1), result_of(3, 2), result_of(6, 3)]


def test_a_live_actor_placed_back_at_once_makes_no_notice() -> None:
    sim = _sim(seed=14, workers=2)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=1)
    _call(sim, d, actor, 1)
    deliver_all(sim)
    actors.run_all(_host(sim, actor))
    _restart(sim)  # its worker rejoins with it alive
    # Either it never waited, or it waited and runs again: never a wait left unsaid.
    assert [n.wait_ms == 0 for n in d.notices] in ([], [False, True])


def test_a_caller_calling_while_the_actor_waits_hears_once() -> None:
    sim = _sim(seed=17, workers=2, drivers=2)
    owner, caller = sim.drivers
    actors = SimActors(sim)
    actor = _start_actor(sim, owner, every=1)
    first = _call(sim, caller, actor, 1)
    deliver_all(sim)
    host = _host(sim, actor)
    actors.run_all(host)
    sim.crash(host)
    head = sim.restart_head()
    deliver_all(sim)
    for core in list(sim.lost):
        sim.reconnect(core)
    deliver_all(sim)
    assert actor in head._actors.hosts.awaiting  # it waits for its host
    more = [_call(sim, caller, actor, v) for v in (2, 3)]
    deliver_all(sim)
    sim.settle()
    for d in (owner, caller):
        assert [(n.actor_id, n.wait_ms > 0) for n in d.notices] == [(actor, True), (actor, False)]
    assert all(caller.answers[c] == ["value"] for c in (first, *more))
