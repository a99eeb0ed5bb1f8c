"""Rules for callers of an actor across head restarts: a caller away while the actor's
owner killed it still hears the actor is gone from a new head (or it would keep its calls
for good: recovery seeds 40368, 55376, 106051 and 208185 of the issue, with the sim of
then); an owner that killed its actor while the create's answer was lost with the head
hears how it ended, through heads in a row (seed 35954); and two callers resuming in either order get the order the head before ran their
calls in, when the actor comes back from a checkpoint (positions)."""

from __future__ import annotations

from .support.actors import ACTOR_TYPE, CAPABILITY, FAIL_CREATE, SimActors, result_of
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


def test_an_owner_whose_creates_answer_was_lost_with_heads_in_a_row_still_hears_it() -> None:
    sim = _sim(seed=25, workers=2)
    actors = SimActors(sim)
    d = sim.drivers[0]
    # A constructor that raises; the head's error for the create is on its way to the
    # owner when the owner's link breaks (the error is lost), then the head dies twice.
    actor = d.core.create_actor(ACTOR_TYPE, FAIL_CREATE, capability=CAPABILITY)
    d.core.kill_actor(actor)  # (killed before it heard: as in seed 35954)
    sim.driver_call(d)
    to_owner = [p for p in sim.pipes if p.target is d.core]
    for _ in range(1000):
        if any(p.chunks for p in to_owner):
            break
        busy = [p for p in sim.pipes if p.target is not d.core and (p.chunks or p.closed)]
        if busy:
            sim.deliver(busy[0])
        for w in sim.workers:
            actors.run_all(w)
    assert any(p.chunks for p in to_owner), "the head never answered the create"
    for pipe in to_owner:
        pipe.chunks.clear()  # lost with the link
    sim.cut(d.core, reset=True)
    for _ in range(2):
        sim.restart_head()
        deliver_all(sim)
        for core in list(sim.lost):
            if core is not d.core:
                sim.reconnect(core)  # the workers first
        deliver_all(sim)
    sim.reconnect(d.core)
    sim.settle()
    # It hears how its actor ended (before: nothing at all, and it kept it for good).
    failed = f"actor {actor:#x} could not be created: ValueError: the sim constructor raised"
    assert d.failed.get(actor) in (
        failed,
        f"actor {actor:#x} was killed by driver {d.core.number}",
    )
    assert d.answers[actor] == ["failed"]
    assert d.core.kept(actor) == 0


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
