"""Rules for callers of an actor across head restarts: a caller away while the actor's
owner killed it still hears the actor is gone from a new head (or it would keep its calls
for good); and two callers resuming in either order get the order the head before ran
their calls in, when the actor comes back from a checkpoint (positions)."""

from __future__ import annotations

from .support.actors import SimActors, result_of
from .support.cluster import deliver_all
from .test_recovery_rules import _call, _host, _release, _sim, _start_actor


def test_a_caller_away_while_the_actor_was_killed_hears_it_is_gone_from_a_new_head() -> None:
    sim = _sim(seed=21, workers=2, drivers=2)
    SimActors(sim)
    owner, caller = sim.drivers
    actor = _start_actor(sim, owner, every=0)
    call = _call(sim, caller, actor, 5)
    sim.settle()
    assert caller.got[call] == result_of(5, 5)
    assert caller.core.kept(actor) == 1  # answered, and kept: no checkpoint covers it
    # The caller's link breaks; meanwhile the owner kills the actor; then the head dies.
    sim.cut(caller.core, reset=True)
    deliver_all(sim)
    owner.core.kill_actor(actor)
    sim.driver_call(owner)
    sim.settle()
    sim.restart_head()
    deliver_all(sim)
    sim.reconnect(owner.core)  # the owner resumes first, without the actor
    sim.settle()
    sim.reconnect(caller.core)  # the caller resends its answered call, and hears
    sim.settle()
    assert caller.core.kept(actor) == 0


def test_two_callers_resuming_in_either_order_replay_in_the_order_the_head_ran_them() -> None:
    for first in (0, 1):
        sim = _sim(seed=22 + first, workers=2, drivers=2)
        actors = SimActors(sim)
        owner, caller = sim.drivers
        actor = _start_actor(sim, owner, every=0)
        # Interleaved, each answered (with its place) before the next is made.
        callers = (owner, caller, owner, caller)
        made = []
        for n, d in enumerate(callers):
            made.append(_call(sim, d, actor, 10**n))
            sim.settle()
        answers = [d.got[c] for d, c in zip(callers, made, strict=True)]
        assert answers == [result_of(1, 1), result_of(11, 10), result_of(111, 100),
                           result_of(1111, 1000)]  # fmt: skip
        # The host and the head die together: no live copy, no checkpoint; the callers
        # resume in either order, and the actor is rebuilt from its create and their calls.
        sim.crash(_host(sim, actor))
        sim.restart_head()
        deliver_all(sim)
        for d in (sim.drivers[first], sim.drivers[1 - first]):
            sim.reconnect(d.core)
            deliver_all(sim)
        for core in list(sim.lost):
            sim.reconnect(core)  # the surviving worker
        sim.settle()
        # Each call ran again, for the state only, in the order the head before ran them:
        # each reached the state its answer came from.
        assert [actors.runs[c] for c in made] == [2, 2, 2, 2], [actors.runs[c] for c in made]
        assert [actors.outcomes[c] for c in made] == answers
        later = _call(sim, owner, actor, 0)
        sim.settle()
        assert owner.got[later] == result_of(1111, 0)
        owner.core.kill_actor(actor)
        sim.driver_call(owner)
        _release(sim, owner, later)
