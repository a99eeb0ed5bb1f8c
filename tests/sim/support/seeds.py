"""Running seeded scenarios in batches: every seed of a batch runs, and a failure says how
to replay it alone."""

from __future__ import annotations

from collections.abc import Callable


def failed_seeds(run_seed: Callable[[int], object], seeds: range, module: str) -> list[str]:
    """Run ``run_seed`` for each of ``seeds``; the failures, each with its replay command
    (``python -m MODULE SEED``)."""
    failures = []
    for seed in seeds:
        try:
            run_seed(seed)
        except AssertionError as e:
            failures.append(f"seed {seed}: {e} (replay: python -m {module} {seed})")
    return failures
