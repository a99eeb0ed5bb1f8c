"""The seeded cluster simulation: every seed must keep every invariant."""

from __future__ import annotations

import os

import pytest

from .scenario import run_seed

SEEDS = int(os.environ.get("DISTA_SIM_SEEDS", "1000"))
BATCH = 100


@pytest.mark.parametrize("start", range(0, SEEDS, BATCH))
def test_seeds(start: int) -> None:
    failures = []
    for seed in range(start, min(start + BATCH, SEEDS)):
        try:
            run_seed(seed)
        except AssertionError as e:
            failures.append(f"seed {seed}: {e} (replay: python -m tests.sim.scenario {seed})")
    assert failures == []
