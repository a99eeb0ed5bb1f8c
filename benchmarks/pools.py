"""``python -m benchmarks.pools``: `dista.Executor` and `dista.Pool` against the standard
library's pools, Ray's Pool and Dask's executor, on maps of tiny items.

Two workloads, each over 10,000 items of ``x + 1`` (a function of the script, as a user's
would be: Dista, Ray and Dask send it by value, the forked pools find it in ``__main__``):

- executor_map: ``list(executor.map(fn, items, chunksize=100))``: `dista.Executor`, a
  forked `ProcessPoolExecutor`, ``ray.util.multiprocessing.Pool.map(..., chunksize=100)``
  and Dask's ``Client.get_executor().map`` (which ignores ``chunksize``: one task per item).
  Targets: Dista at least 3x the ProcessPoolExecutor, at least 10x Ray and Dask.
- pool_map: ``pool.map(fn, items)`` with the default chunk size (about four chunks per
  worker): `dista.Pool`, a forked `multiprocessing.Pool`, Ray's Pool. Target: Dista's time
  within 1.5x multiprocessing's.

Every system gets 2 worker processes. Each (round, workload, system) runs in a child
process of its own (``--child``), which starts the system, maps twice to warm up (not
timed; once if that took over 5 s), then times ``--reps`` maps (fewer if they take over `BUDGET_S` in all, at least
one) and reports their median; start-up (to the first map's end) is reported apart.
Systems alternate within a round (reversed every other round) so that drift of a shared
machine spreads over all. Printed: the median over rounds per system, and the ratios. Ray
and Dask are skipped when not importable (install them apart:
``bash benchmarks/setup_peers.sh``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import util
from pathlib import Path

from benchmarks.runner import ROOT, child_env, kill_session

WORKERS = 2
ITEMS = 10_000
CHUNKSIZE = 100
#: workload -> the systems that run it, Dista's first
SYSTEMS = {
    "executor_map": ("dista", "ppe", "ray", "dask"),
    "pool_map": ("dista", "mp", "ray"),
}
#: the module whose absence means "not installed"
NEEDS = {"dista": "dista_runtime", "ppe": "concurrent", "mp": "multiprocessing"}
NEEDS |= {"ray": "ray", "dask": "distributed"}
CHILD_TIMEOUT_S = 300.0
#: Timed maps stop after this many seconds (at least one): Dask's take seconds each.
BUDGET_S = 30.0


def tiny(x: int) -> int:
    return x + 1


# -- a child: one system, one workload ----------------------------------------------------


def _start(
    system: str, workload: str
) -> tuple[Callable[[list[int]], list[int]], Callable[[], None]]:
    """Start ``system``; (one timed map, stop)."""
    if system == "dista":
        import dista_runtime as dista

        if workload == "executor_map":
            ex = dista.Executor(max_workers=WORKERS)
            return lambda xs: list(ex.map(tiny, xs, chunksize=CHUNKSIZE)), ex.shutdown
        pool = dista.Pool(WORKERS)
        return lambda xs: pool.map(tiny, xs), pool.terminate
    if system == "ppe":
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ppe = ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("fork"))
        return lambda xs: list(ppe.map(tiny, xs, chunksize=CHUNKSIZE)), ppe.shutdown
    if system == "mp":
        import multiprocessing

        mp_pool = multiprocessing.get_context("fork").Pool(WORKERS)
        return lambda xs: mp_pool.map(tiny, xs), mp_pool.terminate
    if system == "ray":
        import ray
        from ray.util.multiprocessing import Pool as RayPool

        ray.init(num_cpus=WORKERS, include_dashboard=False)
        ray_pool = RayPool(WORKERS)
        size = CHUNKSIZE if workload == "executor_map" else None

        def stop_ray() -> None:
            ray_pool.terminate()
            ray.shutdown()

        return lambda xs: ray_pool.map(tiny, xs, chunksize=size), stop_ray
    if system == "dask":
        import distributed

        cluster = distributed.LocalCluster(
            n_workers=WORKERS, threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = distributed.Client(cluster)
        executor = client.get_executor(pure=False)

        def stop_dask() -> None:
            client.close()
            cluster.close()

        return lambda xs: list(executor.map(tiny, xs, chunksize=CHUNKSIZE)), stop_dask
    raise SystemExit(f"unknown system {system}")


def run_child(system: str, workload: str, reps: int, out: Path) -> int:
    items = list(range(ITEMS))
    expected = [x + 1 for x in items]
    t0 = time.perf_counter()
    run, stop = _start(system, workload)
    try:
        if run(items) != expected:
            raise SystemExit(f"{system}: wrong results")
        start_s = time.perf_counter() - t0
        if start_s < 5.0:  # a second warm-up, unless maps take seconds (Dask's)
            run(items)
        times: list[float] = []
        deadline = time.monotonic() + BUDGET_S
        while len(times) < reps and (not times or time.monotonic() < deadline):
            t = time.perf_counter()
            got = run(items)
            times.append(time.perf_counter() - t)
            if got != expected:
                raise SystemExit(f"{system}: wrong results")
    finally:
        stop()
    out.write_text(json.dumps({"median_s": statistics.median(times), "start_s": start_s}))
    return 0


# -- the parent ---------------------------------------------------------------------------


def installed(system: str) -> bool:
    return util.find_spec(NEEDS[system]) is not None


def run_one(system: str, workload: str, reps: int) -> dict[str, float] | str:
    """One child; its figures, or why there are none."""
    with tempfile.TemporaryDirectory(prefix="dista-bench-pools-") as tmp:
        out, log = Path(tmp) / "out.json", Path(tmp) / "log.txt"
        command = [sys.executable, "-m", "benchmarks.pools", "--child", system]
        command += ["--workload", workload, "--reps", str(reps), "--child-out", str(out)]
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                command,
                cwd=ROOT,
                env=child_env(),
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                rc: int | None = proc.wait(timeout=CHILD_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                kill_session(proc.pid)
                proc.wait()
        if out.exists():
            figures: dict[str, float] = json.loads(out.read_text())
            return figures
        tail = log.read_text(errors="replace")[-1500:]
        return f"timed out after {CHILD_TIMEOUT_S:.0f} s" if rc is None else f"exit {rc}: {tail}"


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pools", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per system (default 3)")
    parser.add_argument("--reps", type=int, default=15, help="timed maps per child (15)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workload", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        return run_child(args.child, args.workload, args.reps, args.child_out)

    medians: dict[str, dict[str, list[float]]] = {w: {} for w in SYSTEMS}
    starts: dict[str, dict[str, list[float]]] = {w: {} for w in SYSTEMS}
    missing: dict[str, str] = {}
    for rnd in range(1, args.rounds + 1):
        for workload, systems in SYSTEMS.items():
            order = systems if rnd % 2 else tuple(reversed(systems))
            for system in order:
                if system in missing:
                    continue
                if not installed(system):
                    missing[system] = "not installed"
                    _log(f"{system}: not installed, skipped")
                    continue
                got = run_one(system, workload, args.reps)
                if isinstance(got, str):
                    _log(f"round {rnd} {workload} {system}: failed: {got}")
                    continue
                medians[workload].setdefault(system, []).append(got["median_s"])
                starts[workload].setdefault(system, []).append(got["start_s"])
                _log(f"round {rnd} {workload:<12} {system:<5} {got['median_s'] * 1e3:8.2f} ms")
    print(report(medians, starts, missing))
    if args.json is not None:
        args.json.write_text(json.dumps({"medians_s": medians, "start_s": starts}, indent=2))
    return 0


def report(
    medians: dict[str, dict[str, list[float]]],
    starts: dict[str, dict[str, list[float]]],
    missing: dict[str, str],
) -> str:
    title = f"{ITEMS:,} items of x + 1, {WORKERS} workers; medians over rounds"
    header = f"{'workload':<13} {'system':<6} {'map ms':>9} {'items/s':>11} {'start s':>8}"
    lines = [title + " (each round: the median of its maps)", "", header + " peer / dista"]
    for workload, systems in SYSTEMS.items():
        dista = medians[workload].get("dista")
        base = statistics.median(dista) if dista else None
        for system in systems:
            rounds = medians[workload].get(system)
            if not rounds:
                why = missing.get(system, "failed")
                lines.append(f"{workload:<13} {system:<6} {why:>9}")
                continue
            value = statistics.median(rounds)
            start = statistics.median(starts[workload][system])
            ratio = "" if base is None or system == "dista" else f"{value / base:12.2f}x"
            lines.append(
                f"{workload:<13} {system:<6} {value * 1e3:9.2f} {ITEMS / value:11,.0f} "
                f"{start:8.2f} {ratio:>13}"
            )
    lines += ["", "targets:"]
    lines += _targets(medians)
    return "\n".join(lines)


def _targets(medians: dict[str, dict[str, list[float]]]) -> list[str]:
    def med(workload: str, system: str) -> float | None:
        rounds = medians[workload].get(system)
        return statistics.median(rounds) if rounds else None

    out = []
    checks: list[tuple[str, str, str, float]] = [
        ("executor_map", "ppe", "Executor.map >= 3x ProcessPoolExecutor", 3.0),
        ("executor_map", "ray", "Executor.map >= 10x Ray's Pool", 10.0),
        ("executor_map", "dask", "Executor.map >= 10x Dask's executor", 10.0),
    ]
    for workload, peer, what, want in checks:
        dista, other = med(workload, "dista"), med(workload, peer)
        if dista is None or other is None:
            out.append(f"  {what}: not measured")
        else:
            ratio = other / dista
            out.append(f"  {what}: {ratio:.2f}x ({'met' if ratio >= want else 'missed'})")
    dista, mp = med("pool_map", "dista"), med("pool_map", "mp")
    if dista is None or mp is None:
        out.append("  Pool.map within 1.5x multiprocessing.Pool: not measured")
    else:
        ratio = dista / mp
        verdict = "met" if ratio <= 1.5 else "missed"
        out.append(f"  Pool.map within 1.5x multiprocessing.Pool: {ratio:.2f}x ({verdict})")
    return out


if __name__ == "__main__":
    sys.exit(main())
