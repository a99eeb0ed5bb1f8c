"""``python -m benchmarks.joblib_search``: scikit-learn's GridSearchCV on Dista vs on loky.

The search (``SVC`` on ``load_digits``, a grid of ``C`` x ``gamma``, ``cv=5``) runs with
joblib's default backend, loky, with ``--workers`` processes, and with the ``dista``
backend (`dista_runtime.joblib`) on a local cluster of as many workers, ``n_jobs=-1``.
Both pools are warmed up first (loky spawns its workers on first use, the cluster is
started before the rounds), then the two alternate for ``--rounds`` rounds; it prints each
time, the medians and loky's median over Dista's (> 1 means Dista is faster), and checks
that both found the same scores for every candidate.

Each round also says how busy the workers were: the fits' and scorings' own time (which
``cv_results_`` reports) over workers x wall time. On a machine shared with other work the
wall times move with the load, the fits slowing down with it; this share moves much less,
and what it lacks of 100% is the backend's overhead and the last batches' tail.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import joblib
import numpy as np

import dista_runtime as dista
import dista_runtime.joblib  # registers the backend "dista"


def search(
    backend: str, n_jobs: int, features: Any, labels: Any, grid: dict[str, Any]
) -> tuple[float, Any, float]:
    """Wall time, mean test scores, and the seconds the fits and scorings took."""
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    with joblib.parallel_config(backend=backend):
        start = time.perf_counter()
        found = GridSearchCV(SVC(), grid, cv=5, n_jobs=n_jobs).fit(features, labels)
        wall = time.perf_counter() - start
    results = found.cv_results_
    work = 5 * float(np.sum(results["mean_fit_time"] + results["mean_score_time"]))
    return wall, results["mean_test_score"], work


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.joblib_search", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--workers", type=int, default=2, help="processes each (default 2)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds each (default 5)")
    args = parser.parse_args(argv)

    from sklearn.datasets import load_digits

    features, labels = load_digits(return_X_y=True)
    grid = {"C": [0.1, 1, 10, 100], "gamma": [1e-4, 3e-4, 1e-3, 3e-3]}
    candidates = len(grid["C"]) * len(grid["gamma"])
    print(f"GridSearchCV(SVC) on load_digits {features.shape}: {candidates} candidates x 5 folds")
    runs = {
        "loky": lambda: search("loky", args.workers, features, labels, grid),
        "dista": lambda: search("dista", -1, features, labels, grid),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    busy: dict[str, list[float]] = {name: [] for name in runs}
    scores: dict[str, Any] = {}
    with dista.init(workers=args.workers):
        for name, run in runs.items():  # warm-up, not timed: loky spawns its workers here
            scores[name] = run()[1]
        for i in range(args.rounds):
            order = list(runs) if i % 2 == 0 else list(reversed(runs))
            for name in order:
                wall, found, work = runs[name]()
                times[name].append(wall)
                busy[name].append(work / (args.workers * wall))
                assert np.array_equal(found, scores[name]), f"{name}: scores changed"
            print(
                f"round {i + 1}: "
                + ", ".join(f"{n} {times[n][-1]:.2f} s ({busy[n][-1]:.0%} busy)" for n in runs)
            )
    assert np.array_equal(scores["loky"], scores["dista"]), "dista and loky scores differ"
    loky, ours = statistics.median(times["loky"]), statistics.median(times["dista"])
    print(f"median: loky {loky:.2f} s, dista {ours:.2f} s; loky / dista = {loky / ours:.2f}x")
    share = {n: statistics.median(busy[n]) for n in runs}
    print(f"median busy share: loky {share['loky']:.0%}, dista {share['dista']:.0%}")
    print(
        f"same mean_test_score for all {candidates} candidates; best {scores['dista'].max():.4f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
