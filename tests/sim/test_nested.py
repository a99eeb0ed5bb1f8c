"""Nested gets in the simulation: fib(n) where every call is a task that reads its children.

Each simulated worker runs a client (the CLIENT role, as a real worker's session) that the
fib task submits its two children through; the task then blocks (its worker tells the head,
`SPAN_BLOCKED`, so the head lends its slot) until both children's values arrive, resumes
(`SPAN_RESUMED`) and answers their sum. With one slot per worker and blocked tasks keeping
their slots, fib(4) on two workers would deadlock: here fib(10) must finish, under seeded
random delivery, and leave the head and the workers clean.
"""

from __future__ import annotations

import struct

import pytest

import dista_proto as dp

from .support.cluster import Sim, SimDriver, SimWorker, deliver_all

FIB_ID = 11


def _fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def _value(n: int) -> bytes:
    return struct.pack("<q", n)


class NestedSim:
    def __init__(self, seed: int, workers: int = 2, slots: int = 1, prefetch: int = 0) -> None:
        self.sim = Sim(seed, workers=workers, drivers=1, worker_slots=slots, prefetch=prefetch)
        sim = self.sim
        self.rng = sim.rng
        # Each worker's client session, as `SimDriver`s so the sim routes their decisions.
        self.clients: dict[int, SimDriver] = {}
        for w in sim.workers:
            client = SimDriver(sim, len(sim.drivers))
            client.core = dp.Driver(registry_hash=sim.registry, part=1000, role=dp.Role.CLIENT)
            sim.drivers.append(client)
            sim._connect_to_head(client.core)
            client.core.start(sim.now)
            sim._run_decisions(client.core)
            self.clients[id(w)] = client
        sim.settle()
        # oid -> the children it waits for, on the worker running it
        self.waiting: dict[int, tuple[SimWorker, int, int]] = {}
        self.blocks = 0

    def submit(self, client: SimDriver, n: int) -> int:
        oid = client.core.submit(FIB_ID, _value(n))
        client.live.append(oid)
        return oid

    def value(self, client: SimDriver, oid: int) -> int | None:
        got = client.got.get(oid)
        if got is None:
            assert oid not in client.failed, client.failed[oid]
            return None
        return int(struct.unpack("<q", got)[0])

    def run_one(self, w: SimWorker) -> None:
        """One runner thread of ``w`` moves: starts a task, or resumes a blocked one."""
        sim = self.sim
        client = self.clients[id(w)]
        ready = [t for t in w.running if t.object_id not in self.waiting]
        resumable = [
            oid
            for oid, (worker, a, b) in self.waiting.items()
            if worker is w and a in client.got and b in client.got
        ]
        if resumable and (not ready or self.rng.random() < 0.5):
            oid = self.rng.choice(resumable)
            _, a, b = self.waiting.pop(oid)
            total = (self.value(client, a) or 0) + (self.value(client, b) or 0)
            for child in (a, b):
                client.core.release(child)
                client.live.remove(child)
            sim._run_decisions(client.core)
            w.core.task_resumed(oid, sim.now)
            self.finish(w, oid, total)
            return
        if not ready:
            return
        task = self.rng.choice(ready)
        assert task.argument is not None
        n = int(struct.unpack("<q", task.argument)[0])
        if n < 2:
            self.finish(w, task.object_id, n)
            return
        a, b = self.submit(client, n - 1), self.submit(client, n - 2)
        sim._run_decisions(client.core)
        self.waiting[task.object_id] = (w, a, b)
        self.blocks += 1
        w.core.task_blocked(task.object_id, sim.now)
        sim._run_decisions(w.core)

    def finish(self, w: SimWorker, oid: int, value: int) -> None:
        task = next(t for t in w.running if t.object_id == oid)
        w.running.remove(task)
        w.core.task_done(oid, [_value(value)], self.sim.now, self.sim.now + 1)
        self.sim._run_decisions(w.core)

    def fetch_located(self) -> None:
        for client in self.clients.values():
            for oid in client.live:
                if oid in client.located and oid not in client.got:
                    client.located.discard(oid)
                    client.core.fetch(oid)
            self.sim._run_decisions(client.core)

    def run(self, n: int, limit: int = 500_000) -> int:
        sim = self.sim
        driver = sim.drivers[0]
        top = driver.core.submit(FIB_ID, _value(n))
        driver.live.append(top)
        sim.driver_call(driver)
        for _ in range(limit):
            sim.now += 1
            busy = [p for p in sim.pipes if p.chunks or p.closed]
            runnable = [w for w in sim.workers if w.running]
            if top in driver.got:
                break
            assert busy or runnable, (
                f"seed {sim.seed}: deadlock: nothing can move, fib({n}) unanswered; "
                f"{len(self.waiting)} tasks blocked"
            )
            if runnable and (not busy or self.rng.random() < 0.3):
                self.run_one(self.rng.choice(runnable))
            else:
                sim.deliver(self.rng.choice(busy))
            self.fetch_located()
        else:
            raise AssertionError(f"seed {sim.seed}: fib({n}) did not finish in {limit} steps")
        result = self.value(driver, top)
        driver.core.release(top)
        driver.live.remove(top)
        sim.driver_call(driver)
        sim.settle()
        return result if result is not None else -1


@pytest.mark.parametrize("seed", range(12))
def test_fib_10_with_every_call_a_task_finishes_on_two_one_slot_workers(seed: int) -> None:
    nested = NestedSim(seed, workers=2, slots=1, prefetch=4 if seed % 2 else 0)
    assert nested.run(10) == _fib(10) == 55
    assert nested.blocks == 88  # every call with n >= 2 blocked once, on its children
    stats = nested.sim.head.stats()
    assert stats == dp.HeadStats(0, 0, 0, 0, 2), f"seed {seed}: {stats}"
    for peer in nested.sim.head._wire.peers.values():
        if peer.role == dp.Role.WORKER:
            assert peer.free == 1 and peer.blocked == 0 and not peer.running
    assert all(not w.core.store for w in nested.sim.workers)


def test_a_blocked_task_shows_in_status_and_lends_its_slot() -> None:
    nested = NestedSim(3, workers=1, slots=1)
    sim = nested.sim
    driver = sim.drivers[0]
    top = driver.core.submit(FIB_ID, _value(2))
    sim.driver_call(driver)
    deliver_all(sim)
    (w,) = sim.workers
    nested.run_one(w)  # fib(2) submits fib(1), fib(0) and blocks
    deliver_all(sim)
    text = sim.head.status()
    assert "running 2 (blocked 1)" in text, text
    # Its slot was lent: a child runs on the only worker while the parent waits.
    assert len(w.running) == 2
    assert sim.head.stats().running == 2
    for _ in range(100):
        if top in driver.got:
            break
        if w.running:
            nested.run_one(w)
        deliver_all(sim)
        nested.fetch_located()
        deliver_all(sim)
    assert nested.value(driver, top) == 1
