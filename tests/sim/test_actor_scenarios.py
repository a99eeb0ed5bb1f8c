"""Seeded scenarios with actors mixed into the random task graphs of `scenario.Scenario`.

Several drivers create actors (checkpoint_every 0, 1, 3 or 10; now and then one whose
constructor raises), call them (their own and each other's: a handle passed), ask for
checkpoints, kill them; workers crash at random steps (mid-call, right before or right
after a checkpoint write) and are replaced; checkpoints fail at a per-seed rate, and some
seeds give drivers and the head small kept-call budgets. Then the invariants:

* every call is answered exactly once to its caller; a failure is the method's own error,
  or names the actor, which is then dead (given up, killed, or its driver gone);
* an actor's calls ran in one order, each once per incarnation, every caller's in the order
  it sent them, each answer the state after it (a call run again answers the same); a live
  actor's final state is the sum of all its calls' values;
* the checkpoint the head would restore from is on disk at every step; a driver's kept
  calls stay within twice its budget, and drop to zero once a checkpoint covers them;
* every checkpoint ask is answered once; tasks keep `Scenario`'s invariants; once
  everything is released and every actor killed, the head holds nothing.

Replay one seed: ``python -m tests.sim.test_actor_scenarios SEED``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import pytest

from dista_proto import KEPT_CALL_BYTES, CheckpointActor
from dista_proto._head_records import ActorState
from tests.sim.support.seeds import failed_seeds

from .support.actors import (
    ACTOR_TYPE,
    ADD,
    CAPABILITY,
    FAIL_CREATE,
    MASK,
    RAISE,
    RAISED,
    Instance,
    SimActors,
    answer_count,
    result_of,
    u64,
)
from .support.cluster import Sim, SimDriver
from .support.scenario import Scenario

#: What one call (an 8-byte argument) counts against a keep budget.
CALL = KEPT_CALL_BYTES + 8

SEEDS = int(os.environ.get("DISTA_ACTOR_SIM_SEEDS", "500"))
BATCH = 100
_DEAD = ActorState.DEAD


@dataclass
class ActorInfo:
    actor_id: int
    owner: SimDriver
    initial: int
    every: int
    doomed: bool  # its constructor raises


@dataclass
class CallInfo:
    oid: int
    actor_id: int
    caller: SimDriver
    value: int
    method: int


class ActorScenario(Scenario):
    def __init__(self, seed: int) -> None:
        # `Scenario`'s fields, with more workers: an actor takes a whole one.
        deep = (seed // 7) % 2 == 1
        self.sim = self.make_sim(
            seed,
            workers=2 + seed % 3,
            drivers=1 + (seed // 3) % 3,
            worker_slots=2 if deep else 1,
            prefetch=4 if deep else 0,
            blocking=seed % 4 >= 2,
        )
        rng = self.rng = self.sim.rng
        self.uncertain: set[int] = set()
        self.inputs: dict[int, list[int]] = {}
        self.siblings: dict[int, range] = {}
        self.crashed = False
        self.gone: list[SimDriver] = []
        self.crash_at = -1  # crashes are this scenario's own (`crash_actor_worker`)
        self.leave_at = rng.randrange(5, 60) if seed % 7 == 3 else -1
        self.actors = SimActors(self.sim, rng.choice([0.0, 0.0, 0.2, 0.6]))
        head = self.sim.head
        head.max_retries = rng.choice([0, 1, 3, 3])
        if seed % 5 == 1:  # small budgets and a failing disk: drivers and the head cut
            self.actors.failure_rate = rng.choice([0.5, 0.9])
            head.actor_keep_bytes = CALL * rng.choice([3, 8])
            for d in self.sim.drivers:
                d.core.keep_bytes = CALL * rng.choice([2, 5, 10])
        self.crashes_left = rng.randrange(0, 5)
        self.owed = 0  # crashed workers not yet replaced
        self.records: dict[int, ActorInfo] = {}
        self.calls: dict[int, CallInfo] = {}
        self.asks: dict[int, tuple[SimDriver, int]] = {}
        self.killed: set[int] = set()

    def make_sim(self, seed: int, **kwargs: int | bool) -> Sim:
        return Sim(seed, **kwargs)  # type: ignore[arg-type]

    # -- actor traffic ---------------------------------------------------------------------

    def live_actors(self) -> list[int]:
        """Actors made and not dead (some perhaps not at the head yet)."""
        dead = {a.actor_id for a in self.sim.head.actors() if a.state is _DEAD}
        return [a for a in self.records if a not in dead]

    def create(self, d: SimDriver) -> None:
        alive = sum(1 for w in self.sim.workers if w.alive)
        if len(self.live_actors()) >= alive:
            return  # an actor always has a worker to go to
        doomed = self.rng.random() < 0.08
        initial = self.rng.getrandbits(64)
        every = self.rng.choice([0, 1, 3, 10])
        argument = FAIL_CREATE if doomed else u64(initial)
        actor = d.core.create_actor(ACTOR_TYPE, argument, every, capability=CAPABILITY)
        self.records[actor] = ActorInfo(actor, d, initial, every, doomed)
        self.sim.driver_call(d)

    def call(self, d: SimDriver) -> None:
        # Another driver's actor once its owner heard it was created (a handle passed on);
        # a call racing ahead of the create would find it unknown to the head.
        known = [
            a for a, info in self.records.items() if info.owner is d or info.owner.answers.get(a)
        ]
        if not known:
            return
        actor = self.rng.choice(known)
        value = self.rng.getrandbits(64)
        method = RAISE if self.rng.random() < 0.1 else ADD
        d.core.open_actor(actor, CAPABILITY)  # a handle carries the capability
        oid = d.core.call_actor(actor, method, u64(value))
        self.calls[oid] = CallInfo(oid, actor, d, value, method)
        d.live.append(oid)  # the sim fetches it if stored; release_some may release it
        self.siblings[oid] = range(oid, oid + 1)
        self.check_budget(d)
        self.sim.driver_call(d)

    def burst(self, d: SimDriver) -> None:
        """Several calls and asks at once: checkpoint frames overlap on their way."""
        for _ in range(self.rng.randrange(2, 6)):
            if self.rng.random() < 0.3:
                self.ask(d)
            else:
                self.call(d)

    def ask(self, d: SimDriver) -> None:
        if self.records:
            actor = self.rng.choice(list(self.records))
            self.asks[d.core.checkpoint_actor(actor)] = (d, actor)
            self.sim.driver_call(d)

    def kill(self, d: SimDriver) -> None:
        mine = [a for a in self.live_actors() if self.records[a].owner is d]
        if mine:
            actor = self.rng.choice(mine)
            self.killed.add(actor)
            d.core.kill_actor(actor)
            self.sim.driver_call(d)

    def check_budget(self, d: SimDriver) -> None:
        core = d.core
        assert core.kept_bytes <= 2 * core.keep_bytes, (
            f"seed {self.sim.seed}: driver {d.index} keeps {core.kept_bytes} bytes of calls, "
            f"its budget {core.keep_bytes}"
        )

    # -- faults ----------------------------------------------------------------------------

    def crash_actor_worker(self) -> None:
        """Crash a worker: one hosting an actor, right before or right after it writes a
        checkpoint (the answer never leaves), or after a few pieces of its actor work
        (mid-stream); now and then any worker."""
        sim, rng = self.sim, self.rng
        if sum(1 for w in sim.workers if w.alive) <= 1:
            self.replace()  # never none at all
        alive = [w for w in sim.workers if w.alive]
        writing = [w for w in alive if any(isinstance(x, CheckpointActor) for x in w.actor_work)]
        hosts = [w for w in alive if w.hosted is not None or w.actor_work]
        roll = rng.random()
        if writing and roll < 0.6:
            w = rng.choice(writing)
            while not isinstance(w.actor_work[0], CheckpointActor):
                self.actors.run(w)
            if roll < 0.3:
                self.actors.run(w)  # written (or failed); its answer is lost with the worker
        elif hosts and roll < 0.9:
            w = rng.choice(hosts)
            for _ in range(rng.randrange(0, 4)):
                if w.actor_work:
                    self.actors.run(w)
        else:
            w = rng.choice(alive)
        self.crashes_left -= 1
        self.crashed = True
        sim.crash(w)
        self.owed += 1
        if rng.random() < 0.7:
            self.replace()

    def replace(self) -> None:
        while self.owed:
            self.owed -= 1
            self.sim.add_worker()

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> None:
        self.traffic()
        self.checks()

    def inject(self) -> None:
        """Between steps: maybe a fault (here, a crash of an actor's worker)."""
        if self.crashes_left and self.rng.random() < 0.03:
            self.crash_actor_worker()

    def traffic(self) -> None:
        """Random work from the drivers, with `inject` between the steps."""
        sim, rng = self.sim, self.rng
        sim.settle()
        for step in range(rng.randrange(30, 100)):
            if step == self.leave_at and len(sim.drivers) - len(self.gone) > 1:
                leaving = rng.choice([d for d in sim.drivers if d not in self.gone])
                self.gone.append(leaving)
                sim.disconnect(leaving)
            d = rng.choice([d for d in sim.drivers if d not in self.gone])
            roll = rng.random()
            if roll < 0.3:
                self.submit(d)
            elif roll < 0.36:
                self.release_some(d)
            elif roll < 0.39:
                self.cancel_some(d)
            elif roll < 0.47:
                self.create(d)
            elif roll < 0.77:
                self.call(d)
            elif roll < 0.87:
                self.burst(d)
            elif roll < 0.95:
                self.ask(d)
            elif roll < 0.97:
                self.kill(d)
            elif self.owed:
                self.replace()
            for _ in range(rng.randrange(0, 30)):
                self.inject()
                self.actors.check_restore_points()
                if not sim.step():
                    break
            for driver in sim.drivers:
                self.check_budget(driver)
            self.check_status()
        self.replace()
        sim.settle()

    def checks(self) -> None:
        sim = self.sim
        # With no head restart, no call ever reaches an actor whose state already has it.
        assert not self.actors.covered_calls, f"seed {sim.seed}: calls covered"
        self.check_calls()
        self.check_created()
        self.check_orders()
        self.check_final_states()
        self.check_covered()
        self.kill_all()
        self.check_values()
        self.check_timeline()
        self.check_clean()
        if sim.seed % 2:
            self.check_stop()

    # -- invariants --------------------------------------------------------------------------

    def check_status(self) -> None:
        head = self.sim.head
        status = head.status()
        for actor in [a.actor_id for a in head.actors() if a.state is not _DEAD]:
            assert f"\nactor {actor:#x} (type {ACTOR_TYPE:#x}): " in status, status

    def dead(self, actor: int) -> bool:
        return any(a.actor_id == actor and a.state is _DEAD for a in self.sim.head.actors())

    def check_calls(self) -> None:
        """Each call answered once to its caller, with what the actor answered."""
        seed = self.sim.seed
        outcomes = self.actors.outcomes
        for oid, call in self.calls.items():
            d = call.caller
            if d in self.gone:
                continue
            kinds = d.answers.get(oid)
            count = answer_count(kinds)
            where = f"seed {seed}: call {oid:#x} of driver {d.index} to {call.actor_id:#x}"
            if oid in d.live:
                assert count == 1, f"{where} answered {count} times: {kinds}"
            else:  # released: an answer after the release is not sent
                assert count <= 1, f"{where} answered {count} times: {kinds}"
            if not kinds:
                continue
            if kinds[0] == "failed":
                failed = d.failed[oid]
                if failed == RAISED:
                    assert call.method == RAISE and outcomes.get(oid, b"") is None, where
                else:
                    assert f"actor {call.actor_id:#x}" in failed, f"{where}: {failed}"
                    assert self.dead(call.actor_id), f"{where} failed ({failed}), actor lives"
            elif oid in d.got:
                assert oid in outcomes and d.got[oid] == outcomes[oid], f"{where}: wrong value"

    def check_created(self) -> None:
        """An owner hears its actor was created once (restarts are not news), never when
        its constructor raises; a live one's owner has heard it."""
        seed = self.sim.seed
        for actor, info in self.records.items():
            if info.owner in self.gone:
                continue
            kinds = info.owner.answers.get(actor, [])
            where = f"seed {seed}: actor {actor:#x} of driver {info.owner.index}: {kinds}"
            assert kinds.count("value") <= 1 and kinds.count("failed") <= 1, where
            if info.doomed:  # failed: its constructor raised, or it was killed before
                assert kinds == ["failed"], where
            elif not self.dead(actor):
                assert kinds == ["value"], where

    def check_orders(self) -> None:
        """One order per actor; each answer the state after its call."""
        seed = self.sim.seed
        for actor, order in self.actors.order.items():
            info = self.records[actor]
            assert sorted(order) == list(range(1, len(order) + 1)), f"seed {seed}: gaps"
            oids = [order[i] for i in range(1, len(order) + 1)]
            assert len(set(oids)) == len(oids), f"seed {seed}: a call ran twice in {actor:#x}"
            total = info.initial
            newest: dict[int, int] = {}
            for oid in oids:
                call = self.calls[oid]
                assert call.actor_id == actor
                assert oid > newest.get(call.caller.index, 0), f"seed {seed}: out of order"
                newest[call.caller.index] = oid
                if call.method == ADD:
                    total = (total + call.value) & MASK
                    expected: bytes | None = result_of(total, call.value)
                else:
                    expected = None
                assert self.actors.outcomes[oid] == expected, f"seed {seed}: {oid:#x}'s answer"

    def check_final_states(self) -> None:
        """A live actor holds the sum of every call made to it, each applied once."""
        seed = self.sim.seed
        for record in self.sim.head.actors():
            if record.state is _DEAD:
                continue
            actor = record.actor_id
            info = self.records[actor]
            where = f"seed {seed}: actor {actor:#x}"
            assert record.state is ActorState.READY, f"{where} is {record.state}: {record.why}"
            host = self.actors.host(actor)
            assert host is not None and isinstance(host.hosted, Instance), f"{where}: no host"
            inst = host.hosted
            mine = [c for c in self.calls.values() if c.actor_id == actor]
            if not any(c.caller in self.gone for c in mine):
                assert inst.count == len(mine) == record.seq, f"{where} ran {inst.count} calls"
                expected = info.initial
                for c in mine:
                    if c.method == ADD:
                        expected = (expected + c.value) & MASK
                assert inst.total == expected, f"{where}: state {inst.total}, not {expected}"
            assert inst.count == len(self.actors.order.get(actor, {})) == record.seq

    def check_covered(self) -> None:
        """Checkpoints that work cover every kept call; every ask is answered once."""
        sim, seed = self.sim, self.sim.seed
        self.actors.failure_rate = 0.0
        for record in sim.head.actors():
            owner = self.records[record.actor_id].owner
            if record.state is not _DEAD and owner not in self.gone:
                self.asks[owner.core.checkpoint_actor(record.actor_id)] = (owner, record.actor_id)
                sim.driver_call(owner)
        sim.settle()
        for oid, (d, _) in self.asks.items():
            if d in self.gone:
                continue
            kinds = d.answers.get(oid)
            assert answer_count(kinds) == 1, f"seed {seed}: checkpoint ask {oid:#x}: {kinds}"
            assert d.got.get(oid, b"") == b""
        for d in sim.drivers:
            if d in self.gone:
                continue
            for actor in self.records:
                kept = d.core.kept(actor)
                assert kept == 0, f"seed {seed}: driver {d.index} keeps {kept} of {actor:#x}"
            assert d.core.kept_bytes == 0, f"seed {seed}: driver {d.index} kept bytes"
            assert not d.core._calls.own_asks, (
                f"seed {seed}: driver {d.index}'s own asks unanswered"
            )
        for record in sim.head.actors():
            if record.state is not _DEAD:  # (its owner is here: a driver leaving kills it)
                where = f"seed {seed}: actor {record.actor_id:#x}"
                assert record.covered == record.seq, f"{where}: covers {record.covered}"
                assert not record.calls and record.kept_bytes == 0, f"{where} keeps calls"
                assert not record.lossy, f"{where} is still lossy, all covered"

    def kill_all(self) -> None:
        sim = self.sim
        for actor in self.live_actors():
            owner = self.records[actor].owner
            if owner not in self.gone:
                owner.core.kill_actor(actor)
                sim.driver_call(owner)
                self.killed.add(actor)
        sim.settle()
        live = [a for a in sim.head.actors() if a.state is not _DEAD]
        assert not live, f"seed {sim.seed}: actors outlive their drivers' kill"
        self.check_checkpoints_removed()
        assert not any(w.alive and w.hosted is not None for w in sim.workers)

    def check_checkpoints_removed(self) -> None:
        for actor in self.killed:
            # Killed on a worker: its checkpoints go. (One killed while it waited for a
            # worker, or given up, keeps them: no worker hosts it to remove them.)
            if actor in self.actors.stopped:
                where = f"seed {self.sim.seed}: {actor:#x} on disk"
                assert actor not in self.actors.disk, where

    def check_values(self) -> None:
        """`Scenario.check_values`, for the task objects only."""
        held = {d: d.live for d in self.sim.drivers}
        try:
            for d in self.sim.drivers:
                d.live = [o for o in d.live if o not in self.calls]
            super().check_values()
        finally:
            for d, live in held.items():
                d.live = live


def run_seed(seed: int) -> None:
    ActorScenario(seed).run()


@pytest.mark.parametrize("start", range(0, SEEDS, BATCH))
def test_actor_seeds(start: int) -> None:
    seeds = range(start, min(start + BATCH, SEEDS))
    assert failed_seeds(run_seed, seeds, "tests.sim.test_actor_scenarios") == []


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        began = time.perf_counter()
        run_seed(int(arg))
        print(f"seed {arg}: ok ({time.perf_counter() - began:.2f} s)")
