"""Tasks sent ahead (docs/protocol.md, "Tasks sent ahead"; `dista_proto._head_ahead`), in the
seeded simulation: drivers build chains of short task-afters, each on their newest result,
so that the head sends them ahead to the worker making their input; some links raise, some
are cancelled, workers crash, drivers leave, tasks block and are asked back, under the base
scenario's checks (every value right, every failure explained, timelines in order, nothing
left behind). ``DISTA_AHEAD_SIM_SEEDS`` sets how many seeds run (default 300); replay one
with ``python -m tests.sim.test_ahead_scenarios SEED``.
"""

from __future__ import annotations

import os
import struct
import sys

import pytest

from tests.sim.support.seeds import failed_seeds

from .support.cluster import RAISES, TASK_ID, Sim, SimDriver, compute
from .support.scenario import Scenario

SEEDS = int(os.environ.get("DISTA_AHEAD_SIM_SEEDS", "300"))
BATCH = 100


class ChainScenario(Scenario):
    """The base scenario with prefetch always on and most submissions a chain's next link."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.sim = Sim(
            seed,
            workers=1 + seed % 3,
            drivers=1 + (seed // 3) % 2,
            worker_slots=1 + seed % 2,
            prefetch=(4, 8, 32)[(seed // 2) % 3],
            blocking=seed % 4 >= 2,
        )
        self.rng = self.sim.rng

    def submit(self, d: SimDriver) -> None:
        live = [o for o in d.live if o in d.expected]
        if not live or self.rng.random() < 0.25:
            super().submit(d)
            return
        newest = live[-1]
        raises = self.rng.random() < 0.08
        value = RAISES if raises else struct.pack("<I", self.rng.choice([4, 16, 100, 300]))
        oid = d.core.submit_after(TASK_ID, [newest], gather=False, value=value)
        before = d.expected[newest]
        d.expected[oid] = None if raises or before is None else compute(value, (before,), False)
        self.inputs[oid] = [newest]
        self.siblings[oid] = range(oid, oid + 1)
        d.live.append(oid)
        self.sim.driver_call(d)


def run_seed(seed: int) -> int:
    """Run ``seed``; how many tasks went ahead."""
    scenario = ChainScenario(seed)
    scenario.run()
    return scenario.sim.head._scheduler.ahead.count


@pytest.mark.parametrize("start", range(0, SEEDS, BATCH))
def test_ahead_seeds(start: int) -> None:
    seeds = range(start, min(start + BATCH, SEEDS))
    assert failed_seeds(run_seed, seeds, "tests.sim.test_ahead_scenarios") == []


def test_the_scenarios_do_send_tasks_ahead() -> None:
    """The sweep above means something only if tasks do go ahead."""
    assert sum(run_seed(seed) for seed in range(30)) > 100


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"seed {arg}: ok, {run_seed(int(arg))} sent ahead")
