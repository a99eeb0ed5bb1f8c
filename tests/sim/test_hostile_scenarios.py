"""Seeded scenarios with hostile peers on the head's own links: a driver naming other
drivers' objects (as task inputs, in releases, cancels and claims) and a worker answering
tasks it was never given, at random steps of the usual traffic. Each hostile frame leaves
the head's counts as they were, and every good driver's values stay right and whole
(docs/protocol.md "Security rules").

Run one seed by hand: ``python -m tests.sim.test_hostile_scenarios SEED``.
"""

from __future__ import annotations

import sys

import pytest

import dista_proto as dp
from dista_proto import frame as F

from .support.cluster import TASK_ID, SimDriver
from .support.scenario import Scenario


class HostileScenario(Scenario):
    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        sim = self.sim
        self.thief = sim.head.connection_made(sim.now)
        self._raw(self.thief, dp.Hello(F.ROLE_DRIVER, sim.registry))
        self.thief_number = sim.head._wire.peers[self.thief].number
        self.thief_next = 1
        # Another registry: the head never gives it this cluster's tasks, so it can only forge.
        self.rogue = sim.head.connection_made(sim.now)
        address = dp.Address("10.9.9.9", 7000)
        self._raw(self.rogue, dp.Hello(F.ROLE_WORKER, sim.registry ^ 1, address))
        self.hostile_frames = 0

    def _raw(self, link: int, event: dp.Event) -> None:
        sim = self.sim
        sim.head.receive_data(link, dp.encode_event(event), sim.now)
        sim._run_decisions(sim.head)  # what the head writes to a raw link is dropped

    def submit(self, d: SimDriver) -> None:
        super().submit(d)
        if self.rng.random() < 0.4:
            self.hostile()

    def hostile(self) -> None:
        sim, rng = self.sim, self.rng
        victims = [oid for d in sim.drivers for oid in d.live]
        if not victims:
            return
        oid = rng.choice(victims)
        mine = self.thief_number << dp.ID_BITS | self.thief_next
        self.thief_next += 2
        choices: list[tuple[int, dp.Event]] = [
            (self.thief, dp.TaskAfter(mine, TASK_ID, (oid,))),
            (self.thief, dp.TaskAfter(mine, TASK_ID, (oid, oid), gather=True, results=2)),
            (self.thief, dp.Release(oid)),
            (self.thief, dp.Cancel(oid)),
            (self.thief, dp.Cancel(oid, dp.CANCEL_FORCE)),
            (self.thief, dp.Claim(oid)),
            (self.rogue, dp.Result(oid, b"forged")),
            (self.rogue, dp.Stored(oid, 10)),
            (self.rogue, dp.Error(oid, "forged failure")),
            (self.rogue, dp.Span(oid, 1, 2, 3)),
            (self.rogue, dp.Span(oid, 1, 1, 1, dp.SPAN_BLOCKED)),
            (self.rogue, dp.Span(oid, 1, 1, 1, dp.SPAN_WITHDRAWN)),
        ]
        link, event = rng.choice(choices)
        before = sim.head.stats()
        inline = sim.head.inline_bytes(oid >> dp.ID_BITS)
        self._raw(link, event)
        self.hostile_frames += 1
        where = f"seed {sim.seed}: {event}"
        assert sim.head.stats() == before, where
        assert sim.head.inline_bytes(oid >> dp.ID_BITS) == inline, where
        assert sim.head.greeted(link) and self.thief in sim.head._wire.peers, where  # kept


def run_seed(seed: int) -> int:
    scenario = HostileScenario(seed)
    scenario.run()
    return scenario.hostile_frames


@pytest.mark.parametrize("start", [0, 100])
def test_hostile_peers_change_nothing_of_the_good_drivers(start: int) -> None:
    failures = []
    frames = 0
    for seed in range(start, start + 100):
        try:
            frames += run_seed(seed)
        except AssertionError as e:
            failures.append(f"seed {seed}: {e}")
    assert failures == []
    assert frames > 500  # the hostile peers did act


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"seed {arg}: ok, {run_seed(int(arg))} hostile frames")
