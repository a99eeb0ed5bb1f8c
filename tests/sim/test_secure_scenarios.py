"""The seeded scenarios again, with fetch grants on (`hosts.Hosts`): every fetch between
workers (task inputs, adoptions) and from drivers (located results, after claims too) must
still find its grant, so every invariant of the scenarios holds unchanged.

``DISTA_SECURE_SIM_SEEDS`` sets how many seeds each runs (default 200).
Replay one seed: ``python -m tests.sim.test_secure_scenarios SEED``.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.sim.support.seeds import failed_seeds

from .support.cluster import Sim
from .support.hosts import SecureRecoverySim, SecureSim
from .test_actor_scenarios import ActorScenario
from .test_recovery_scenarios import RecoveryScenario

SEEDS = int(os.environ.get("DISTA_SECURE_SIM_SEEDS", "200"))
BATCH = 50


class SecureActorScenario(ActorScenario):
    def make_sim(self, seed: int, **kwargs: int | bool) -> Sim:
        return SecureSim(seed, **kwargs)  # type: ignore[arg-type]


class SecureRecoveryScenario(RecoveryScenario):
    def make_sim(self, seed: int, **kwargs: int | bool) -> Sim:
        jump_rate = [0.0, 0.01, 0.05][seed % 3]
        return SecureRecoverySim(seed, jump_rate=jump_rate, **kwargs)


def run_seed(seed: int) -> None:
    SecureActorScenario(seed).run()
    recovery = SecureRecoveryScenario(seed)
    try:
        recovery.run()
    except AssertionError as e:
        log = "\n  ".join(recovery.sim.log[-12:])
        raise AssertionError(f"{e}\n  (last faults and timers:\n  {log})") from None


@pytest.mark.parametrize("start", range(0, SEEDS, BATCH))
def test_secure_seeds(start: int) -> None:
    seeds = range(start, min(start + BATCH, SEEDS))
    assert failed_seeds(run_seed, seeds, "tests.sim.test_secure_scenarios") == []


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        run_seed(int(arg))
        print(f"seed {arg}: ok")
