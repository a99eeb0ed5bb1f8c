"""The rehearsal's driver: ``python -m tests.processes.support.rehearsal_driver HEAD``.

Joins the head at HEAD, makes two checkpointed `Ledger` actors, then submits ``--tasks``
`square` tasks in waves of ``--wave`` while calling each actor once a wave, and checks every
result: each square right, each actor's answers 1, 2, 3, ... in order (every call applied
exactly once, through drains, restarts and a head restart) and its balance exact. Prints
``driver: started`` once the first wave is in, and at the end ``driver summary: {json}``;
exit status 0 if everything is right.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import dista_runtime as dista
from tests.processes.support.rehearsal_tasks import Ledger, square


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("head")
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--wave", type=int, default=500)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    with dista.init(args.head, timeout=60):
        ledgers = [Ledger.remote(), Ledger.remote()]
        start = time.monotonic()
        answers: list[list[dista.ObjectRef[int]]] = [[], []]
        wrong = 0
        for first in range(0, args.tasks, args.wave):
            wave = range(first, min(first + args.wave, args.tasks))
            refs = [square.remote(i) for i in wave]
            for n, ledger in enumerate(ledgers):
                answers[n].append(ledger.add.remote(first + n))
            if first == 0:
                print("driver: started", flush=True)
            values = dista.get(refs, timeout=args.timeout)
            wrong += sum(v != i * i for i, v in zip(wave, values, strict=True))
        seconds = time.monotonic() - start
        calls = [dista.get(a, timeout=args.timeout) for a in answers]
        balances = [ledger.balance.remote().get(timeout=args.timeout) for ledger in ledgers]
        waves = len(answers[0])
        expected = [
            (waves, sum(first + n for first in range(0, args.tasks, args.wave))) for n in (0, 1)
        ]
        summary = {
            "tasks": args.tasks,
            "wrong": wrong,
            "seconds": round(seconds, 2),
            "actors_in_order": all(c == list(range(1, waves + 1)) for c in calls),
            "balances": [list(b) for b in balances],
            "expected": [list(e) for e in expected],
        }
    print(f"driver summary: {json.dumps(summary)}", flush=True)
    right = (
        wrong == 0 and summary["actors_in_order"] and summary["balances"] == summary["expected"]
    )
    return 0 if right else 1


if __name__ == "__main__":
    sys.exit(main())
