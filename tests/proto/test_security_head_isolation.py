"""Isolation between drivers at the head: a driver names only its own objects, and a worker
answers only the tasks it was given (docs/protocol.md "Security rules")."""

from __future__ import annotations

import pytest

import dista_proto as dp

from .support.security_peers import Net, Raw

TASK = 0x5EED


def _foreign(oid: int) -> str:
    return f"object {oid:#x} is not this driver's: a driver may only use objects it holds"


def _victim_with_value() -> tuple[Net, Raw, Raw, Raw, int]:
    """A head, a victim driver whose first task has answered inline, a thief, a worker."""
    net = Net()
    w = net.worker()
    victim = net.driver()
    thief = net.driver()
    a = victim.oid(1)
    victim.send(dp.Task(a, TASK, b"arg"))
    assert w.take() == [dp.Task(a, TASK, b"arg")]
    w.send(dp.Result(a, b"secret"))
    assert victim.take() == [dp.Result(a, b"secret")]
    return net, victim, thief, w, a


def test_a_task_after_naming_another_drivers_object_is_refused_naming_both() -> None:
    net, victim, thief, w, a = _victim_with_value()
    before = net.head.stats()
    b = thief.oid(1)
    thief.send(dp.TaskAfter(b, TASK, (a,)))
    assert thief.take() == [dp.Error(a, _foreign(a)), dp.Error(b, _foreign(a))]
    assert thief.closed is None
    assert w.take() == []  # not queued, never dispatched
    assert net.head.stats() == before
    assert not net.head.tracked(b)
    # Many results: each of the task's own IDs fails, the gather's own inputs are fine.
    c = thief.oid(2)
    thief.send(dp.Task(c, TASK, b"mine"))
    thief.send(dp.TaskAfter(thief.oid(3), TASK, (c, a), gather=True, results=2))
    assert thief.take() == [
        dp.Error(a, _foreign(a)),
        dp.Error(thief.oid(3), _foreign(a)),
        dp.Error(thief.oid(4), _foreign(a)),
    ]
    # The victim's object is whole: its release forgets it.
    victim.send(dp.Release(a))
    assert not net.head.tracked(a)
    assert victim.take() == []


def test_release_cancel_and_claim_of_another_drivers_object_are_refused() -> None:
    net, victim, thief, w, a = _victim_with_value()
    running = victim.oid(2)
    victim.send(dp.Task(running, TASK, b"slow"))
    assert w.take() == [dp.Task(running, TASK, b"slow")]
    before = net.head.stats()
    thief.send(
        dp.Release(a),
        dp.Cancel(running),
        dp.Cancel(running, dp.CANCEL_FORCE),
        dp.Claim(a),
    )
    assert thief.take() == [
        dp.Error(a, _foreign(a)),
        dp.Error(running, _foreign(running)),
        dp.Error(running, _foreign(running)),
        dp.Error(a, _foreign(a)),
    ]
    assert thief.closed is None and w.closed is None
    assert net.head.stats() == before
    assert w.take() == []  # the running task was neither freed nor its worker stopped
    w.send(dp.Result(running, b"done"))
    assert victim.take() == [dp.Result(running, b"done")]
    victim.send(dp.Release(a), dp.Release(running))
    assert victim.take() == []
    assert net.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)


def test_a_driver_core_reads_the_refusal_of_an_id_it_never_minted_as_a_failure() -> None:
    core = dp.Driver(registry_hash=1)
    core.start(0)
    core.decisions()
    core.receive_data(dp.HEAD_LINK, dp.encode_event(dp.Welcome(2, 0x51), from_head=True), 0)
    core.decisions()
    foreign = 1 << dp.ID_BITS | 1
    core.receive_data(
        dp.HEAD_LINK, dp.encode_event(dp.Error(foreign, _foreign(foreign)), from_head=True), 0
    )
    assert core.decisions() == [dp.ObjectFailed(foreign, _foreign(foreign))]


def _not_given(oid: int) -> str:
    return (
        f"object {oid:#x} is not a task or actor call this worker was given "
        "(or it was taken back): its answer is dropped"
    )


def test_answers_from_a_worker_that_was_not_given_the_task_are_dropped() -> None:
    net = Net()
    w = net.worker()
    victim = net.driver()
    a = victim.oid(1)
    victim.send(dp.Task(a, TASK, b"arg"))
    assert w.take() == [dp.Task(a, TASK, b"arg")]
    rogue = net.worker(port=7999)
    before = net.head.stats()
    rogue.send(
        dp.Span(a, 1, 2, 3),
        dp.Result(a, b"forged"),
        dp.Stored(a, 1 << 20),
        dp.Error(a, "forged failure"),
        dp.Span(a, 1, 1, 1, dp.SPAN_WITHDRAWN),
        dp.Span(0, 0, 0, 0, dp.SPAN_ALIVE),  # a heartbeat is no answer: nothing said
    )
    assert rogue.take() == [
        dp.Error(a, _not_given(a)),
        dp.Error(a, _not_given(a)),
        dp.Free(a),  # what it says it stored is freed there, and the object kept here
        dp.Error(a, _not_given(a)),
        dp.Error(a, _not_given(a)),
        dp.Error(a, _not_given(a)),
    ]
    assert rogue.closed is None
    assert victim.take() == []
    assert net.head.stats() == before
    w.send(dp.Span(a, 1, 2, 3), dp.Result(a, b"right"))
    assert victim.take() == [dp.Result(a, b"right")]
    assert w.take() == []
    rogue.send(dp.Result(a, b"late forgery"))
    assert victim.take() == []
    assert rogue.take() == [dp.Error(a, _not_given(a))]


def test_an_actor_worker_answering_another_actors_call_is_dropped() -> None:
    net = Net()
    w1 = net.worker(port=7001)
    w2 = net.worker(port=7002)
    alice, bob = net.driver(), net.driver()
    hosts = {}
    for owner in (alice, bob):
        actor = owner.oid(1)
        owner.send(dp.ActorCreate(actor, TASK, b"init", 0))
        host = next(w for w in (w1, w2) if dp.ActorCreate(actor, TASK, b"init") in w.take())
        host.send(dp.Result(actor, b""))
        assert owner.take() == [dp.Result(actor, b"")]
        hosts[owner.number] = host
    call = alice.oid(2)
    alice.send(dp.ActorCall(call, TASK, alice.oid(1), b"m"))
    alices, bobs = hosts[alice.number], hosts[bob.number]
    assert alices.take() == [dp.ActorCall(call, TASK, alice.oid(1), b"m")]
    bobs.send(dp.Result(call, b"forged"), dp.Error(call, "forged"))
    assert bobs.take() == [dp.Error(call, _not_given(call))] * 2
    assert alice.take() == []
    alices.send(dp.Result(call, b"right"))
    assert alice.take() == [dp.Result(call, b"right")]


def test_a_task_of_more_results_than_max_results_is_refused_at_once() -> None:
    net = Net()
    net.worker()
    d = net.driver()
    why = f"a task has at most {dp.MAX_RESULTS} results, not {1 << 40}"
    d.send(dp.TaskMany(d.oid(1), TASK, 1 << 40, b""))  # 29 bytes once made 2**40 objects
    d.send(dp.TaskAfter(d.oid(2), TASK, (), gather=True, results=dp.MAX_RESULTS + 1))
    assert d.take() == [
        dp.Error(d.oid(1), why),
        dp.Error(d.oid(2), f"a task has at most {dp.MAX_RESULTS} results, not 65537"),
    ]
    assert net.head.stats().objects == 0 and d.closed is None
    d.send(dp.TaskMany(d.oid(3), TASK, dp.MAX_RESULTS, b""))
    assert net.head.stats().objects == dp.MAX_RESULTS
    core = dp.Driver(registry_hash=1)
    core.start(0)
    core.receive_data(dp.HEAD_LINK, dp.encode_event(dp.Welcome(2, 1), from_head=True), 0)
    with pytest.raises(dp.LocalProtocolError, match="at most 65536 results, not 65537"):
        core.submit_many(TASK, b"", dp.MAX_RESULTS + 1)
