"""Large results read by a driver from a worker: how fast a ``ref.get()`` moves the bytes.

Run it from a checkout after ``python -m pip install -e .``::

    python benchmarks/transfer.py              # 256 MiB and 1 GiB, median of 5 runs each
    python benchmarks/transfer.py --runs 9 --sizes 64 256 1024 --workers 2

One local cluster (a head and ``--workers`` worker processes, uvloop when installed). For
each size, each run submits a task returning a fresh ``np.ones(size, uint8)``, polls until
the task has finished (the value then sits in its worker's store; `dista.wait` would start
the fetch early), and times only ``ref.get()``: the fetch request, the buffer the object
lands in, the bytes over loopback, and decoding the array in the driver. The array and its ref are dropped before the next run. Runs alternate between the
sizes, so that a noisy moment on the machine spreads over all of them, and the first
transfer of each size is an untimed warm-up (it also opens the fetch link to that worker).

Printed: per size, the median GB/s (10^9 bytes/s of array data), the spread (min and max)
and the median time. A raw loopback socket does about 2.5 GB/s on a small cloud VM; the
target for this path is at least 1.5 GB/s, aiming at 2.0.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy is a test dependency
    sys.exit("benchmarks/transfer.py needs numpy: pip install numpy")

try:
    import dista_runtime as dista
except ImportError:  # not installed: use the checkout this script lives in
    root = Path(__file__).resolve().parent.parent
    sys.path[:0] = [str(root), str(root / "bindings")]
    import dista_runtime as dista

MiB = 1 << 20
TARGET_GB_S = 1.5
AIM_GB_S = 2.0


@dista.task
def ones(size: int) -> np.ndarray:
    """A fresh array of ``size`` bytes, kept on the worker (it is far over inline size)."""
    return np.ones(size, dtype=np.uint8)


def one_get(size: int, timeout: float) -> float:
    """Seconds for one ``get`` of a ``size``-byte result already on a worker."""
    ref = ones.remote(size)
    # Poll instead of dista.wait: a waiter makes the driver fetch the value the moment the
    # head says where it is, and that fetch would start before the clock.
    deadline = time.monotonic() + timeout
    while not ref.done():
        if time.monotonic() > deadline:
            raise SystemExit(f"the task of {size} bytes did not finish in {timeout} s")
        time.sleep(0.001)
    start = time.perf_counter()
    value = ref.get(timeout=timeout)
    elapsed = time.perf_counter() - start
    if value.nbytes != size or int(value[-1]) != 1:
        raise SystemExit(f"wrong value: {value.nbytes} bytes, last {value[-1]}")
    del value, ref
    gc.collect()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024], help="in MiB")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per size")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per task")
    args = parser.parse_args()
    sizes = [mib * MiB for mib in args.sizes]
    times: dict[int, list[float]] = {size: [] for size in sizes}
    loop = "uvloop" if _has_uvloop() else "asyncio"
    print(
        f"Dista large-result transfer, CPython {sys.version.split()[0]}, {loop}, "
        f"{args.workers} workers; median of {args.runs} runs after one warm-up"
    )
    with dista.init(workers=args.workers):
        for size in sizes:
            one_get(size, args.timeout)  # warm-up: the fetch link, the worker's allocator
        for _ in range(args.runs):
            for size in sizes:
                times[size].append(one_get(size, args.timeout))
    print(f"{'size':>10} {'GB/s':>7} {'min':>6} {'max':>6} {'median s':>9}")
    worst = float("inf")
    for size in sizes:
        rates = [size / t / 1e9 for t in times[size]]
        median = statistics.median(rates)
        worst = min(worst, median)
        print(
            f"{size // MiB:>6} MiB {median:>7.2f} {min(rates):>6.2f} {max(rates):>6.2f} "
            f"{statistics.median(times[size]):>9.3f}"
        )
    verdict = "met" if worst >= TARGET_GB_S else "missed"
    print(f"target {TARGET_GB_S} GB/s (aim {AIM_GB_S}): {verdict}")


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
