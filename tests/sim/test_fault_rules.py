"""Rules of the hardened head, each driven step by step over the simulated cluster:
cancel of a task a worker holds, work taken back for an idle worker, tasks any worker runs,
tasks no worker can run, force-cancel, and what `held_bytes` counts."""

from __future__ import annotations

import dista_proto as dp
from dista_proto._head_records import ObjState

from .support.cluster import PART, TASK_ID, Sim, SimWorker, arg, compute, deliver_all

SECOND = 1_000_000_000


def _finish(sim: Sim, w: SimWorker, oid: int, value: bytes = b"v") -> None:
    task = next(t for t in w.running if t.object_id == oid)
    w.running.remove(task)
    w.core.task_done(oid, [value] * task.results, sim.now, sim.now + 1)
    sim._run_decisions(w.core)


def _cancels_delivering(sim: Sim) -> list[dp.CancelTask]:
    """Deliver every byte; the tasks workers were asked for back, left for the test to
    answer (the sim would decide at random whether they had started)."""
    asked: list[dp.CancelTask] = []
    original = sim._cancel_task
    sim._cancel_task = lambda worker, decision: asked.append(decision)  # type: ignore[method-assign]
    try:
        deliver_all(sim)
    finally:
        sim._cancel_task = original  # type: ignore[method-assign]
    return asked


def _running(w: SimWorker) -> list[int]:
    return [t.object_id for t in w.running]


def test_a_cancelled_task_its_worker_holds_is_withdrawn_and_never_runs() -> None:
    sim = Sim(seed=1, workers=1, drivers=1, worker_slots=2)
    sim.settle()
    d, w = sim.drivers[0], sim.workers[0]
    a, b, c = (d.core.submit(TASK_ID, arg(16, i)) for i in range(3))
    sim.driver_call(d)
    deliver_all(sim)
    assert _running(w) == [a, b]  # two slots: a runs, b waits on the worker; c at the head
    for oid in (a, b, c):
        d.core.cancel(oid)
    sim.driver_call(d)
    withdrawn = _cancels_delivering(sim)
    assert [(x.object_id, x.withdraw) for x in withdrawn] == [(a, False), (b, False)]
    # The binding: b had not started, so it drops it; a runs and is interrupted.
    w.running = [t for t in w.running if t.object_id != b]
    w.core.task_withdrawn(b, sim.now)
    sim._run_decisions(w.core)
    _finish(sim, w, a)  # (an interrupted task answers with its error; any answer will do)
    deliver_all(sim)
    for oid in (a, b, c):
        assert d.failed.get(oid) == "cancelled"
    assert not w.running
    for oid in (a, b, c):
        d.core.release(oid)
    sim.driver_call(d)
    sim.settle()
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)
    (peer,) = [p for p in sim.head._wire.peers.values() if p.role == dp.Role.WORKER]
    assert peer.free == 2


def test_an_idle_worker_takes_back_a_task_another_holds_unstarted() -> None:
    sim = Sim(seed=2, workers=2, drivers=1, worker_slots=2)
    sim.settle()
    d = sim.drivers[0]
    a, b = sim.workers
    refs = [d.core.submit(TASK_ID, arg(16, i)) for i in range(4)]
    sim.driver_call(d)
    deliver_all(sim)
    assert len(a.running) == 2 and len(b.running) == 2
    # b finishes both of its tasks; a is still on its first, its second not started.
    for oid in _running(b):
        _finish(sim, b, oid)
    decisions = _cancels_delivering(sim)
    newest = _running(a)[-1]
    assert [(x.object_id, x.withdraw) for x in decisions] == [(newest, True)]
    a.running = [t for t in a.running if t.object_id != newest]
    a.core.task_withdrawn(newest, sim.now)
    sim._run_decisions(a.core)
    deliver_all(sim)
    assert _running(b) == [newest]  # it runs on the idle worker now
    sim.settle()
    assert all(oid in d.got for oid in refs)
    assert sim.runs.get(newest) == 1


def test_a_withdrawal_that_comes_too_late_lets_the_task_run_where_it_is() -> None:
    sim = Sim(seed=3, workers=2, drivers=1, worker_slots=2)
    sim.settle()
    d = sim.drivers[0]
    b = sim.workers[1]
    refs = [d.core.submit(TASK_ID, arg(16, i)) for i in range(4)]
    sim.driver_call(d)
    deliver_all(sim)
    for oid in _running(b):
        _finish(sim, b, oid)
    decisions = _cancels_delivering(sim)
    assert len(decisions) == 1
    # It had started: the worker ignores the withdrawal, and the task answers from there.
    sim.settle()
    assert all(oid in d.got for oid in refs)
    assert all(n == 1 for n in sim.runs.values())


def test_tasks_of_a_portable_id_run_only_where_by_value_code_is_allowed() -> None:
    # By-value code runs on workers of its driver's registry, or on workers that accept
    # by-value code of any registry: not on another team's workers.
    sim = Sim(seed=4, workers=1, drivers=1)
    portable = 0xB1
    sim.head = dp.Head(epoch=1, first_number=5, portable_tasks=[portable])
    # Rewire: a worker of another registry, and the driver.
    sim.pipes.clear()
    sim.ends.clear()
    w = sim.workers[0]
    w.core = dp.Worker(
        registry_hash=0xE15E, address=w.address, inline_threshold=256, part=PART, min_part=PART
    )
    d = sim.drivers[0]
    d.core = dp.Driver(registry_hash=sim.registry, part=PART)
    for core in (w.core, d.core):
        sim._connect_to_head(core)
        core.start(sim.now)
        sim._run_decisions(core)
    sim.settle()
    by_value = d.core.submit(portable, arg(16))
    by_name = d.core.submit(TASK_ID, arg(16, 1))
    sim.driver_call(d)
    sim.settle()
    assert by_value not in d.got and by_value not in d.failed  # not on the other registry's
    assert by_name not in d.got and by_name not in d.failed  # waits for its registry
    status = sim.head.status()
    assert "NO WORKER has this registry" in status
    assert f"by-value tasks of registry {sim.registry:#018x}: queued 1" in status
    assert "workers accepting any: none" in status
    # A worker of a third registry that opted in runs it (and not the by-name task).
    opted = SimWorker(sim, len(sim.workers))
    sim.workers.append(opted)
    sim.by_address[opted.address] = opted
    opted.core = dp.Worker(
        registry_hash=0xF00D,
        address=opted.address,
        inline_threshold=256,
        part=PART,
        min_part=PART,
        accept_by_value=True,
    )
    sim._connect_to_head(opted.core)
    opted.core.start(sim.now)
    sim._run_decisions(opted.core)
    sim.settle()
    assert by_value in d.got
    assert by_name not in d.got and by_name not in d.failed
    assert f"workers accepting any: {opted.address}" in sim.head.status()


def test_tasks_no_worker_can_run_fail_after_the_grace_with_what_to_do() -> None:
    sim = Sim(seed=5, workers=1, drivers=1)
    sim.settle()
    d, w = sim.drivers[0], sim.workers[0]
    sim.crash(w)
    sim.settle()
    oid = d.core.submit(TASK_ID, arg(16))
    sim.driver_call(d)
    sim.settle()
    head = sim.head
    deadline = head.next_deadline()
    assert deadline is not None and deadline > sim.now
    head.on_timer(deadline - 1)
    sim._run_decisions(head)
    sim.settle()
    assert oid not in d.failed  # still in its grace: workers may be starting
    head.on_timer(deadline)
    sim._run_decisions(head)
    sim.settle()
    assert "no worker can run task 0x7" in d.failed[oid]
    assert f"registry {sim.registry:#018x}" in d.failed[oid]
    assert head.next_deadline() is None
    d.core.release(oid)
    sim.driver_call(d)
    sim.settle()
    assert head.stats() == dp.HeadStats(0, 0, 0, 0, 0)


def test_a_worker_joining_in_the_grace_runs_the_waiting_tasks() -> None:
    sim = Sim(seed=6, workers=2, drivers=1)
    sim.settle()
    d = sim.drivers[0]
    first, second = sim.workers
    sim.crash(first)
    sim.crash(second)
    sim.settle()
    oid = d.core.submit(TASK_ID, arg(16))
    sim.driver_call(d)
    sim.settle()
    assert sim.head.next_deadline() is not None
    second.alive = True
    second.core = dp.Worker(
        registry_hash=sim.registry, address=second.address, inline_threshold=256, part=PART
    )
    sim._connect_to_head(second.core)
    second.core.start(sim.now)
    sim._run_decisions(second.core)
    sim.settle()
    assert oid in d.got
    assert sim.head.next_deadline() is None


def test_force_cancel_stops_the_worker_running_the_task() -> None:
    sim = Sim(seed=7, workers=2, drivers=1)
    sim.settle()
    d = sim.drivers[0]
    oid = d.core.submit(TASK_ID, arg(16))
    sim.driver_call(d)
    deliver_all(sim)
    (w,) = [w for w in sim.workers if w.running]
    d.core.cancel(oid, force=True)
    sim.driver_call(d)
    deliver_all(sim)
    assert w.core.stopped  # told to stop: its process ends (a supervisor replaces it)
    assert d.failed[oid] == "cancelled"
    assert sim.head.stats().workers == 1


def test_held_bytes_count_stored_values_too() -> None:
    sim = Sim(seed=8, workers=1, drivers=1)
    sim.settle()
    d = sim.drivers[0]
    small = d.core.submit(TASK_ID, arg(100))  # inline: held by the head
    large = d.core.submit(TASK_ID, arg(3000))  # stored: held by the worker
    sim.driver_call(d)
    sim.settle()
    assert sim.head.stats().held_bytes == 100 + 3000
    for oid in (small, large):
        d.core.release(oid)
    sim.driver_call(d)
    sim.settle()
    assert sim.head.stats() == dp.HeadStats(0, 0, 0, 0, 1)


def test_an_object_server_refuses_parts_under_the_floor() -> None:
    worker = dp.Worker(registry_hash=1, address=dp.Address("10.0.0.9", 7000))
    worker.store[5] = b"x" * (1 << 20)
    link = worker.connection_made(0)
    fetcher = dp.Connection(dp.Role.FETCHER)
    fetcher.send(dp.Fetch(5, part=1))
    for buffer in fetcher.data_to_send():
        worker.receive_data(link, bytes(buffer), 0)
    out = b"".join(
        bytes(b) for d in worker.decisions() if isinstance(d, dp.Write) for b in d.buffers
    )
    fetcher.receive_data(out)
    (answer,) = fetcher.next_events()
    assert isinstance(answer, dp.Error)
    assert "ask for at least 65536" in answer.message


def _last_worker_killed_at_a_random_step(seed: int) -> None:
    """A driver's independent tasks on one worker, SIGKILLed at a random step; maybe a
    replacement joins within the grace. Every task ends: with its value, or (no worker
    came) failed after the grace naming its registry; nothing waits, the head ends at zero."""
    sim = Sim(seed=seed, workers=1, drivers=1, worker_slots=1 + seed % 2)
    rng = sim.rng
    sim.settle()
    d, w = sim.drivers[0], sim.workers[0]
    oids = []
    for _ in range(rng.randrange(1, 12)):
        a = arg(rng.choice([4, 16]))  # inline results: the driver has each value
        oids.append((d.core.submit(TASK_ID, a), a))
    sim.driver_call(d)
    for _ in range(rng.randrange(0, 60)):
        if not sim.step():
            break
    sim.crash(w)
    replaced = seed % 3 == 0
    if replaced:
        sim.settle()
        sim.add_worker()
    sim.settle()
    head = sim.head
    while (deadline := head.next_deadline()) is not None:
        sim.now = max(sim.now, deadline)
        head.on_timer(sim.now)
        sim._run_decisions(head)
        sim.settle()
    for oid, a in oids:
        if oid in d.got:
            assert d.got[oid] == compute(a, (), False), f"seed {seed}: wrong value"
        else:
            assert not replaced, (
                f"seed {seed}: {oid:#x} failed with a worker there: {d.failed.get(oid)!r}"
            )
            assert "none of the connected workers" in d.failed.get(oid, ""), (
                f"seed {seed}: {oid:#x} neither ran nor failed: {d.failed.get(oid)!r}"
            )
    assert head.stats().pending == 0 and head.stats().running == 0, f"seed {seed}"
    for oid, _ in oids:
        d.core.release(oid)
    sim.driver_call(d)
    sim.settle()
    assert head.stats()[:4] == (0, 0, 0, 0), f"seed {seed}: {head.stats()}"


def test_tasks_whose_last_worker_is_killed_at_a_random_step_run_or_fail_never_wait() -> None:
    for seed in range(60):
        _last_worker_killed_at_a_random_step(seed)


def test_a_cancel_between_a_tasks_results_keeps_the_one_already_stored() -> None:
    # A task-many's results come in one frame each: its first, stored on the worker, has
    # reached the head when the driver's cancel does, the rest still on their way.
    sim = Sim(seed=4, workers=1, drivers=1)
    sim.settle()
    d, w = sim.drivers[0], sim.workers[0]
    oid = d.core.submit_many(TASK_ID, arg(4 * PART), 3)
    d.live.append(oid)
    sim.driver_call(d)
    deliver_all(sim)
    _finish(sim, w, oid, b"r" * (4 * PART))
    pipe = sim.ends[(id(w.core), dp.HEAD_LINK)]  # the worker's frames to the head
    data = b"".join(pipe.chunks)
    pipe.chunks.clear()
    objects = sim.head._objects.by_id
    while objects[oid].state is not ObjState.STORED:  # one frame at a time
        size = 4 + dp.frame.frame_length(data[:4])
        sim.head.receive_data(pipe.link, data[:size], sim.now)
        data = data[size:]
    assert objects[oid + 1].state is ObjState.PENDING
    pipe.chunks.append(data)
    d.core.cancel(oid)
    sim.driver_call(d)
    head_pipe = sim.ends[(id(d.core), dp.HEAD_LINK)]
    while head_pipe.chunks:
        sim.deliver(head_pipe)  # the cancel first
    sim.settle()
    # The result given is never taken back: it stays on the worker and reaches the driver;
    # the others fail as cancelled.
    assert oid in w.core.store and d.got.get(oid) == b"r" * (4 * PART)
    assert d.failed.get(oid + 1) == d.failed.get(oid + 2) == "cancelled"
    for i in range(3):
        d.core.release(oid + i)
    sim.driver_call(d)
    sim.settle()
    assert oid not in w.core.store  # freed with the last reference
