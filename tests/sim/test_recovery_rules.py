"""Rules of recovery, each driven step by step over the simulated cluster (`RecoverySim`):
head restarts with every kind of object a driver holds, claims and holdings meeting in either
order or not at all, a driver reconnecting to the same head, a number two epochs drew, silent
workers, drains, and actors across a head restart (restored from their newest checkpoint, or
rebuilt from the kept calls)."""

from __future__ import annotations

import dista_proto as dp
from dista_proto._head_records import ObjState

from .support.actors import ACTOR_TYPE, ADD, CAPABILITY, MASK, Instance, SimActors, result_of, u64
from .support.cluster import TASK_ID, SimDriver, SimWorker, arg, compute, deliver_all
from .support.recovery import GRACE_NS, LIVENESS_NS, RecoverySim

STORED = 3000  # past the sim's inline threshold: the result stays on its worker


def _sim(seed: int, workers: int = 2, drivers: int = 1, **kwargs: int) -> RecoverySim:
    sim = RecoverySim(seed, workers=workers, drivers=drivers, jump_rate=0.0, **kwargs)
    sim.manual = True
    sim.settle()
    return sim


def _reconnect_all(sim: RecoverySim) -> None:
    for core in list(sim.lost):
        sim.reconnect(core)


def _restart(sim: RecoverySim) -> dp.Head:
    """The head restarts; every machine notices and connects to the new one."""
    head = sim.restart_head()
    deliver_all(sim)
    _reconnect_all(sim)
    sim.settle()
    return head


def _release(sim: RecoverySim, d: SimDriver, *oids: int) -> None:
    for oid in oids:
        d.core.release(oid)
    sim.driver_call(d)
    sim.settle()


def _holder(sim: RecoverySim, oid: int) -> SimWorker:
    (w,) = [w for w in sim.workers if w.alive and oid in w.core.store]
    return w


def _clean(sim: RecoverySim) -> None:
    """Nothing left anywhere once everything is released."""
    assert sim.head.stats()[:4] == (0, 0, 0, 0), sim.head.stats()
    for w in sim.workers:
        if w.alive:
            assert not w.core.store, f"{w.address} holds {list(w.core.store)}"


def _start_actor(sim: RecoverySim, d: SimDriver, every: int) -> int:
    actor = d.core.create_actor(ACTOR_TYPE, u64(0), every, capability=CAPABILITY)
    sim.driver_call(d)
    sim.settle()
    assert d.answers[actor] == ["value"]
    return actor


def _call(sim: RecoverySim, d: SimDriver, actor: int, value: int) -> int:
    d.core.open_actor(actor, CAPABILITY)  # a handle carries the capability
    oid = d.core.call_actor(actor, ADD, u64(value))
    d.live.append(oid)
    sim.driver_call(d)
    return oid


def _host(sim: RecoverySim, actor: int) -> SimWorker:
    (w,) = [
        w
        for w in sim.workers
        if w.alive and isinstance(w.hosted, Instance) and w.hosted.actor_id == actor
    ]
    return w


# -- head restarts ---------------------------------------------------------------------------


def test_a_head_restart_keeps_inline_stored_failed_and_unfinished_objects() -> None:
    sim = _sim(seed=1)
    d = sim.drivers[0]
    core = d.core
    inline = core.submit(TASK_ID, arg(16, 1))
    stored = core.submit(TASK_ID, arg(STORED, 2))
    many = core.submit_many(TASK_ID, arg(STORED, 3), 3)
    unknown = (core.number << dp.ID_BITS) | 0xFFFF  # never submitted
    failed = core.submit_after(TASK_ID, [unknown])
    d.live += [inline, stored, many, many + 1, many + 2, failed]
    sim.driver_call(d)
    sim.settle()
    assert "unknown to the head" in d.failed[failed]
    # Unfinished when the head dies: a task, a task-many, and a task-after whose inputs the
    # driver releases (the new head must still know them to run it).
    task = core.submit(TASK_ID, arg(16, 4))
    pair = core.submit_many(TASK_ID, arg(STORED, 5), 2)
    after = core.submit_after(TASK_ID, [inline, stored], gather=True, value=arg(16, 6))
    sim.driver_call(d)
    deliver_all(sim)  # they run on the workers, nothing finishes
    assert sum(len(w.running) for w in sim.workers) >= 2
    for oid in (inline, stored):
        d.core.release(oid)
    sim.driver_call(d)
    deliver_all(sim)
    d.live = [many, many + 1, many + 2, failed, task, pair, pair + 1, after]
    head = _restart(sim)
    assert head is not sim.heads[0]
    assert d.core.resumes == 1 and d.core.number == core.number
    base = compute(arg(STORED, 3), (), False)
    for i in range(3):
        assert d.got[many + i] == base + bytes([i])
    assert d.got[task] == compute(arg(16, 4), (), False)
    pair_value = compute(arg(STORED, 5), (), False)
    assert d.got[pair] == pair_value + b"\x00" and d.got[pair + 1] == pair_value + b"\x01"
    inputs = (compute(arg(16, 1), (), False), compute(arg(STORED, 2), (), False))
    assert d.got[after] == compute(arg(16, 6), inputs, True)
    # Each object answered once: what the driver had is not answered again.
    for oid in (inline, stored, many, task, pair, after):
        assert d.answers[oid].count("failed") == 0, d.answers[oid]
    assert d.answers[inline] == ["value"] and d.answers[failed] == ["failed"]
    assert d.answers[many] == ["located", "value"], d.answers[many]
    # The stored results stayed where they were: claimed, found by their workers' holding.
    assert head.tracked(many) and not head._holdings.claims and not head._holdings.unclaimed
    _release(sim, d, many, many + 1, many + 2, failed, task, pair, pair + 1, after)
    _clean(sim)


def test_a_claim_waits_for_its_worker_to_rejoin_later() -> None:
    sim = _sim(seed=2, workers=2)
    d = sim.drivers[0]
    oid = d.core.submit(TASK_ID, arg(STORED, 1))
    d.live.append(oid)
    sim.driver_call(d)
    sim.settle()
    w = _holder(sim, oid)
    head = sim.restart_head()
    deliver_all(sim)
    sim.reconnect(d.core)  # the driver first: it claims, no worker has said holding yet
    for other in sim.workers:
        if other is not w:
            sim.reconnect(other.core)
    deliver_all(sim)
    assert oid in head._holdings.claims and head.tracked(oid)
    # A task taking it waits for it.
    after = d.core.submit_after(TASK_ID, [oid])
    sim.driver_call(d)
    deliver_all(sim)
    assert after not in d.got
    sim.now += GRACE_NS // 2  # within the grace: the worker comes
    sim.reconnect(w.core)
    sim.settle()
    assert not head._holdings.claims
    assert d.got[after] == compute(None, (compute(arg(STORED, 1), (), False),), False)
    assert d.answers[oid] == ["located", "value"]  # found again: not answered twice
    _release(sim, d, oid, after)
    _clean(sim)


def test_a_claim_no_worker_answers_fails_after_the_grace() -> None:
    sim = _sim(seed=3, workers=2)
    d = sim.drivers[0]
    oid = d.core.submit(TASK_ID, arg(STORED, 1))
    sim.driver_call(d)
    sim.settle()
    w = _holder(sim, oid)
    head = sim.restart_head()
    deliver_all(sim)
    sim.crash(w)  # its worker never comes back
    _reconnect_all(sim)
    after = d.core.submit_after(TASK_ID, [oid])
    sim.driver_call(d)
    sim.settle()  # time passes: the claim waits out the grace
    assert not head._holdings.claims
    assert "no worker reported holding it within 0.2 s" in d.failed[after]
    _release(sim, d, oid, after)
    _clean(sim)


def test_a_holding_no_driver_claims_is_freed_at_its_drivers_resumed() -> None:
    sim = _sim(seed=4, workers=1)
    d = sim.drivers[0]
    kept, dropped = (d.core.submit(TASK_ID, arg(STORED, i)) for i in (1, 2))
    sim.driver_call(d)
    sim.settle()
    w = sim.workers[0]
    assert set(w.core.store) == {kept, dropped}
    head = sim.restart_head()
    deliver_all(sim)
    d.core.release(dropped)  # while the head is away: no new head hears of it
    sim.driver_call(d)
    sim.reconnect(w.core)  # the worker first: both wait for their driver
    deliver_all(sim)
    assert set(head._holdings.unclaimed) == {kept, dropped}
    sim.reconnect(d.core)
    sim.settle()
    assert not head._holdings.unclaimed
    assert set(w.core.store) == {kept}  # the one it did not claim is freed at resumed
    _release(sim, d, kept)
    _clean(sim)


def test_a_holding_whose_driver_never_comes_is_freed_after_the_grace() -> None:
    sim = _sim(seed=5, workers=1, drivers=2)
    d, gone = sim.drivers
    oid = gone.core.submit(TASK_ID, arg(STORED, 1))
    sim.driver_call(gone)
    sim.settle()
    w = sim.workers[0]
    head = sim.restart_head()
    deliver_all(sim)
    sim.disconnect(gone)  # it died with the head
    sim.lost.remove(gone.core)
    _reconnect_all(sim)
    deliver_all(sim)
    assert oid in head._holdings.unclaimed and oid in w.core.store
    sim.settle()  # the grace passes
    assert not head._holdings.unclaimed and not w.core.store
    _clean(sim)
    assert d.core.ready


# -- the same head, again ------------------------------------------------------------------


def test_a_driver_reconnecting_to_the_same_head_takes_over_its_old_connection() -> None:
    sim = _sim(seed=6, workers=2)
    d = sim.drivers[0]
    head = sim.head
    done = d.core.submit(TASK_ID, arg(16, 1))
    sim.driver_call(d)
    sim.settle()
    running = [d.core.submit(TASK_ID, arg(STORED, i)) for i in (2, 3)]
    sim.driver_call(d)
    deliver_all(sim)
    old = head._wire.numbers[d.core.number].link
    # Only the driver sees its link go (the head's side stays half open): the answers the
    # head sends meanwhile are lost with it.
    sim.cut(d.core, reset=True, head_sees=False)
    deliver_all(sim)
    assert d.core in sim.lost and old in head._wire.peers
    for w in sim.workers:
        while w.running:
            sim.finish_task(w)
    deliver_all(sim)
    assert not any(oid in d.answers for oid in running)
    sim.reconnect(d.core)
    sim.settle()
    assert old not in head._wire.peers  # the old connection is dropped
    assert head._wire.numbers[d.core.number].link != old
    assert d.core.resumes == 1
    assert all(n == 1 for n in sim.runs.values()), sim.runs  # nothing ran twice
    for oid in running:
        assert d.answers[oid] == ["located"], d.answers[oid]  # answered again, once
        d.core.fetch(oid)
    sim.driver_call(d)
    sim.settle()
    for i, oid in enumerate(running):
        assert d.got[oid] == compute(arg(STORED, i + 2), (), False)
    assert d.answers[done] == ["value"]
    _release(sim, d, done, *running)
    _clean(sim)


def test_a_driver_whose_head_saw_it_go_resumes_with_everything_kept() -> None:
    sim = _sim(seed=7, workers=2)  # (the actor takes one)
    SimActors(sim)
    d = sim.drivers[0]
    head = sim.head
    stored = d.core.submit(TASK_ID, arg(STORED, 1))
    actor = _start_actor(sim, d, every=1)
    calls = [_call(sim, d, actor, v) for v in (1, 2)]
    sim.settle()
    sim.cut(d.core, reset=True)
    deliver_all(sim)
    assert len(head._resume.away) == 1  # away, not gone: its objects and its actor wait
    assert head.tracked(stored) and _holder(sim, stored)
    late = d.core.submit(TASK_ID, arg(16, 9))  # while it is away: with the resume
    d.core.release(calls[0])
    sim.driver_call(d)
    sim.now += GRACE_NS // 2
    _reconnect_all(sim)
    sim.settle()
    assert not head._resume.away and d.got[late] == compute(arg(16, 9), (), False)
    assert not head.tracked(calls[0])  # released while away: the resume said so
    third = _call(sim, d, actor, 3)
    sim.settle()
    assert d.got[third] == result_of(6, 3)  # the actor lived on
    assert d.answers[actor] == ["value"]
    d.core.kill_actor(actor)
    sim.driver_call(d)
    _release(sim, d, stored, calls[1], late, third)
    _clean(sim)


def test_a_driver_away_past_the_grace_is_dropped() -> None:
    sim = _sim(seed=8, workers=1)
    d = sim.drivers[0]
    oid = d.core.submit(TASK_ID, arg(STORED, 1))
    sim.driver_call(d)
    sim.settle()
    sim.cut(d.core, reset=True)
    sim.settle()  # the grace passes: the driver is lost, what it owned freed
    assert not sim.head._resume.away
    _clean(sim)
    _reconnect_all(sim)
    sim.settle()  # it resumes all the same: its claim waits for a holding, then fails
    assert d.core.resumes == 1
    obj = sim.head._objects.by_id[oid]
    assert obj.state is ObjState.FAILED and "no worker reported holding it" in obj.error
    d.core.fetch(oid)  # where it was, it is gone: the head, asked again, says why
    sim.driver_call(d)
    sim.settle()
    assert "no worker reported holding it" in d.failed[oid]
    _release(sim, d, oid)
    _clean(sim)


def test_a_number_from_another_epoch_that_is_in_use_is_refused() -> None:
    sim = _sim(seed=9, workers=1)
    d = sim.drivers[0]
    number = d.core.number
    sim.driver_call(d)
    head = sim.restart_head(first_number=number)  # the new head draws the same number
    deliver_all(sim)
    newcomer = sim.add_driver()
    sim.settle()
    assert newcomer.core.number == number
    _reconnect_all(sim)  # the old driver, resuming under that number, and the worker
    sim.settle()
    assert "in use by a driver of this head" in d.core.closed_reason
    assert f"epoch {head.epoch:#x}" in d.core.closed_reason
    assert head._wire.numbers[number].link != 0 and newcomer.core.ready
    oid = newcomer.core.submit(TASK_ID, arg(16))
    sim.driver_call(newcomer)
    sim.settle()
    assert oid in newcomer.got  # the newcomer's objects are its own still


# -- silent workers --------------------------------------------------------------------------


def test_a_silent_worker_is_lost_its_tasks_retried_and_its_objects_back_when_it_rejoins() -> None:
    sim = _sim(seed=10, workers=2)
    d = sim.drivers[0]
    head = sim.head
    a, b = sim.workers
    kept = d.core.submit(TASK_ID, arg(STORED, 1))
    sim.driver_call(d)
    sim.settle()
    holder = _holder(sim, kept)
    other = b if holder is a else a
    # A task the silent worker runs, and one waiting for its object.
    sim.drivers[0].core.submit(TASK_ID, arg(16, 2))
    sim.driver_call(d)
    deliver_all(sim)
    while other.running:
        sim.finish_task(other)
    task = d.core.submit(TASK_ID, arg(16, 3))
    sim.driver_call(d)
    deliver_all(sim)
    assert holder.running or other.running
    silence = LIVENESS_NS + GRACE_NS // 2
    sim.manual = False  # it reconnects by itself once it notices
    sim.silence(holder, silence)
    # Liveness passes: the head loses it; its task runs on the other worker.
    link = _link_of(sim, holder)
    while head._wire.peers.get(link) is not None:
        assert sim.step()
    assert kept in head._holdings.limbo
    after = d.core.submit_after(TASK_ID, [kept])  # waits for the object to come back
    sim.driver_call(d)
    while sim.frozen:
        assert sim.step()
    assert after not in d.got
    sim.settle()
    assert not head._holdings.limbo  # back with its holding
    assert d.got[task] == compute(arg(16, 3), (), False)
    assert d.got[after] == compute(None, (compute(arg(STORED, 1), (), False),), False)
    assert kept in holder.core.store and head._objects.by_id[kept].holder is not None
    assert head._objects.by_id[kept].holder.address == holder.address
    _release(sim, d, *d.got, kept)
    _release(sim, d, *[o for o in list(head._objects.by_id) if head._objects.by_id[o].held])
    _clean(sim)


def _link_of(sim: RecoverySim, w: SimWorker) -> int:
    pipe = sim.ends.get((id(w.core), dp.HEAD_LINK))
    if pipe is None:
        for held in sim.frozen.values():
            for p in held:
                if p.target is sim.head:
                    return p.link
        return -1
    return pipe.link


def test_a_worker_whose_link_is_reset_keeps_its_objects_for_its_rejoin() -> None:
    sim = _sim(seed=11, workers=1)
    d = sim.drivers[0]
    oid = d.core.submit(TASK_ID, arg(STORED, 1))
    d.live.append(oid)
    sim.driver_call(d)
    sim.settle()
    w = sim.workers[0]
    sim.cut(w.core, reset=True)
    deliver_all(sim)
    assert oid in sim.head._holdings.limbo  # not failed: it may come back
    _reconnect_all(sim)
    sim.settle()
    assert oid in d.got and oid not in d.failed and not sim.head._holdings.limbo
    _release(sim, d, oid)
    _clean(sim)


# -- drains ----------------------------------------------------------------------------------


def test_a_drain_moves_objects_and_an_actor_and_refs_read_from_the_new_place() -> None:
    sim = _sim(seed=12, workers=3)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=1)
    calls = [_call(sim, d, actor, v) for v in (1, 2)]
    sim.settle()
    host = _host(sim, actor)
    # A stored object on the actor's host: a call's (stretched) result.
    big = _call(sim, d, actor, 4)
    sim.settle()
    assert big in host.core.store
    sim.drain(host)
    sim.settle()
    assert not host.alive and host in sim.exits  # told to stop: it left
    new = _host(sim, actor)
    assert new is not host and actors.restored_newest == []
    assert new.hosted is not None and isinstance(new.hosted, Instance)
    assert new.hosted.total == 7
    moved = _holder(sim, big)
    assert moved is not host and d.core._located[big] == moved.address
    d.got.pop(big, None)
    d.core.fetch(big)  # read from the new place
    sim.driver_call(d)
    sim.settle()
    assert d.got[big] == result_of(7, 4)
    after = _call(sim, d, actor, 8)
    sim.settle()
    assert d.got[after] == result_of(15, 8)
    d.core.kill_actor(actor)
    sim.driver_call(d)
    _release(sim, d, *calls, big, after)
    _clean(sim)


def test_a_drain_with_no_other_worker_waits_and_says_why() -> None:
    sim = _sim(seed=13, workers=1)
    d = sim.drivers[0]
    oid = d.core.submit(TASK_ID, arg(STORED, 1))
    sim.driver_call(d)
    sim.settle()
    w = sim.workers[0]
    sim.drain(w)
    sim.settle()
    assert w.alive and not w.core.stopped  # nowhere to put what it holds: it waits
    status = sim.head.status()
    assert f"worker {w.address}: draining" in status
    assert "no other worker to adopt its 1 objects" in status
    assert sim.head.stats().workers == 0
    late = d.core.submit(TASK_ID, arg(16, 2))  # no work goes to it
    sim.driver_call(d)
    deliver_all(sim)
    assert late not in d.got and not w.running
    fresh = sim.add_worker()
    sim.settle()
    assert not w.alive and oid in fresh.core.store and late in d.got
    _release(sim, d, oid, late)
    _clean(sim)


# -- actors across a head restart ------------------------------------------------------------


def test_an_actor_lives_on_through_a_head_restart_and_answers_what_it_ran() -> None:
    sim = _sim(seed=14, workers=2)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=1)
    calls = [_call(sim, d, actor, v) for v in (1, 2, 3)]
    deliver_all(sim)
    host = _host(sim, actor)
    # The calls and their checkpoints run; the head dies before any answer reaches the
    # driver: it still keeps every call, and their answers are on the worker only.
    actors.run_all(host)  # (two checkpoints on their way hold the third one back)
    _restart(sim)
    assert actors.restored_live[-1] == actor and _host(sim, actor) is host  # placed back
    assert not actors.restored_newest  # no checkpoint read: its live state answers
    assert all(actors.runs[c] == 1 for c in calls)  # nothing ran twice...
    assert all(d.answers[c] == ["value"] for c in calls)  # ... and nothing was lost
    assert [d.got[c] for c in calls] == [result_of(1, 1), result_of(3, 2), result_of(6, 3)]
    later = _call(sim, d, actor, 4)
    sim.settle()
    assert d.got[later] == result_of(10, 4)
    assert _host(sim, actor).hosted.total == 10  # type: ignore[union-attr]
    assert d.core.kept(actor) == 0
    d.core.kill_actor(actor)
    sim.driver_call(d)
    _release(sim, d, *calls, later)
    _clean(sim)


def test_an_actor_lost_with_its_head_comes_back_from_its_newest_checkpoint_with_answers() -> None:
    sim = _sim(seed=15, workers=2)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=2)
    calls = [_call(sim, d, actor, v) for v in (1, 2, 3)]
    deliver_all(sim)
    host = _host(sim, actor)
    actors.run_all(host)  # run, checkpointed at 2; no answer has reached the driver
    assert sorted(actors.disk[actor]) == [2]
    sim.crash(host)  # the worker and the head die together: its live state is gone
    _restart(sim)  # the new head waits the grace for its host, then restores it
    assert actors.restored_newest[-1] == (actor, 2)
    # The checkpoint holds the answers of the calls it covers: they reach the driver; the
    # call past it runs again.
    assert [d.got[c] for c in calls] == [result_of(1, 1), result_of(3, 2), result_of(6, 3)]
    assert all(d.answers[c] == ["value"] for c in calls)
    assert actors.runs[calls[0]] == actors.runs[calls[1]] == 1 and actors.runs[calls[2]] == 2
    later = _call(sim, d, actor, 4)
    sim.settle()
    assert d.got[later] == result_of(10, 4)
    d.core.kill_actor(actor)
    sim.driver_call(d)
    _release(sim, d, *calls, later)
    _clean(sim)


def test_a_caller_that_leaves_has_its_calls_checkpointed_so_no_restart_undoes_them() -> None:
    sim = _sim(seed=17, workers=2, drivers=2)
    actors = SimActors(sim)
    owner, leaver = sim.drivers
    actor = _start_actor(sim, owner, every=0)  # no periodic checkpoint
    calls = [_call(sim, leaver, actor, v) for v in (1, 2)]
    sim.settle()
    assert [leaver.got[c] for c in calls] == [result_of(1, 1), result_of(3, 2)]
    assert actor not in actors.disk  # nothing covers them yet
    # The caller leaves, its answers read: nobody would send its calls again after a head
    # restart that loses the live copy too, so the head has a checkpoint cover them.
    sim.disconnect(leaver)
    sim.settle()
    assert sorted(actors.disk[actor]) == [2]
    host = _host(sim, actor)
    sim.crash(host)  # the worker and the head die together
    _restart(sim)
    assert actors.restored_newest[-1] == (actor, 2)
    later = _call(sim, owner, actor, 10)
    sim.settle()
    assert owner.got[later] == result_of(13, 10)  # the leaver's calls are in the state
    owner.core.kill_actor(actor)
    sim.driver_call(owner)
    _release(sim, owner, later)
    _clean(sim)


def test_an_actor_with_no_checkpoint_lost_with_its_head_is_rebuilt_from_the_kept_calls() -> None:
    sim = _sim(seed=16, workers=2)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=0)
    calls = [_call(sim, d, actor, v) for v in (5, 6)]
    sim.settle()
    assert actor not in actors.disk and d.core.kept(actor) == 2
    sim.crash(_host(sim, actor))
    _restart(sim)
    assert actors.restored_newest[-1] == (actor, None)  # none: created again, calls replayed
    assert [s for s in actors.starts if s[0] == actor][-1] == (actor, None)
    assert all(actors.runs[c] == 2 for c in calls)
    assert d.answers[calls[0]] == ["value"] and d.answers[calls[1]] == ["value"]
    later = _call(sim, d, actor, 7)
    sim.settle()
    assert d.got[later] == result_of((5 + 6 + 7) & MASK, 7)
    d.core.kill_actor(actor)
    sim.driver_call(d)
    _release(sim, d, *calls, later)
    _clean(sim)


def test_a_call_from_a_driver_resuming_before_the_actors_owner_waits_for_it() -> None:
    sim = _sim(seed=17, workers=2, drivers=2)
    owner, caller = sim.drivers
    actors = SimActors(sim)
    actor = _start_actor(sim, owner, every=0)
    mine = _call(sim, caller, actor, 1)
    sim.settle()
    head = sim.restart_head()
    deliver_all(sim)
    for core in list(sim.lost):
        if core is not owner.core:
            sim.reconnect(core)
    deliver_all(sim)  # the caller resumed: its call to the actor waits for its owner
    assert actor in head._resume.parked
    sim.reconnect(owner.core)
    sim.settle()
    assert not head._resume.parked
    assert _host(sim, actor).hosted.total == 1  # type: ignore[union-attr]
    assert actors.runs[mine] == 1 and caller.answers[mine] == ["value"]  # placed back
    owner.core.kill_actor(actor)
    sim.driver_call(owner)
    _release(sim, caller, mine)
    _clean(sim)


def test_a_task_cancelled_while_the_head_is_away_never_runs_again() -> None:
    sim = _sim(seed=18, workers=1)
    d = sim.drivers[0]
    oid = d.core.submit_many(TASK_ID, arg(16, 1), 2)
    sim.driver_call(d)
    deliver_all(sim)
    sim.restart_head()
    deliver_all(sim)
    d.core.cancel(oid + 1)  # a task-many's second result: the whole task
    sim.driver_call(d)
    assert d.failed[oid] == d.failed[oid + 1] == "cancelled"
    _reconnect_all(sim)
    sim.settle()
    assert oid not in sim.runs and oid not in d.got
    _release(sim, d, oid, oid + 1)
    _clean(sim)


def test_actor_work_queued_before_a_head_loss_runs_on_and_answers_through_the_new_head() -> None:
    sim = _sim(seed=19, workers=1)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=2)
    w = sim.workers[0]
    calls = [_call(sim, d, actor, v) for v in (1, 2, 3)]
    deliver_all(sim)
    assert len(w.actor_work) == 4  # three calls and a checkpoint, not run yet
    # The head restarts; the worker rejoins before its binding ran that work. The work
    # runs on, in the order the old head sent it (the state its answers come from), but
    # its reports (the checkpoint's above all) must not reach the new head as news.
    sim.restart_head()
    deliver_all(sim)
    _reconnect_all(sim)
    deliver_all(sim)
    head = sim.head
    record = next(a for a in head.actors() if a.actor_id == actor)
    while w.actor_work and not isinstance(w.actor_work[0], dp.StartActor):
        actors.run(w)  # the old head's work: its reports are dropped
    deliver_all(sim)
    assert record.covered == -1 and record.restoring  # no stale checkpoint taken as news
    sim.settle()
    inst = _host(sim, actor).hosted
    assert isinstance(inst, Instance) and inst.total == 6 and inst.label == record.seq
    # Placed back: the calls the driver resends ran already, and are answered from what
    # the worker kept, once each; nothing runs twice and nothing is lost.
    assert actors.restored_live[-1] == actor and not actors.restored_newest
    assert [d.got[c] for c in calls] == [result_of(1, 1), result_of(3, 2), result_of(6, 3)]
    assert all(actors.runs[c] == 1 and d.answers[c] == ["value"] for c in calls)
    later = _call(sim, d, actor, 4)
    sim.settle()
    assert d.got[later] == result_of(10, 4) and inst.label == record.seq
    d.core.kill_actor(actor)
    sim.driver_call(d)
    _release(sim, d, *calls, later)
    _clean(sim)


def test_a_start_queued_before_a_head_loss_does_not_answer_the_new_heads_restore() -> None:
    sim = _sim(seed=20, workers=2)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=1)
    first = _call(sim, d, actor, 1)
    sim.settle()
    assert sorted(actors.disk[actor]) == [1]
    old = _host(sim, actor)
    sim.crash(old)  # the actor goes to the other worker: a restore from checkpoint 1...
    deliver_all(sim)
    (w,) = [x for x in sim.workers if x.alive]
    assert isinstance(w.actor_work[0], dp.StartActor) and w.actor_work[0].covers == 1
    sim.restart_head()  # ... which the head dies before the worker runs
    deliver_all(sim)
    _reconnect_all(sim)
    deliver_all(sim)  # the new head restores it on the same worker (RESTORE_NEWEST)
    sim.settle()
    inst = _host(sim, actor).hosted
    record = next(a for a in sim.head.actors() if a.actor_id == actor)
    assert isinstance(inst, Instance) and inst.total == 1
    assert inst.label == record.seq and record.covered == 1
    later = _call(sim, d, actor, 2)  # (its checkpoint is named as the head numbers it)
    sim.settle()
    assert d.got[later] == result_of(3, 2) and inst.label == record.seq == 2
    assert sorted(actors.disk[actor]) == [1, 2]
    d.core.kill_actor(actor)
    sim.driver_call(d)
    _release(sim, d, first, later)
    _clean(sim)


def test_an_actor_whose_placed_back_host_is_lost_before_it_answers_waits_for_it_again() -> None:
    sim = _sim(seed=21, workers=2)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=0)  # no checkpoint: only its live copy holds the order
    calls = [_call(sim, d, actor, v) for v in (1, 2)]
    sim.settle()
    host = _host(sim, actor)
    (other,) = [w for w in sim.workers if w is not host]
    head = sim.restart_head()
    deliver_all(sim)
    for core in (host.core, other.core, d.core):  # the host reports its copy, then the
        sim.reconnect(core)  # driver resumes: the actor is placed back there...
        deliver_all(sim)
    assert isinstance(host.actor_work[-1], dp.StartActor)
    sim.cut(host.core, reset=False)  # ... whose link breaks before it answers
    deliver_all(sim)
    record = next(a for a in head.actors() if a.actor_id == actor)
    # Lost is not gone: it waits for the copy to rejoin (the grace at most), as at first,
    # rather than being rebuilt on the free worker in the order the calls were resent.
    assert record.worker is None and actor in head._actors.hosts.awaiting
    assert not other.actor_work and not actors.restored_newest
    _reconnect_all(sim)
    sim.settle()
    assert _host(sim, actor) is host and not actors.restored_newest
    assert all(actors.runs[c] == 1 and d.answers[c] == ["value"] for c in calls)
    later = _call(sim, d, actor, 3)
    sim.settle()
    assert d.got[later] == result_of(6, 3)
    d.core.kill_actor(actor)
    sim.driver_call(d)
    _release(sim, d, *calls, later)
    _clean(sim)


def test_checkpoints_of_an_actor_killed_while_no_worker_has_a_store_go_once_one_comes() -> None:
    sim = _sim(seed=22, workers=2)
    actors = SimActors(sim)
    d = sim.drivers[0]
    actor = _start_actor(sim, d, every=1)
    first = _call(sim, d, actor, 1)
    sim.settle()
    host = _host(sim, actor)
    (other,) = [w for w in sim.workers if w is not host]
    sim.cut(other.core, reset=True)  # the other worker is away...
    deliver_all(sim)
    sim.drain(host)  # ... when the actor's host drains: it moves by its checkpoint and
    sim.settle()  # waits for a worker, its host gone
    assert not host.alive and actor in actors.disk
    d.core.kill_actor(actor)  # killed where no worker hosts it, none with a store there
    sim.driver_call(d)
    sim.settle()
    assert actor in actors.disk
    _reconnect_all(sim)  # the next worker with a store removes its checkpoints
    sim.settle()
    assert actor not in actors.disk and actor in actors.stopped
    _release(sim, d, first)
    _clean(sim)
