"""Rules for a call's answer and place across head restarts: a call a checkpoint covers
whose answer has not reached its caller is sent again until it does (a new head answers it
from the answers the checkpoint carries); and a call parked for its actor's creator, taken
after its caller's resume is over, keeps its place in the order the head before ran it."""

from __future__ import annotations

from .support.actors import SimActors, result_of
from .support.cluster import deliver_all
from .test_recovery_rules import _call, _host, _reconnect_all, _release, _sim, _start_actor


def test_a_covered_call_whose_answer_did_not_come_is_answered_after_a_head_restart() -> None:
    sim = _sim(seed=31, workers=2)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=1)  # a checkpoint after each call
    call = _call(sim, d, actor, 4)  # (its answer is stored on the actor's worker)
    deliver_all(sim)
    host = _host(sim, actor)
    # The driver's link breaks before the answer comes; the call runs and a checkpoint
    # covers it; then the head loses the worker holding the answer too.
    sim.cut(d.core, reset=True)
    actors.run_all(host)
    deliver_all(sim)
    assert sorted(actors.disk[actor]) == [1]
    sim.cut(host.core, reset=True)
    deliver_all(sim)
    # The driver reconnects to the same head: the call is covered, and its answer cannot
    # be given again yet (its holder is away). Then the head dies.
    sim.reconnect(d.core)
    deliver_all(sim)
    assert d.core.kept(actor) == 0 and call not in d.answers
    sim.restart_head()
    deliver_all(sim)
    _reconnect_all(sim)
    sim.settle()
    # The call did not run twice, and its answer came (from the checkpoint's answers).
    assert actors.runs[call] == 1
    assert d.answers[call] in (["value"], ["located", "value"]), d.answers[call]
    assert d.got[call] == result_of(4, 4)
    d.core.kill_actor(actor)
    sim.driver_call(d)
    _release(sim, d, call)


def test_calls_parked_for_the_actors_owner_keep_their_place_once_taken() -> None:
    sim = _sim(seed=32, workers=2, drivers=2)
    actors = SimActors(sim)
    owner, caller = sim.drivers
    actor = _start_actor(sim, owner, every=0)  # no checkpoint: rebuilt from the calls
    made = [_call(sim, caller, actor, v) for v in (1, 10)]
    deliver_all(sim)
    host = _host(sim, actor)
    # The caller's link breaks before its answers come (they never carry their places),
    # unseen by the head (which would have the calls of a caller gone checkpointed); the
    # owner's later call is answered with its place (3).
    sim.cut(caller.core, reset=True, head_sees=False)
    actors.run_all(host)
    deliver_all(sim)
    later = _call(sim, owner, actor, 100)
    sim.settle()
    assert owner.got[later] == result_of(111, 100)
    # The host and the head die together. The caller resumes first: its calls wait for
    # the actor's owner, and are taken once it resumes (the caller's resume over by then).
    sim.crash(host)
    head = sim.restart_head()
    deliver_all(sim)
    sim.reconnect(caller.core)
    deliver_all(sim)
    assert actor in head._resume.parked
    _reconnect_all(sim)
    sim.settle()
    # Rebuilt with the calls in the order the head before ran them: the caller's in the
    # places before the owner's, which reaches the state its answer came from.
    assert [actors.runs[c] for c in (*made, later)] == [2, 2, 2]
    assert actors.outcomes[later] == result_of(111, 100)
    assert [caller.got[c] for c in made] == [result_of(1, 1), result_of(11, 10)]
    owner.core.kill_actor(actor)
    sim.driver_call(owner)
    _release(sim, owner, later)
    _release(sim, caller, *made)
