"""Dista in a minute: Monte-Carlo pi over 100 tasks, a fan-in, and a 200 MiB array.

    python examples/quickstart.py

starts a local cluster (a head and one worker per core, on loopback), runs the three
steps and prints what each took. Nothing to configure; the cluster stops at the end.
"""

from __future__ import annotations

import random
import time

import numpy as np

import dista_runtime as dista

SAMPLES = 200_000  # per task


@dista.task
def sample(seed: int, n: int) -> int:
    """How many of ``n`` random points in the unit square fall inside the quarter circle."""
    rng = random.Random(seed)
    inside = 0
    for _ in range(n):
        x, y = rng.random(), rng.random()
        inside += x * x + y * y <= 1.0
    return inside


@dista.task
def total(counts: list[int]) -> int:
    """The fan-in: one task receives every sample's result."""
    return sum(counts)


@dista.task
def big_array(mib: int) -> np.ndarray:
    """A large result: it stays on its worker, in shared memory the driver maps (read-only,
    not copied); from a worker on another machine it would cross the network in parts."""
    return np.arange(mib * (1 << 20) // 8, dtype=np.int64)


def main() -> None:
    started = time.perf_counter()
    with dista.init() as cluster:
        ready = time.perf_counter()
        print(f"local cluster up at {cluster.address} in {ready - started:.2f} s")

        t = time.perf_counter()
        counts = [sample.remote(seed, SAMPLES) for seed in range(100)]
        inside = total.remote(counts).get()  # refs inside a list: the head waits for them
        pi = 4 * inside / (100 * SAMPLES)
        print(
            f"pi ~ {pi:.5f} from {100 * SAMPLES:,} points in 100 tasks + a fan-in: "
            f"{time.perf_counter() - t:.2f} s"
        )

        t = time.perf_counter()
        ref = big_array.remote(200)
        array = ref.get()
        took = time.perf_counter() - t
        assert array[-1] == len(array) - 1
        print(
            f"200 MiB array result ({array.dtype}, {len(array):,} items) in {took:.2f} s "
            f"({array.nbytes / took / 1e9:.2f} GB/s including the task)"
        )

        del counts, ref, array
        stats = dista.stats()
        print(f"head: {stats.workers} workers, {stats.objects} objects held")
    print(f"done in {time.perf_counter() - started:.2f} s; the cluster has stopped")


if __name__ == "__main__":
    main()
