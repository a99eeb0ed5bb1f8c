"""``python -m benchmarks``: Dista side by side with Ray, Dask distributed and ProcessPoolExecutor.

Every system gets 2 worker processes; each (round, group of workloads, system) runs in a
child process of its own with a timeout, and systems alternate within each round. Prints a
table of medians and Dista's ratio to each peer (> 1 means Dista is better), and writes JSON
and a PNG chart. Peers that are not installed are reported so; install them apart from the
project with ``bash benchmarks/setup_peers.sh`` and run ``.venv-peers/bin/python -m
benchmarks``. See benchmarks/runner.py for what each workload measures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks import runner

RESULTS = runner.ROOT / "benchmarks" / "results"


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--systems",
        type=_names,
        default=list(runner.DEFAULT_SYSTEMS),
        help="comma-separated, from dista,ray,dask,ppe (default: these four) and Dista on its "
        "other bindings: dista-anyio,dista-trio,dista-gevent",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds per system (default 3)")
    names = ", ".join(w.name for w in runner.WORKLOADS)
    parser.add_argument(
        "--only",
        type=_names,
        default=None,
        help=f"comma-separated workloads: {names}; 'queued' (slow) runs only when named here",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "side_by_side.json")
    parser.add_argument("--png", type=Path, default=RESULTS / "side_by_side.png")
    parser.add_argument("--quick", action="store_true", help="workloads about 10x smaller")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds per child (default: per group)"
    )
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--group", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = [s for s in args.systems if s not in runner.SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s): {', '.join(unknown)}")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        args.workloads = runner.select_workloads(args.only)
    except ValueError as exc:
        parser.error(str(exc))
    return args


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = runner.QUICK if args.quick else runner.FULL
    if args.child is not None:
        names = [w.name for w in args.workloads]
        return runner.run_child(args.child, args.group, names, sizes, args.child_out)
    started = time.time()
    results = runner.run_all(
        args.systems, args.workloads, args.rounds, args.quick, args.timeout, _log
    )
    config = {
        "systems": args.systems,
        "rounds": args.rounds,
        "quick": args.quick,
        "workers": runner.WORKERS,
        "sizes": vars(sizes),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "wall_s": round(time.time() - started, 1),
    }
    data = runner.report(results, args.systems, args.workloads, config)
    print(runner.format_table(runner.summarize(results), args.systems, args.workloads))
    notes = runner.method_notes(results)
    if notes:
        print("\nBig results: " + "\n             ".join(notes))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    print(f"\nJSON: {args.json}")
    _chart(data, args.png)
    return 0


def _chart(data: dict[str, object], png: Path) -> None:
    try:
        from benchmarks import chart
    except ImportError as exc:  # matplotlib missing
        print(f"PNG: skipped ({exc})")
        return
    chart.draw(data, png)
    print(f"PNG: {png}")


if __name__ == "__main__":
    sys.exit(main())
