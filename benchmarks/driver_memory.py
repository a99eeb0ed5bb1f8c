"""``python -m benchmarks.driver_memory``: a driver's memory while it submits large arguments.

A loop ``refs = [echo_size.remote(big(i)) for i in range(tasks)]`` with a unique argument of
``--mib`` MiB each, then ``dista.get(refs)``: without backpressure the driver keeps every
unfinished task's argument (for a resume) and its memory grows with the loop; with it
(``DISTA_DRIVER_INFLIGHT_BYTES``, 256 MiB by default) ``.remote()`` waits once that many
bytes are in flight, so the driver's memory stays bounded.

Starts a real ``dista head`` and ``--workers`` ``dista worker`` processes on loopback, then
one driver process, and prints the driver's peak RSS (``ru_maxrss``), the most argument
bytes it kept at once (read after every submit), how many submits waited, and the time.
``--budget`` sets the variable for the driver (``0``: no backpressure, as before it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dista_runtime as dista
from benchmarks.head_memory import Cluster

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
MODULE = "benchmarks.driver_memory"  # what the workers import

DRIVER = """
import json, resource, sys, time
import dista_runtime as dista
from dista_runtime._session import context
from benchmarks.driver_memory import big, echo_size

tasks, mib = int(sys.argv[2]), int(sys.argv[3])
start = time.perf_counter()
with dista.init(sys.argv[1]):
    session = context.session().session
    most = 0
    refs = []
    for i in range(tasks):
        refs.append(echo_size.remote(big(i, mib)))
        most = max(most, session.core.inflight_bytes)
    values = dista.get(refs, timeout=600)
    assert values == [(i, mib * (1 << 20)) for i in range(tasks)], "wrong results"
    waits = session.budget.waits
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"peak_rss": peak, "most_in_flight": most, "waits": waits, "s": seconds}))
"""


def big(i: int, mib: int) -> bytes:
    """``mib`` MiB, unique to ``i`` (every page written, as real data is)."""
    return i.to_bytes(8, "little") * (mib * MIB // 8)


@dista.task
def echo_size(data: bytes) -> tuple[int, int]:
    """Which argument this was, and its size: a small result."""
    return int.from_bytes(data[:8], "little"), len(data)


def _env(budget: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTA_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    if budget is not None:
        env["DISTA_DRIVER_INFLIGHT_BYTES"] = budget
    return env


def run(tasks: int, mib: int, workers: int, budget: str | None) -> dict[str, float]:
    cluster = Cluster(MODULE, workers, _env(None))
    try:
        out = subprocess.run(
            [sys.executable, "-c", DRIVER, cluster.address, str(tasks), str(mib)],
            check=False,
            env=_env(budget),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
        return figures
    finally:
        cluster.close()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.driver_memory", description=__doc__)
    p.add_argument("--tasks", type=int, default=2000)
    p.add_argument("--mib", type=int, default=10, help="MiB of argument per task")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--budget", default=None, help="DISTA_DRIVER_INFLIGHT_BYTES (0: none)")
    args = p.parse_args()
    t0 = time.perf_counter()
    f = run(args.tasks, args.mib, args.workers, args.budget)
    print(
        f"{args.tasks} tasks x {args.mib} MiB, budget {args.budget or 'default'}: "
        f"driver peak RSS {f['peak_rss'] / MIB:,.0f} MiB, most in flight "
        f"{f['most_in_flight'] / MIB:,.0f} MiB, {f['waits']:,} waits, driver {f['s']:.1f} s "
        f"(all {time.perf_counter() - t0:.1f} s)"
    )


if __name__ == "__main__":
    main()
