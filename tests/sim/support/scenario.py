"""One seeded scenario: random task graphs from several drivers, cancels, releases and a
crash, then the invariants every run must keep.

Run one seed by hand: ``python -m tests.sim.support.scenario SEED``.
"""

from __future__ import annotations

import json
import struct
import sys

import dista_proto as dp

from .cluster import TASK_ID, Sim, SimDriver, SimObserver, compute


class Scenario:
    #: When this run takes a dashboard's snapshot (-1: never; the scenarios built on this
    #: one submit actor calls and chains its checks do not count), and tasks submitted.
    look_at = -1
    tasks = 0

    def __init__(self, seed: int) -> None:
        # Every other group of seeds runs with 2 slots and prefetching, as the asyncio head.
        deep = (seed // 9) % 2 == 1
        self.sim = Sim(
            seed,
            workers=1 + seed % 3,
            drivers=1 + (seed // 3) % 3,
            worker_slots=2 if deep else 1,
            prefetch=4 if deep else 0,
            blocking=seed % 4 >= 2,
        )
        self.rng = self.sim.rng
        self.uncertain: set[int] = set()  # may fail (cancelled, lost) but never be wrong
        self.inputs: dict[int, list[int]] = {}  # object -> its task's inputs
        self.siblings: dict[int, range] = {}  # object -> every result of its task
        self.crashed = False
        self.gone: list[SimDriver] = []  # drivers that died mid-run
        self.crash_at = self.rng.randrange(5, 60) if seed % 3 == 0 else -1
        self.leave_at = self.rng.randrange(5, 60) if seed % 5 == 0 else -1
        # A dashboard's snapshot, mid-run: in this scenario only (see `look_at`).
        self.look_at = self.rng.randrange(5, 60) if type(self) is Scenario else -1
        self.tasks = 0  # tasks submitted

    def size(self) -> bytes:
        size = self.rng.choice([4, 16, 100, 300, 3000])
        return struct.pack("<I", size) + self.rng.randbytes(4)

    def submit(self, d: SimDriver) -> None:
        self.tasks += 1
        core = d.core
        choice = self.rng.random()
        live = [o for o in d.live if o in d.expected]
        if choice < 0.45 or not live:
            arg = self.size()
            oid = core.submit(TASK_ID, arg)
            d.expected[oid] = compute(arg, (), False)
            d.live.append(oid)
            self.siblings[oid] = range(oid, oid + 1)
        elif choice < 0.6:
            arg = self.size()
            n = self.rng.randrange(1, 4)
            oid = core.submit_many(TASK_ID, arg, n)
            base = compute(arg, (), False)
            for i in range(n):
                d.expected[oid + i] = base + bytes([i]) if n > 1 else base
                d.live.append(oid + i)
                self.siblings[oid + i] = range(oid, oid + n)
        else:
            gather = self.rng.random() < 0.6
            count = self.rng.randrange(0, 4) if gather else 1
            inputs = [self.rng.choice(live) for _ in range(count)]
            value = self.size() if self.rng.random() < 0.5 else None
            oid = core.submit_after(TASK_ID, inputs, gather=gather, value=value)
            values = [d.expected[i] for i in inputs]
            if any(v is None for v in values):
                d.expected[oid] = None
            else:
                d.expected[oid] = compute(value, tuple(v for v in values if v is not None), gather)
            self.inputs[oid] = inputs
            self.siblings[oid] = range(oid, oid + 1)
            d.live.append(oid)
        self.sim.driver_call(d)

    def release_some(self, d: SimDriver) -> None:
        if d.live:
            oid = d.live.pop(self.rng.randrange(len(d.live)))
            d.core.release(oid)
            self.sim.driver_call(d)

    def cancel_some(self, d: SimDriver) -> None:
        if d.live:
            oid = self.rng.choice(d.live)
            d.core.cancel(oid)
            d.cancelled.add(oid)
            self.uncertain.update(self.siblings[oid])
            self.sim.driver_call(d)

    def crash_one(self) -> None:
        alive = [w for w in self.sim.workers if w.alive]
        if len(alive) > 1 and not self.crashed:
            self.crashed = True
            self.sim.crash(self.rng.choice(alive))

    def run(self) -> None:
        sim = self.sim
        sim.settle()
        for d in sim.drivers:
            assert d.core.ready, f"seed {sim.seed}: driver {d.index} was never welcomed"
        for step in range(self.rng.randrange(20, 80)):
            if step == self.crash_at:
                self.crash_one()
            if step == self.look_at:
                self.check_snapshot(final=False)
            if step == self.leave_at and len(sim.drivers) - len(self.gone) > 1:
                leaving = self.rng.choice([d for d in sim.drivers if d not in self.gone])
                self.gone.append(leaving)
                sim.disconnect(leaving)
            d = self.rng.choice([d for d in sim.drivers if d not in self.gone])
            roll = self.rng.random()
            if roll < 0.7:
                self.submit(d)
            elif roll < 0.8:
                self.release_some(d)
            elif roll < 0.87:
                self.cancel_some(d)
            elif roll < 0.9:
                self.crash_one()
            for _ in range(self.rng.randrange(0, 30)):
                if not sim.step():
                    break
        sim.settle()
        self.check_values()
        if self.look_at >= 0:
            self.check_snapshot(final=True)
        self.check_timeline()
        self.check_clean()
        if sim.seed % 2:
            self.check_stop()

    def is_uncertain(self, oid: int) -> bool:
        # Inputs always have smaller IDs than their task's results within one driver.
        return oid in self.uncertain or any(self.is_uncertain(i) for i in self.inputs.get(oid, ()))

    def check_values(self) -> None:
        seed = self.sim.seed
        for d in self.sim.drivers:
            if d in self.gone:
                continue
            for oid in d.live:
                expected = d.expected[oid]
                got = d.got.get(oid)
                failed = d.failed.get(oid)
                assert got is not None or failed is not None, (
                    f"seed {seed}: object {oid:#x} of driver {d.index} never resolved"
                )
                if got is not None:
                    assert got == expected, f"seed {seed}: object {oid:#x} has a wrong value"
                    continue
                if expected is None:
                    assert "failed" in failed or "cancelled" in failed or "lost" in failed
                    continue
                allowed = self.is_uncertain(oid) or self.crashed
                assert allowed, f"seed {seed}: object {oid:#x} failed unexpectedly: {failed}"

    def check_timeline(self) -> None:
        """An observer sees every finished task and leaves them; a driver takes its own."""
        sim = self.sim
        observer = SimObserver(sim)
        status = observer.ask(dp.Status())
        assert isinstance(status, dp.Status) and status.text and "dista head" in status.text
        seen = observer.ask(dp.Timeline())
        assert isinstance(seen, dp.Timeline) and seen.records is not None
        again = observer.ask(dp.Timeline())
        assert isinstance(again, dp.Timeline) and again.records == seen.records
        mine = 0
        for d in sim.drivers:
            if d in self.gone:
                continue
            d.timeline.clear()
            d.core.request_timeline()
            sim.driver_call(d)
            sim.settle()
            for r in d.timeline:
                assert r.object_id >> 40 == d.core.number, "a driver gets only its own records"
                assert r.submitted <= r.queued <= r.dispatched <= r.settled, r
                assert r.arrived <= r.started <= r.ended, r
            mine += len(d.timeline)
            d.timeline.clear()
            d.core.request_timeline()
            sim.driver_call(d)
            sim.settle()
            assert d.timeline == [], "a driver's timeline request takes its records"
        assert mine <= len(seen.records)

    def check_snapshot(self, final: bool) -> None:
        """A dashboard's snapshot (docs/protocol.md, "Extensions: the dashboard") agrees
        with the head: every task not running is in one queue row, with a reason; the
        tallies count every task submitted; the rows are the timeline's records."""
        sim = self.sim
        observer = SimObserver(sim)
        answer = observer.ask(dp.Snapshot(0))
        assert isinstance(answer, dp.Snapshot) and answer.document is not None
        doc = json.loads(answer.document)
        where = f"seed {sim.seed}"
        queues = doc["queues"]
        assert sum(q["count"] for q in queues) == doc["totals"]["pending"], (where, queues)
        causes = {"inputs", "no-worker", "draining", "actors", "busy", "sending"}
        assert all(q["cause"] in causes and q["reason"] for q in queues), (where, queues)
        waiting = sum(d["waiting"] + d["queued"] for d in doc["drivers"])
        assert waiting == doc["totals"]["pending"], (where, doc["drivers"])
        tallies = [f["submitted"] for f in doc["functions"]]
        assert sum(tallies) <= self.tasks, where
        for f in doc["functions"]:
            assert f["finished"] <= f["submitted"] + f["retried"], (where, f)
        rows = dp.snapshot_rows(answer.rows)
        seen = observer.ask(dp.Timeline())
        assert isinstance(seen, dp.Timeline) and seen.records is not None
        assert [r.object_id for r in rows] == [r.object_id for r in seen.records], where
        assert answer.since == len(rows) or not rows or answer.since >= len(rows), where
        if final:
            if not self.gone:  # (a driver that left may take unsent tasks along)
                assert sum(tallies) == self.tasks, (where, doc["functions"], self.tasks)
            assert queues == [] and doc["totals"]["pending"] == 0, (where, queues)
            for r in rows:
                assert r.function == TASK_ID & dp.TASK_ID_MASK, r
                assert r.started <= r.ended, r
        observer.core.connection_lost(dp.HEAD_LINK, sim.now)
        sim.head.connection_lost(observer.link, sim.now)

    def check_stop(self) -> None:
        sim = self.sim
        SimObserver(sim).ask(dp.Status())  # connects and checks the head still answers
        SimObserver(sim).ask(dp.Stop())
        sim.settle()
        for w in sim.workers:
            assert not w.alive or w.core.stopped, f"seed {sim.seed}: {w.address} not stopped"

    def check_clean(self) -> None:
        sim = self.sim
        for d in sim.drivers:
            if d in self.gone:
                continue
            for oid in d.live:
                d.core.release(oid)
            d.live.clear()
            sim.driver_call(d)
        sim.settle()
        stats = sim.head.stats()
        assert stats.objects == 0, f"seed {sim.seed}: head still tracks {stats}"
        self.check_slots()
        if not self.crashed:
            twice = {oid: n for oid, n in sim.runs.items() if n > 1}
            assert not twice, f"seed {sim.seed}: tasks ran more than once: {twice}"
        assert stats.held_bytes == 0 and stats.pending == 0 and stats.running == 0, stats
        for w in sim.workers:
            if w.alive:
                assert not w.core.store, f"seed {sim.seed}: {w.address} still holds objects"
        d = next(d for d in sim.drivers if d not in self.gone)
        d.core.request_stats()
        sim.driver_call(d)
        sim.settle()
        assert d.stats and d.stats[-1].objects == 0, f"seed {sim.seed}: stats reply {d.stats}"

    def check_slots(self) -> None:
        """Every slot a worker lent, prefetched or lost to a withdrawal came back."""
        head = self.sim.head
        for peer in head._wire.peers.values():
            if peer.role != dp.Role.WORKER:
                continue
            where = f"seed {self.sim.seed}: worker {peer.address}"
            assert not peer.running and peer.blocked == 0, f"{where} still runs {peer.running}"
            assert peer.free == head.worker_slots, f"{where} has {peer.free} free slots"
            assert peer.spare == head.prefetch and peer.prefetched == 0, f"{where} prefetch"


def run_seed(seed: int) -> None:
    Scenario(seed).run()


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        run_seed(int(arg))
        print(f"seed {arg}: ok")
    _ = dp  # the package under test
