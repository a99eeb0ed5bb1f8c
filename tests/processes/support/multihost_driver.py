"""The driver of the multi-host test: ``python -m tests.processes.support.multihost_driver HEAD``.

Joins the head at HEAD, submits `work` tasks (every ``--large-every``-th with a result over
64 KiB, which stays on its worker) and a `digest` task for each large result (it runs on
either worker, and reads the large result from where it lies), then reads every result and
checks it. A result lost with its worker (the head declared the worker lost) is resubmitted,
as a user would, at most ``--rounds`` times; each such loss is counted by reason.

Prints ``driver: submitted N tasks`` once they are all submitted, and at the end one line
``driver summary: {json}`` (counts, seconds, tasks per worker pid, losses), exit status 0
if every result is right, 1 if not.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import dista_runtime as dista
from tests.processes.support import multihost_tasks as mt

#: What a result lost with its worker fails with (retried, as a user would).
_LOST = ("lost", "fetch from")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("head")
    parser.add_argument("--tasks", type=int, default=400)
    parser.add_argument("--seconds", type=float, default=0.05)
    parser.add_argument("--large-every", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=40.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    start = time.monotonic()
    deadline = start + args.timeout

    def submit_work(i: int) -> Callable[[], dista.ObjectRef[Any]]:
        size = mt.LARGE if i % args.large_every == 0 else 64
        return lambda: mt.work.remote(i, size, args.seconds)

    def submit_digest(i: int) -> Callable[[], dista.ObjectRef[Any]]:
        return lambda: mt.digest.remote(mt.work.remote(i, mt.LARGE, args.seconds))

    def check(key: tuple[str, int], value: Any) -> str | None:
        kind, i = key
        if kind == "work":
            size = mt.LARGE if i % args.large_every == 0 else 64
            good = value[1] == mt.payload(i, size)
        else:
            good = value[1] == mt.digest_of(mt.payload(i, mt.LARGE))
        return None if good else f"{kind} {i}: wrong result {str(value)[:80]!r}"

    with dista.init(args.head, timeout=20):
        print(f"driver: joined {args.head}", flush=True)
        makers: dict[tuple[str, int], Callable[[], dista.ObjectRef[Any]]] = {}
        for i in range(args.tasks):
            makers["work", i] = submit_work(i)
            if i % args.large_every == 0:
                makers["digest", i] = submit_digest(i)
        refs = {key: make() for key, make in makers.items()}
        print(f"driver: submitted {len(refs)} tasks", flush=True)
        wrong: list[str] = []
        losses: Counter[str] = Counter()
        by_pid: Counter[int] = Counter()
        failed: dict[tuple[str, int], str] = {}
        for key, make in makers.items():
            for attempt in range(args.rounds + 1):
                try:
                    value = refs[key].get(timeout=max(0.1, deadline - time.monotonic()))
                except dista.TaskError as e:
                    why = e.message.splitlines()[0]
                    if attempt < args.rounds and any(w in why for w in _LOST):
                        losses[why[:120]] += 1
                        print(f"driver: {key[0]} {key[1]} lost ({why}); resubmitted", flush=True)
                        refs[key] = make()
                        continue
                    failed[key] = why
                    break
                by_pid[value[0]] += 1
                problem = check(key, value)
                if problem:
                    wrong.append(problem)
                break
        refs.clear()
        summary = {
            "results": len(makers),
            "right": len(makers) - len(wrong) - len(failed),
            "wrong": wrong[:10],
            "failed": [f"{k[0]} {k[1]}: {v}" for k, v in list(failed.items())[:10]],
            "large": sum(1 for k in makers if k[0] == "work" and k[1] % args.large_every == 0),
            "digests": sum(1 for k in makers if k[0] == "digest"),
            "seconds": round(time.monotonic() - start, 2),
            "by_pid": {str(p): n for p, n in sorted(by_pid.items())},
            "resubmitted": sum(losses.values()),
            "losses": dict(losses),
        }
    print(f"driver summary: {json.dumps(summary)}", flush=True)
    return 0 if not wrong and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
