"""What a watched dashboard costs the head: no-op task throughput with and without it.

Run it from a checkout after ``python -m pip install -e ".[test]"``::

    python -m benchmarks.dashboard                 # 5 rounds of 20,000 no-op tasks
    python -m benchmarks.dashboard --rounds 9 --tasks 40000 --no-browser

Each round starts two clusters one after the other (their order alternates between rounds,
so that drift of a shared machine spreads over both), as separate processes on loopback
TCP: a head (``dista head``), 2 workers (``dista worker --import benchmarks.dashboard``),
and this process as the driver. In the *watched* one, ``dista dashboard`` watches the head
too, and a headless Chromium (Debian's, through Selenium; skipped with ``--no-browser`` or
when none is installed) shows its page, following the task stream live. The driver warms
up, then submits ``--tasks`` no-op tasks and gets them all, three times; a run's figure is
its best throughput. Measured besides: the head's CPU seconds per 1,000 tasks over the
timed runs (psutil), which is the head's own cost without the noise of the other
processes sharing the machine's cores.

Printed: per configuration the median over rounds, and the ratios watched / plain. The
target (issue 28): the watched head's throughput at least 0.97 of the plain one's.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import dista_runtime as dista

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "dista_runtime.cli"]


@dista.task
def noop() -> None:
    return None


def _wait_for(path: Path, pattern: str, timeout: float = 30.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, path.read_text(errors="replace"))
        if found:
            return found
        time.sleep(0.05)
    raise RuntimeError(f"{path.name} did not print {pattern!r}: {path.read_text()[-2000:]}")


@contextmanager
def cluster(folder: Path, watched: bool, browser: bool) -> Iterator[dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    env.pop("DISTA_ADDRESS", None)
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(name: str, argv: list[str]) -> Path:
        log = folder / f"{name}.log"
        with open(log, "wb") as out:
            procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env))
        return log

    stack = ExitStack()
    try:
        head_log = spawn("head", [*CLI, "head", "--port", "0"])
        host, port = _wait_for(head_log, r"listening on (\S+):(\d+)").groups()
        address = f"{host}:{port}"
        for n in range(2):
            spawn(f"worker{n}", [*CLI, "worker", "--head", address, "--import", __name__])
        out: dict[str, Any] = {"address": address, "head": procs[0].pid, "dashboard": None}
        if watched:
            log = spawn("dashboard", [*CLI, "dashboard", "--head", address, "--port", "0"])
            url = _wait_for(log, r"(http://\S+/)").group(1)
            out["dashboard"] = procs[-1].pid
            if browser:
                from tests.support.browser import chromium  # (the tests' Chromium)

                out["browser"] = driver = stack.enter_context(chromium())
                driver.get(url)
        yield out
    finally:
        stack.close()
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _cpu(pid: int | None, family: bool = False) -> float:
    """CPU seconds of process ``pid`` (``family``: and of all its descendants)."""
    if pid is None:
        return 0.0
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for p in [root, *(root.children(recursive=True) if family else [])]:
        try:
            times = p.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def measure(
    address: str, tasks: int, head: int, dashboard: int | None, browser: int | None
) -> dict[str, float]:
    with dista.init(address):
        deadline = time.monotonic() + 30
        while dista.stats().workers < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        dista.get([noop.remote() for _ in range(2000)])  # warm up
        before, dash_before = _cpu(head), _cpu(dashboard)
        browser_before = _cpu(browser, family=True)
        rates = []
        for _ in range(3):
            start = time.perf_counter()
            dista.get([noop.remote() for _ in range(tasks)])
            rates.append(tasks / (time.perf_counter() - start))
        head_cpu = _cpu(head) - before
        dash_cpu = _cpu(dashboard) - dash_before
        browser_cpu = _cpu(browser, family=True) - browser_before
    return {
        "browser_cpu_s": browser_cpu,
        "rate": max(rates),
        "head_ms_per_1000": head_cpu / (3 * tasks) * 1e6,
        "dashboard_cpu_s": dash_cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--no-browser", action="store_true", help="the dashboard alone")
    args = parser.parse_args()
    browser = not args.no_browser and os.path.exists("/usr/bin/chromedriver")
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for r in range(args.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        for watched in order:
            with (
                tempfile.TemporaryDirectory() as folder,
                cluster(Path(folder), watched, browser) as c,
            ):
                if watched:
                    time.sleep(1.0)  # the page loaded and following
                chrome = c.get("browser")
                pid = chrome.service.process.pid if chrome is not None else None
                got = measure(c["address"], args.tasks, c["head"], c["dashboard"], pid)
            results[watched].append(got)
            name = "watched" if watched else "plain"
            print(
                f"round {r + 1} {name:>7}: {got['rate']:8.0f} tasks/s, head "
                f"{got['head_ms_per_1000']:.1f} ms CPU per 1,000 tasks",
                flush=True,
            )
    plain = {k: statistics.median(x[k] for x in results[False]) for k in results[False][0]}
    watched = {k: statistics.median(x[k] for x in results[True]) for k in results[True][0]}
    seen = "a dashboard and a browser" if browser else "a dashboard (no browser)"
    print(f"\nmedians over {args.rounds} rounds of {args.tasks:,} no-op tasks, watched by {seen}:")
    print(
        f"  plain:   {plain['rate']:8.0f} tasks/s, head {plain['head_ms_per_1000']:.1f} ms/1,000"
    )
    print(
        f"  watched: {watched['rate']:8.0f} tasks/s, head {watched['head_ms_per_1000']:.1f} "
        f"ms/1,000 (CPU over the timed runs: the dashboard process "
        f"{watched['dashboard_cpu_s']:.2f} s, the browser {watched['browser_cpu_s']:.2f} s)"
    )
    print(
        f"  throughput watched / plain: {watched['rate'] / plain['rate']:.3f} (target >= 0.97); "
        f"head CPU per task watched / plain: "
        f"{watched['head_ms_per_1000'] / plain['head_ms_per_1000']:.3f}"
    )


if __name__ == "__main__":
    main()
