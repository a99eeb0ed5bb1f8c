"""What a rolling restart of every worker costs a running workload (issue 29's target).

Run it as root from a checkout after ``python -m pip install -e ".[test]"`` (it builds
network namespaces, as tests/processes/test_rehearsal.py does)::

    python -m benchmarks.rehearsal                  # 3 rounds of 20,000 tasks
    python -m benchmarks.rehearsal --rounds 5 --tasks 40000

Each round builds the rehearsal's cluster (tests/processes/support/rehearsal.py): a head,
4 workers and a driver, each in a network namespace of its own, mutual TLS, a shared
file:// checkpoint store. The driver runs the rehearsal's workload twice (``--tasks``
tasks in waves of 500 plus a call to each of 2 checkpointed actors a wave, every result
checked): once undisturbed, once while every worker is restarted in turn as an
orchestrator rolls a Deployment (SIGTERM, which drains it; a new worker in its namespace;
the next once 4 workers are joined again). The two runs' order alternates between rounds.

Printed per round: both times, and when the last restarted worker had joined (a restart
slower than the workload would understate its cost: the round says so). At the end the
medians and the ratio restarted / undisturbed. The target: at most 1.5.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.processes.support.rehearsal import WORKERS, Cluster, Unavailable, rehearsal_cluster


def workload(cluster: Cluster, tasks: int, roll: bool, name: str) -> tuple[float, float | None]:
    """The driver's time for ``tasks``, and with ``roll``, when (since the driver started)
    the last restarted worker had joined."""
    began = time.monotonic()
    driver = cluster.run_driver(name, tasks)
    rolled = None
    if roll:
        for n, host in enumerate(cluster.hosts, start=1):
            cluster.drain(cluster.workers[host.role])
            cluster.start_worker(host, n)
            cluster.wait_workers(WORKERS)
        rolled = time.monotonic() - began
    summary = cluster.finish(driver)
    right = summary["wrong"] == 0 and summary["actors_in_order"]
    if not right or summary["balances"] != summary["expected"]:
        raise SystemExit(f"{name}: a wrong result: {json.dumps(summary)}")
    seconds = summary["seconds"]
    assert isinstance(seconds, (int, float))
    return float(seconds), rolled


def round_(n: int, tasks: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp, rehearsal_cluster(Path(tmp)) as cluster:
        cluster.start_head()
        for host in cluster.hosts:
            cluster.start_worker(host)
        cluster.wait_workers(WORKERS)
        times: dict[bool, float] = {}
        for roll in (False, True) if n % 2 == 0 else (True, False):
            seconds, rolled = workload(cluster, tasks, roll, f"driver-{n}-{int(roll)}")
            times[roll] = seconds
            if rolled is not None:
                late = " (after the workload ended!)" if rolled > seconds else ""
                print(f"  round {n}: last worker rejoined at {rolled:.1f} s{late}")
        print(f"  round {n}: undisturbed {times[False]:.2f} s, rolling {times[True]:.2f} s")
        return times[False], times[True]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=20_000)
    args = parser.parse_args()
    plain: list[float] = []
    rolling: list[float] = []
    print(f"{args.tasks:,} tasks + 2 checkpointed actors on {WORKERS} workers, TLS, netns")
    try:
        for n in range(args.rounds):
            a, b = round_(n, args.tasks)
            plain.append(a)
            rolling.append(b)
    except Unavailable as e:
        print(f"cannot run the rehearsal here: {e}", file=sys.stderr)
        return 2
    p, r = statistics.median(plain), statistics.median(rolling)
    print(
        f"median undisturbed {p:.2f} s, rolling restart {r:.2f} s: ratio {r / p:.2f} (target <= 1.5)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
