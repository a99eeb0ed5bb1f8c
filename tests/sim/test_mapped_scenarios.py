"""The seeded scenarios again, on one machine whose processes share memory
(`mapped.MappedSim`): results and task inputs come back as mapped frames where the object
server can, by the page where it cannot or a file is not taken, under every fault the
scenarios make (killed workers, lost links, head restarts); every invariant of the
scenarios holds unchanged.

``DISTA_MAPPED_SIM_SEEDS`` sets how many seeds each runs (default 150).
Replay one seed: ``python -m tests.sim.test_mapped_scenarios SEED``.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.sim.support.seeds import failed_seeds

from .support.cluster import Sim
from .support.mapped import MappedRecoverySim, MappedSim
from .test_actor_scenarios import ActorScenario
from .test_recovery_scenarios import RecoveryScenario

SEEDS = int(os.environ.get("DISTA_MAPPED_SIM_SEEDS", "150"))
BATCH = 50


class MappedActorScenario(ActorScenario):
    def make_sim(self, seed: int, **kwargs: int | bool) -> Sim:
        return MappedSim(seed, **kwargs)  # type: ignore[arg-type]


class MappedRecoveryScenario(RecoveryScenario):
    def make_sim(self, seed: int, **kwargs: int | bool) -> Sim:
        return MappedRecoverySim(seed, jump_rate=[0.0, 0.01, 0.05][seed % 3], **kwargs)


def run_seed(seed: int) -> tuple[int, int]:
    """Run ``seed`` both ways; how many objects were shared and taken mapped."""
    actors = MappedActorScenario(seed)
    actors.run()
    recovery = MappedRecoveryScenario(seed)
    try:
        recovery.run()
    except AssertionError as e:
        log = "\n  ".join(recovery.sim.log[-12:])
        raise AssertionError(f"{e}\n  (last faults and timers:\n  {log})") from None
    shared = taken = 0
    for scenario in (actors, recovery):
        memory = getattr(scenario.sim, "memory", None)
        if memory is not None:
            shared += memory.shared
            taken += memory.taken
    return shared, taken


@pytest.mark.parametrize("start", range(0, SEEDS, BATCH))
def test_mapped_seeds(start: int) -> None:
    seeds = range(start, min(start + BATCH, SEEDS))
    assert failed_seeds(run_seed, seeds, "tests.sim.test_mapped_scenarios") == []


def test_the_scenarios_do_map_objects() -> None:
    """The sweep above means something only if objects do travel mapped, and fall back."""
    shared = taken = 0
    for seed in range(20):
        s, t = run_seed(seed)
        shared += s
        taken += t
    assert taken > 50 and shared > taken


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"seed {arg}: ok, (shared, taken) = {run_seed(int(arg))}")
