"""Actor rules of the cores, each driven step by step over the simulated cluster.

The binding's side (building actors, running calls, the checkpoint store) is
`tests/sim/support/actors.py`; here each test moves bytes with `deliver_all` and runs the actor
work of one worker at a time by hand, so every interleaving is the one the test names.
"""

from __future__ import annotations

import dista_proto as dp
from dista_proto._head_records import ActorRecord, ActorState

from .support.actors import (
    ACTOR_TYPE,
    ADD,
    CAPABILITY,
    FAIL_CREATE,
    RAISE,
    RAISED,
    SimActors,
    answer_count,
    result_of,
    u64,
)
from .support.cluster import TASK_ID, Sim, SimDriver, SimWorker, arg, compute, deliver_all

#: What one of these tests' calls (an 8-byte argument) counts against a keep budget.
CALL = dp.KEPT_CALL_BYTES + 8

SECOND = 1_000_000_000


def _cluster(seed: int, workers: int = 2, drivers: int = 1, **head: int) -> tuple[Sim, SimActors]:
    sim = Sim(seed=seed, workers=workers, drivers=drivers)
    for name, value in head.items():
        setattr(sim.head, name, value)
    actors = SimActors(sim)
    sim.settle()
    return sim, actors


def _record(sim: Sim, actor: int) -> ActorRecord:
    (record,) = [a for a in sim.head.actors() if a.actor_id == actor]
    return record


def _host(sim: Sim, actor: int) -> SimWorker:
    record = _record(sim, actor)
    assert record.worker is not None
    (w,) = [w for w in sim.workers if w.alive and w.address == record.worker.address]
    return w


def _create(sim: Sim, d: SimDriver, every: int = 0, initial: int = 0) -> int:
    actor = d.core.create_actor(ACTOR_TYPE, u64(initial), every, capability=CAPABILITY)
    sim.driver_call(d)
    return actor


def _call(sim: Sim, d: SimDriver, actor: int, value: int, method: int = ADD) -> int:
    d.core.open_actor(actor, CAPABILITY)  # a handle carries the capability
    oid = d.core.call_actor(actor, method, u64(value))
    d.live.append(oid)  # so that the sim fetches a stored answer
    sim.driver_call(d)
    return oid


def _checkpoint(sim: Sim, d: SimDriver, actor: int) -> int:
    oid = d.core.checkpoint_actor(actor)
    sim.driver_call(d)
    return oid


def _once(d: SimDriver, oid: int) -> None:
    """``oid`` was answered to ``d`` exactly once (see `answer_count`)."""
    assert answer_count(d.answers.get(oid)) == 1, f"{oid:#x}: {d.answers.get(oid)}"


def test_a_checkpoint_written_while_a_newer_one_is_in_flight_is_still_there_to_restore() -> None:
    # Two checkpoint asks, each after a call, sent at once: the second checkpoint frame
    # leaves the head before it hears that the first is written, so it names no checkpoint
    # to keep. Writing it must not remove the first, which the head then restores from.
    sim, actors = _cluster(seed=1)
    d = sim.drivers[0]
    actor = _create(sim, d)
    deliver_all(sim)
    w = _host(sim, actor)
    actors.run_all(w)
    deliver_all(sim)
    first = _call(sim, d, actor, 5)
    ask_first = _checkpoint(sim, d, actor)
    second = _call(sim, d, actor, 6)
    ask_second = _checkpoint(sim, d, actor)
    deliver_all(sim)
    assert [(type(x).__name__, getattr(x, "keep", "-")) for x in w.actor_work] == [
        ("CallActor", "-"),
        ("CheckpointActor", None),
        ("CallActor", "-"),
        ("CheckpointActor", None),
    ]
    actors.run(w)  # the first call
    actors.run(w)  # the checkpoint covering 1 call
    deliver_all(sim)  # the head hears it is written: its restore point
    assert d.got[ask_first] == b"" and _record(sim, actor).covered == 1
    actors.run(w)  # the second call
    actors.run(w)  # the checkpoint covering 2 calls: the one covering 1 stays
    assert sorted(actors.disk[actor]) == [1, 2]
    sim.crash(w)  # before the head hears of it
    sim.settle()
    actors.check_restore_points()
    assert actors.starts[-1] == (actor, 1)  # restored from the first; the second runs again
    assert d.got[first] == result_of(5, 5) and d.got[second] == result_of(11, 6)
    _once(d, first)
    _once(d, second)
    # The second ask is sent again to the new worker after the call it follows; answered once.
    assert d.answers[ask_first] == ["value"] and d.answers[ask_second] == ["value"]
    assert _record(sim, actor).covered == 2
    host = actors.host(actor)
    assert host is not None and host is not w
    assert getattr(host.hosted, "total", None) == 11


def _status_line(sim: Sim, actor: int) -> str:
    lines = [x for x in sim.head.status().splitlines() if x.startswith(f"actor {actor:#x} ")]
    assert len(lines) <= 1
    return lines[0] if lines else ""


def _finish(sim: Sim, w: SimWorker, oid: int) -> None:
    task = next(t for t in w.running if t.object_id == oid)
    w.running.remove(task)
    value = compute(task.argument, task.inputs, task.gather)
    w.core.task_done(oid, [value], sim.now, sim.now + 1)
    sim._run_decisions(w.core)


def _release_all(sim: Sim, d: SimDriver, *oids: int) -> None:
    for oid in oids:
        d.core.release(oid)
    sim.driver_call(d)
    sim.settle()


def test_an_actor_takes_a_whole_worker_and_tasks_go_to_the_others() -> None:
    sim, _ = _cluster(seed=2, workers=2)
    d = sim.drivers[0]
    actor = _create(sim, d)
    sim.settle()
    assert d.answers[actor] == ["value"] and d.got[actor] == b""
    host = _host(sim, actor)
    (other,) = [w for w in sim.workers if w is not host]
    tasks = [d.core.submit(TASK_ID, arg(16, i)) for i in range(4)]
    call = _call(sim, d, actor, 3)
    while sim.step():
        assert not host.running, "a task went to the worker hosting an actor"
    assert all(d.got[t] == compute(arg(16, i), (), False) for i, t in enumerate(tasks))
    assert d.got[call] == result_of(3, 3)
    assert sim.runs.keys() == set(tasks)
    status = sim.head.status()
    assert f"worker {host.address}: ready, hosts actor {actor:#x}" in status
    assert f"worker {other.address}: ready, running 0" in status
    line = _status_line(sim, actor)
    assert line.startswith(
        f"actor {actor:#x} (type {ACTOR_TYPE:#x}): ready on worker {host.address}"
    )
    assert f"calls 1 (unanswered 0), no checkpoint yet, kept 1 calls ({CALL} bytes)" in line


def test_an_actor_waits_while_every_worker_hosts_one_and_starts_on_a_new_worker() -> None:
    sim, actors = _cluster(seed=3, workers=1)
    d = sim.drivers[0]
    first = _create(sim, d)
    second = _create(sim, d)
    call = _call(sim, d, second, 7)
    sim.settle()
    assert d.got[first] == b"" and second not in d.answers and call not in d.answers
    assert _record(sim, second).state is ActorState.WAITING
    assert _status_line(sim, second) == (
        f"actor {second:#x} (type {ACTOR_TYPE:#x}): WAITING: every worker of its registry "
        "hosts an actor: start another worker; 1 calls queued"
    )
    assert sim.head.next_deadline() is None  # its registry has workers: no grace runs out
    new = sim.add_worker()
    sim.settle()
    assert d.got[second] == b"" and d.got[call] == result_of(7, 7)
    assert actors.host(second) is new
    assert _status_line(sim, second).startswith(f"actor {second:#x} (type {ACTOR_TYPE:#x}): ready")


def test_a_worker_kept_for_an_actor_takes_no_new_tasks_and_starts_it_when_they_finish() -> None:
    sim = Sim(seed=4, workers=1, drivers=1, worker_slots=2)
    SimActors(sim)
    sim.settle()
    d, w = sim.drivers[0], sim.workers[0]
    running = [d.core.submit(TASK_ID, arg(16, i)) for i in range(2)]
    sim.driver_call(d)
    deliver_all(sim)
    assert len(w.running) == 2
    actor = _create(sim, d)
    call = _call(sim, d, actor, 9)
    later = d.core.submit(TASK_ID, arg(16, 9))
    sim.driver_call(d)
    deliver_all(sim)
    assert _record(sim, actor).state is ActorState.WAITING
    assert "WAITING: worker 10.0.0.1:7000 finishes its 2 tasks first; 1 calls queued" in (
        _status_line(sim, actor)
    )
    assert f"worker {w.address}: ready, kept for actor {actor:#x}, running 2" in (
        sim.head.status()
    )
    assert [t.object_id for t in w.running] == running  # the later task was not sent here
    _finish(sim, w, running[0])
    deliver_all(sim)
    assert not w.actor_work and len(w.running) == 1  # one task still runs: no actor yet
    _finish(sim, w, running[1])
    deliver_all(sim)
    assert [type(x) for x in w.actor_work] == [dp.StartActor, dp.CallActor]
    assert not w.running
    sim.settle()
    assert d.got[call] == result_of(9, 9)
    assert later not in d.answers  # queued: the only worker hosts the actor
    assert "queued 1" in sim.head.status()
    d.core.kill_actor(actor)
    sim.driver_call(d)
    sim.settle()
    assert d.got[later] == compute(arg(16, 9), (), False)  # the freed worker ran it
    _release_all(sim, d, *running, later, call)
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)


def test_a_constructor_error_fails_the_actor_and_its_calls() -> None:
    sim, _ = _cluster(seed=5, workers=1)
    d = sim.drivers[0]
    actor = d.core.create_actor(ACTOR_TYPE, FAIL_CREATE, capability=CAPABILITY)
    calls = [_call(sim, d, actor, v) for v in (1, 2)]
    sim.settle()
    why = f"actor {actor:#x} could not be created: ValueError: the sim constructor raised"
    assert d.failed[actor] == why and d.answers[actor] == ["failed"]
    for call in calls:
        assert d.failed[call] == why and d.answers[call] == ["failed"]
    assert d.core.kept(actor) == 0 and d.core.kept_bytes == 0
    late = _call(sim, d, actor, 3)
    sim.settle()
    assert d.failed[late] == f"actor {actor:#x} is gone: {why}"
    task = d.core.submit(TASK_ID, arg(16))
    sim.driver_call(d)
    sim.settle()
    assert task in d.got  # the worker runs tasks again
    _release_all(sim, d, *calls, late, task)
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)
    assert _status_line(sim, actor) == ""  # a dead actor has no status line


def test_kill_fails_the_unanswered_calls_and_frees_the_worker_for_tasks() -> None:
    sim, actors = _cluster(seed=6, workers=1)
    d = sim.drivers[0]
    actor = _create(sim, d, every=1)
    calls = [_call(sim, d, actor, v) for v in (1, 2, 3)]
    deliver_all(sim)
    w = sim.workers[0]
    actors.run(w)  # built
    actors.run(w)  # the first call
    actors.run(w)  # its checkpoint
    deliver_all(sim)
    assert d.got[calls[0]] == result_of(1, 1)
    assert sorted(actors.disk[actor]) == [1]
    d.core.kill_actor(actor)
    sim.driver_call(d)
    deliver_all(sim)
    why = f"actor {actor:#x} was killed by driver {d.core.number}"
    assert d.failed[calls[1]] == why and d.failed[calls[2]] == why
    assert d.core.kept(actor) == 0 and d.core.kept_bytes == 0
    task = d.core.submit(TASK_ID, arg(16))
    sim.driver_call(d)
    # The worker runs the calls it had (their answers dropped), stops the actor, runs the task.
    sim.settle()
    assert d.got[task] == compute(arg(16), (), False)
    for call in calls:
        assert len(d.answers[call]) == 1, d.answers[call]
    assert actor in actors.stopped and actor not in actors.disk  # killed: checkpoints removed
    assert sim.head.stats().pending == 0
    _release_all(sim, d, *calls, task)
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)


def test_a_kill_after_calls_lets_the_calls_already_made_run_first() -> None:
    # The runtime's kill when the creator's last handle goes (`KILL_AFTER_CALLS`).
    sim, actors = _cluster(seed=16, workers=1)
    d = sim.drivers[0]
    actor = _create(sim, d)
    calls = [_call(sim, d, actor, v) for v in (1, 2, 3)]
    d.core.kill_actor(actor, after_calls=True)
    sim.driver_call(d)
    deliver_all(sim)
    assert _record(sim, actor).state is not ActorState.DEAD  # its calls are still to run
    sim.settle()
    assert [d.got[c] for c in calls] == [result_of(s, v) for s, v in ((1, 1), (3, 2), (6, 3))]
    assert _record(sim, actor).state is ActorState.DEAD and actor in actors.stopped
    assert "dropped its last handle" in d.failed[actor]
    task = d.core.submit(TASK_ID, arg(16))  # its worker runs tasks again
    sim.driver_call(d)
    sim.settle()
    assert d.got[task] == compute(arg(16), (), False)
    _release_all(sim, d, *calls, task)
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)


def test_a_driver_that_disconnects_takes_its_actors_along() -> None:
    sim, _ = _cluster(seed=7, workers=1, drivers=2)
    owner, other = sim.drivers
    actor = _create(sim, owner)
    sim.settle()
    answered = _call(sim, other, actor, 4)
    sim.settle()
    unanswered = _call(sim, other, actor, 5)
    deliver_all(sim)  # at the worker, not run yet
    sim.disconnect(owner)
    sim.settle()
    why = f"actor {actor:#x}: its driver disconnected"
    assert other.got[answered] == result_of(4, 4)
    assert other.failed[unanswered] == why and other.answers[unanswered] == ["failed"]
    assert other.failed[actor] == why  # a caller hears that the actor is gone
    assert other.core.kept(actor) == 0 and other.core.kept_bytes == 0
    assert _record(sim, actor).state is ActorState.DEAD
    task = other.core.submit(TASK_ID, arg(16))
    sim.driver_call(other)
    sim.settle()
    assert task in other.got
    _release_all(sim, other, answered, unanswered, task)
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)


def test_another_driver_calls_an_actor_through_its_handle_and_hears_covered() -> None:
    sim, actors = _cluster(seed=8, workers=2, drivers=2)
    owner, other = sim.drivers
    actor = _create(sim, owner)
    sim.settle()
    order = [(other, 10), (owner, 20), (other, 30), (other, 40), (owner, 50)]
    calls = []
    for d, value in order:
        calls.append(_call(sim, d, actor, value))
        deliver_all(sim)  # reaches the head before the next: this is the actor's order
    sim.settle()
    total = 0
    for (d, value), call in zip(order, calls, strict=True):
        total += value
        assert d.got[call] == result_of(total, value)
        _once(d, call)
    assert owner.core.kept(actor) == 2 and other.core.kept(actor) == 3
    assert other.core.kept_bytes == 3 * CALL
    ask = _checkpoint(sim, owner, actor)
    sim.settle()
    assert owner.got[ask] == b""
    assert owner.core.kept(actor) == 0 and other.core.kept(actor) == 0
    assert other.core.kept_bytes == 0 and owner.core.kept_bytes == 0
    assert actors.disk[actor][5].last == {
        owner.core.number: calls[4],
        other.core.number: calls[3],
    }


def test_a_lost_worker_rebuilds_the_actor_replaying_only_uncovered_calls_answered_once() -> None:
    sim, actors = _cluster(seed=9, workers=2)
    d = sim.drivers[0]
    actor = _create(sim, d, every=2)
    calls = []
    for value in (1, 2, 3, 4, 5):
        calls.append(_call(sim, d, actor, value))
        sim.settle()
    record = _record(sim, actor)
    assert record.covered == 4 and [c.oid for c in record.calls] == [calls[4]]
    assert d.core.kept(actor) == 1
    calls.append(_call(sim, d, actor, 6))
    deliver_all(sim)  # the sixth call is at the worker, not run
    host = _host(sim, actor)
    sim.crash(host)
    sim.settle()
    assert actors.starts[-1] == (actor, 4)  # from the checkpoint covering 4 calls
    runs = [actors.runs[c] for c in calls]
    assert runs == [1, 1, 1, 1, 2, 1]  # the fifth ran again for the state, not the first four
    total = 0
    for value, call in zip((1, 2, 3, 4, 5, 6), calls, strict=True):
        total += value
        assert d.got[call] == result_of(total, value)
        _once(d, call)
    restored = actors.host(actor)
    assert restored is not None and restored is not host
    assert getattr(restored.hosted, "total", None) == 21
    assert _record(sim, actor).restarts == 1
    assert "restarts 1" in _status_line(sim, actor)


def test_checkpoint_asks_are_answered_written_or_failed_and_the_heads_failures_warn() -> None:
    sim, actors = _cluster(seed=10, workers=2, drivers=2)
    owner, other = sim.drivers
    actor = _create(sim, owner)
    unknown = _checkpoint(sim, owner, owner.core.number << 40 | 999)
    empty = _checkpoint(sim, owner, actor)
    sim.settle()
    assert "it is unknown to the head" in owner.failed[unknown]
    assert owner.got[empty] == b""  # covering no calls: written too
    _call(sim, owner, actor, 1)
    _call(sim, other, actor, 2)
    sim.settle()
    written = _checkpoint(sim, other, actor)
    sim.settle()
    assert other.got[written] == b"" and other.answers[written] == ["value"]
    before = len(actors.checkpoints)
    again = _checkpoint(sim, other, actor)
    sim.settle()
    assert other.got[again] == b"" and len(actors.checkpoints) == before  # nothing new
    # The head's own checkpoints (every call now) fail: each caller is warned, once per reason.
    actors.failing = "OSError: the sim's disk is full"
    _record(sim, actor).every = 1
    for value in (3, 4, 5):
        _call(sim, other, actor, value)
        sim.settle()
    why = f"a checkpoint of actor {actor:#x} failed: OSError: the sim's disk is full"
    assert [w.message for w in owner.warnings] == [why]
    assert [w.message for w in other.warnings] == [why]
    assert "CHECKPOINTS FAIL: OSError: the sim's disk is full" in _status_line(sim, actor)
    # A driver's ask that fails is answered to the asker only.
    _call(sim, owner, actor, 6)
    failed = _checkpoint(sim, owner, actor)
    sim.settle()
    assert owner.failed[failed] == "OSError: the sim's disk is full"
    assert len(owner.warnings) == 1 and len(other.warnings) == 1
    actors.failing = None
    _call(sim, owner, actor, 7)
    sim.settle()
    assert "CHECKPOINTS FAIL" not in _status_line(sim, actor)
    assert _record(sim, actor).covered == 7
    assert owner.core.kept(actor) == 0 and other.core.kept(actor) == 0


def test_a_driver_past_its_budget_asks_for_a_checkpoint_itself() -> None:
    sim, actors = _cluster(seed=11, workers=1)
    d = sim.drivers[0]
    d.core.keep_bytes = 2 * CALL
    actor = _create(sim, d)
    calls = [_call(sim, d, actor, v) for v in (1, 2, 3)]
    assert d.core.kept_bytes == 3 * CALL
    sim.settle()
    assert [d.got[c] for c in calls] == [result_of(t, v) for t, v in ((1, 1), (3, 2), (6, 3))]
    assert d.core.kept(actor) == 0 and d.core.kept_bytes == 0
    assert sorted(actors.disk[actor]) == [3]
    assert set(d.answers) == {actor, *calls}  # its own ask is the driver core's, not ours
    assert not d.warnings
    # Checkpoints fail: it says so, and past twice the budget it cuts the oldest calls.
    actors.failing = "OSError: the sim's disk is full"
    for value in range(4, 12):
        _call(sim, d, actor, value)
        assert d.core.kept_bytes <= 2 * d.core.keep_bytes
        sim.settle()
        assert d.core.kept_bytes <= 2 * d.core.keep_bytes
    messages = [w.message for w in d.warnings]
    assert "a checkpoint failed: OSError: the sim's disk is full" in messages
    assert sum("cannot be rebuilt exactly" in m for m in messages) == 1
    assert all(w.actor_id == actor for w in d.warnings)


def test_a_waiting_actor_no_worker_can_host_fails_after_the_grace() -> None:
    sim, _ = _cluster(seed=12, workers=1)
    d = sim.drivers[0]
    sim.crash(sim.workers[0])
    sim.settle()
    actor = _create(sim, d)
    call = _call(sim, d, actor, 1)
    sim.settle()
    assert f"WAITING: no connected worker has its driver's registry {sim.registry:#018x}" in (
        _status_line(sim, actor)
    )
    head = sim.head
    deadline = head.next_deadline()
    assert deadline is not None
    head.on_timer(deadline - 1)
    sim._run_decisions(head)
    sim.settle()
    assert actor not in d.answers
    head.on_timer(deadline)
    sim._run_decisions(head)
    sim.settle()
    why = d.failed[actor]
    assert why.startswith(f"no worker can host actor {actor:#x} (type {ACTOR_TYPE:#x})")
    assert "(waited 10 s for one)" in why
    assert d.failed[call] == why
    assert head.next_deadline() is None
    assert d.core.kept(actor) == 0
    _release_all(sim, d, call)
    assert head.stats() == dp.HeadStats(0, 0, 0, 0, 0)


def test_a_bad_actor_call_gets_an_error_and_disturbs_nobody() -> None:
    sim, _ = _cluster(seed=13, workers=2, drivers=2)
    owner, other = sim.drivers
    actor = _create(sim, owner)
    first = _call(sim, owner, actor, 1)
    sim.settle()
    unknown = _call(sim, other, other.core.number << 40 | 4242, 2)
    # A call under an object ID of another driver's numbering (a forged frame).
    forged = owner.core.number << 40 | 777
    other.core._links.send(dp.HEAD_LINK, dp.ActorCall(forged, ADD, actor, u64(3)))
    sim.driver_call(other)
    # And one reusing an ID the head tracks (the first call's).
    owner.core._links.send(dp.HEAD_LINK, dp.ActorCall(first, ADD, actor, u64(4)))
    sim.driver_call(owner)
    good = _call(sim, other, actor, 5)
    sim.settle()
    assert "is gone: it is unknown to the head" in other.failed[unknown]
    assert other.failed[forged] == (
        f"object ID {forged:#x} is not numbered for driver {other.core.number}"
    )
    assert owner.answers[first] == ["value", "failed"]
    assert owner.failed[first] == f"object ID {first:#x} is already in use"
    assert other.got[good] == result_of(6, 5)  # 1 + 5: neither bad call reached the actor
    assert _record(sim, actor).seq == 2
    assert owner.core.ready and other.core.ready and sim.head.stats().workers == 2


def test_an_actor_is_given_up_after_max_retries_plus_one_losses_without_an_answer() -> None:
    sim, _ = _cluster(seed=14, workers=3, max_retries=1)
    d = sim.drivers[0]
    actor = _create(sim, d)
    sim.settle()
    call = _call(sim, d, actor, 1)
    for loss in (1, 2):
        deliver_all(sim)
        sim.crash(_host(sim, actor))  # the call never answered
        deliver_all(sim)
        if loss == 1:
            assert _record(sim, actor).state is not ActorState.DEAD
    record = _record(sim, actor)
    assert record.state is ActorState.DEAD
    assert "lost 2 workers in a row without answering a call in between: gave up" in record.why
    assert d.failed[call] == record.why and d.failed[actor] == record.why
    assert d.core.kept(actor) == 0


def test_an_answer_between_losses_starts_the_count_again() -> None:
    sim, _ = _cluster(seed=15, workers=4, max_retries=1)
    d = sim.drivers[0]
    actor = _create(sim, d)
    sim.settle()
    for value in (1, 2, 3):
        call = _call(sim, d, actor, value)
        sim.settle()
        assert call in d.got
        sim.crash(_host(sim, actor))
        sim.settle()
    assert _record(sim, actor).state is ActorState.READY
    assert _record(sim, actor).restarts == 3


def test_a_restore_that_fails_fails_the_actor() -> None:
    sim, actors = _cluster(seed=16, workers=2)
    d = sim.drivers[0]
    actor = _create(sim, d, every=1)
    done = _call(sim, d, actor, 1)
    sim.settle()
    pending = _call(sim, d, actor, 2)
    deliver_all(sim)
    actors.restore_failure = "OSError: the sim's disk is gone"
    sim.crash(_host(sim, actor))
    sim.settle()
    why = (
        f"actor {actor:#x} could not be restored from its checkpoint: "
        "OSError: the sim's disk is gone"
    )
    assert d.failed[actor] == why and d.failed[pending] == why
    assert d.got[done] == result_of(1, 1)


def test_a_raising_call_answers_its_error_once_and_the_actor_lives_on() -> None:
    sim, actors = _cluster(seed=17, workers=2)
    d = sim.drivers[0]
    actor = _create(sim, d)
    raised = _call(sim, d, actor, 5, RAISE)
    after = _call(sim, d, actor, 6)
    sim.settle()
    sim.crash(_host(sim, actor))  # both run again on the next worker, answered before
    sim.settle()
    assert d.failed[raised] == RAISED and d.answers[raised] == ["failed"]
    assert d.got[after] == result_of(6, 6)
    _once(d, after)
    assert actors.runs[raised] == 2 and actors.runs[after] == 2


def test_a_pending_checkpoint_ask_is_answered_when_the_actor_dies() -> None:
    sim, _ = _cluster(seed=18, workers=1)
    d = sim.drivers[0]
    actor = _create(sim, d)
    _call(sim, d, actor, 1)
    ask = _checkpoint(sim, d, actor)
    deliver_all(sim)
    assert [type(x) for x in sim.workers[0].actor_work] == [
        dp.StartActor,
        dp.CallActor,
        dp.CheckpointActor,
    ]
    d.core.kill_actor(actor)
    sim.driver_call(d)
    sim.settle()
    assert d.failed.get(ask) == f"actor {actor:#x} was killed by driver {d.core.number}"
    assert d.answers[ask] == ["failed"]


def test_a_driver_calling_an_actor_after_it_died_keeps_nothing() -> None:
    sim, _ = _cluster(seed=19, workers=1, drivers=2)
    owner, other = sim.drivers
    actor = _create(sim, owner)
    sim.settle()
    owner.core.kill_actor(actor)
    sim.driver_call(owner)
    sim.settle()
    late = [_call(sim, other, actor, 1), _call(sim, owner, actor, 2)]
    sim.settle()
    for d, call in zip((other, owner), late, strict=True):
        assert d.failed[call].startswith(f"actor {actor:#x} is gone: ")
        assert d.core.kept(actor) == 0 and d.core.kept_bytes == 0, d.index
    assert other.failed[actor] == f"actor {actor:#x} was killed by driver {owner.core.number}"
    # A failed call is an object the driver holds: released as any other, without an error.
    _release_all(sim, other, late[0])
    _release_all(sim, owner, late[1])
    assert other.answers[late[0]] == ["failed"] and owner.answers[late[1]] == ["failed"]
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)


def test_a_checkpoint_ask_for_a_waiting_actor_is_answered_once_it_runs() -> None:
    sim, _ = _cluster(seed=20, workers=1)
    d = sim.drivers[0]
    busy = _create(sim, d)
    waiting = _create(sim, d)
    call = _call(sim, d, waiting, 3)
    ask = _checkpoint(sim, d, waiting)
    sim.settle()
    assert ask not in d.answers
    d.core.kill_actor(busy)
    sim.driver_call(d)
    sim.settle()
    assert d.got[call] == result_of(3, 3) and d.got[ask] == b""
    assert _record(sim, waiting).covered == 1 and d.core.kept(waiting) == 0


def test_callers_whose_calls_the_head_cut_still_hear_covered() -> None:
    sim, actors = _cluster(seed=21, workers=1, drivers=2, actor_keep_bytes=2 * CALL)
    owner, other = sim.drivers
    actor = _create(sim, owner)
    sim.settle()
    actors.failing = "OSError: the sim's disk is full"
    for value in (1, 2, 3):  # past the head's budget: it asks for a checkpoint, which fails
        _call(sim, other, actor, value)
        sim.settle()
    for value in (4, 5):  # past twice the budget: the head cuts the oldest, the other's
        _call(sim, owner, actor, value)
        sim.settle()
    record = _record(sim, actor)
    assert record.lossy and [c.owner for c in record.calls] != []
    assert "it cannot be rebuilt" in _status_line(sim, actor)
    actors.failing = None
    ask = _checkpoint(sim, owner, actor)
    sim.settle()
    assert owner.got[ask] == b"" and _record(sim, actor).covered == 5
    assert owner.core.kept(actor) == 0
    assert other.core.kept(actor) == 0 and other.core.kept_bytes == 0
    # Covered now: it can be rebuilt exactly again.
    assert not _record(sim, actor).lossy and "cannot be rebuilt" not in _status_line(sim, actor)


def test_calls_cut_while_an_actor_waits_to_be_rebuilt_fail_it_not_rebuild_it_wrong() -> None:
    sim, actors = _cluster(seed=22, workers=2, actor_keep_bytes=2 * CALL)
    d = sim.drivers[0]
    actor = _create(sim, d)
    sim.settle()
    host = _host(sim, actor)
    (other,) = [w for w in sim.workers if w is not host]
    task = d.core.submit(TASK_ID, arg(16))
    sim.driver_call(d)
    deliver_all(sim)
    assert [t.object_id for t in other.running] == [task]  # busy until the test says
    actors.failing = "OSError: the sim's disk is full"
    calls = []
    for value in (1, 2, 3):
        calls.append(_call(sim, d, actor, value))
        deliver_all(sim)
        actors.run_all(host)
        deliver_all(sim)
    sim.crash(host)
    deliver_all(sim)
    assert _record(sim, actor).state is ActorState.WAITING  # kept: the other runs a task
    for value in (4, 5):  # past twice the budget: calls it needs to be rebuilt are cut
        calls.append(_call(sim, d, actor, value))
        deliver_all(sim)
    _finish(sim, other, task)
    sim.settle()
    record = _record(sim, actor)
    assert record.state is ActorState.DEAD, "rebuilt without the calls that were cut"
    assert "cannot be rebuilt" in record.why
    assert [d.got.get(c) for c in calls[:3]] == [
        result_of(t, v) for t, v in ((1, 1), (3, 2), (6, 3))
    ]
    assert d.failed[calls[3]] == record.why and d.failed[calls[4]] == record.why


def test_checkpoints_keep_pace_with_a_burst_of_calls() -> None:
    # 100 calls at once with checkpoint_every=10: the head sends calls only while at most
    # CHECKPOINTS_IN_FLIGHT checkpoint frames are on their way, so a checkpoint still comes
    # every 10 calls (a restore replays at most ~20), and the disk holds at most three.
    from dista_proto._head_actors import CHECKPOINTS_IN_FLIGHT

    sim, actors = _cluster(seed=21, workers=1)
    d = sim.drivers[0]
    actor = _create(sim, d, every=10)
    calls = [_call(sim, d, actor, 1) for _ in range(100)]
    deliver_all(sim)
    w = sim.workers[0]
    queued = [type(x).__name__ for x in w.actor_work]
    assert queued.count("CheckpointActor") == CHECKPOINTS_IN_FLIGHT
    assert queued.count("CallActor") == 10 * (CHECKPOINTS_IN_FLIGHT + 1)  # up to the next
    while w.actor_work:
        actors.run(w)
        deliver_all(sim)  # answers reach the head: held calls go on
        assert len(actors.disk.get(actor, {})) <= CHECKPOINTS_IN_FLIGHT + 1
    assert [c for (a, c, f) in actors.checkpoints if a == actor] == list(range(10, 101, 10))
    assert _record(sim, actor).covered == 100
    assert [d.got[c] for c in calls] == [result_of(i, 1) for i in range(1, 101)]
    assert d.core.kept(actor) == 0


def test_a_forced_kill_stops_the_actors_worker() -> None:
    sim, _ = _cluster(seed=23, workers=2)
    d = sim.drivers[0]
    actor = _create(sim, d)
    deliver_all(sim)
    host = _host(sim, actor)
    call = _call(sim, d, actor, 1)
    deliver_all(sim)
    d.core.kill_actor(actor, force=True)
    sim.driver_call(d)
    deliver_all(sim)
    assert host.core.stopped  # told to stop: its process ends (a supervisor replaces it)
    assert "was killed by driver" in d.failed[call]
    assert _record(sim, actor).state is ActorState.DEAD
    assert sim.head.stats().workers == 1 and sim.head.stats().pending == 0
