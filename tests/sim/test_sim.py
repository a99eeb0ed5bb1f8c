"""The seeded cluster simulation: every seed must keep every invariant."""

from __future__ import annotations

import os

import pytest

from tests.sim.support.seeds import failed_seeds

from .support.scenario import run_seed

SEEDS = int(os.environ.get("DISTA_SIM_SEEDS", "1000"))
BATCH = 100


@pytest.mark.parametrize("start", range(0, SEEDS, BATCH))
def test_seeds(start: int) -> None:
    seeds = range(start, min(start + BATCH, SEEDS))
    assert failed_seeds(run_seed, seeds, "tests.sim.support.scenario") == []
