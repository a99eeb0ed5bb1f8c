"""``python -m benchmarks.fuzz``: a million mutated frames at a running cluster (issue 14).

Starts a real `dista head` and three `dista worker` processes on loopback, a well-behaved
driver running a checked workload (small tasks, task-after chains, 1 MiB results stored on
workers and fetched from their object servers, an actor checkpointed every 500 calls),
then ``--connections`` hostile connections (half at the head, half at the workers' object
servers) sending mutated frame streams until ``--frames`` are sent or ``--seconds`` pass.
The head's and workers' RSS is sampled idle, every second during the attack, 10 s after
it, and ``--after`` seconds after it (40: past the recovery grace, 30 s, during which the
head keeps what the drivers that left own, for them to resume).

Prints frames sent, connections opened and closed by the peer, error frames received, the
good driver's results checked/wrong/lost, the head's RSS idle/peak/after with ratios, any
process that died (exit code and the tail of its output), what the attackers got back,
and the last sessions' frames (hex) when something failed. Exits 1 on a crash, a wrong or
lost result, or the head's memory over 2x idle during the run or 1.2x after it.

Reproducible with ``--seed``: each session's frames come from (seed, connection, session)
and the driver number the head's welcome gave it. The machinery lives in
``tests/processes/support/hostile_*.py``, which the CI version (tests/processes/test_hostile.py) shares.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.processes.support.hostile_run import run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.fuzz", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--frames", type=int, default=1_000_000, help="hostile frames to send (default 1,000,000)"
    )
    p.add_argument(
        "--connections", type=int, default=64, help="hostile connections at once (default 64)"
    )
    p.add_argument(
        "--seconds", type=float, default=1800.0, help="stop after this long anyway (default 1800)"
    )
    p.add_argument(
        "--seed", type=int, default=None, help="the run's seed (default: from the clock)"
    )
    p.add_argument("--workers", type=int, default=3, help="worker processes (default 3)")
    p.add_argument(
        "--after",
        type=float,
        default=40.0,
        help="seconds of quiet before the last sample (40: past the head's 30 s recovery "
        "grace, in which it keeps what drivers that left own; a sample at 10 s is printed too)",
    )
    p.add_argument(
        "--logs",
        type=Path,
        default=None,
        help="where the processes' logs go (default: a temp dir)",
    )
    p.add_argument(
        "--impersonate",
        action="store_true",
        help="also say hello as a worker with the cluster's registry or a real worker's "
        "address (without TLS that takes real work, by design)",
    )
    p.add_argument(
        "--no-big-lengths",
        dest="big_lengths",
        action="store_false",
        help="a diagnostic: never announce frames of 1 MiB or more (what the rest costs)",
    )
    p.add_argument(
        "--no-checkpoints",
        dest="checkpoints",
        action="store_false",
        help="a diagnostic: the good driver's actor writes no checkpoints, so the head keeps "
        "its every call (up to the keep budget) and grows with the run, the attack aside",
    )
    p.add_argument("--allow-stop", action="store_true", help="also send observers' stop frames")
    p.add_argument(
        "--head-arg", action="append", default=[], help="an extra `dista head` argument"
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time())
    logs = args.logs or Path(tempfile.mkdtemp(prefix=f"dista-fuzz-{seed}-"))
    print(
        f"dista fuzz: seed {seed}, {args.frames:,} frames, {args.connections} connections; logs in {logs}",
        flush=True,
    )
    report = run(
        logs,
        frames=args.frames,
        connections=args.connections,
        seconds=args.seconds,
        seed=seed,
        workers=args.workers,
        after=args.after,
        head_args=tuple(args.head_arg),
        impersonate=args.impersonate,
        allow_stop=args.allow_stop,
        big_lengths=args.big_lengths,
        checkpoints=args.checkpoints,
        say=lambda text: print(text, flush=True),
    )
    print(report.text(), flush=True)
    return 1 if report.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
