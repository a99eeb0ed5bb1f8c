"""Soak: run many seeds (default 100,000) and print every failing one for replay.

python -m tests.sim.support.soak [COUNT] [START]
"""

from __future__ import annotations

import sys
import time

from .scenario import run_seed


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    start = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    began = time.perf_counter()
    failed = 0
    for seed in range(start, start + count):
        try:
            run_seed(seed)
        except AssertionError as e:
            failed += 1
            print(f"FAIL seed {seed}: {e}", flush=True)
        if (seed - start + 1) % 1000 == 0:
            print(
                f"{seed - start + 1} seeds, {failed} failed, {time.perf_counter() - began:.0f} s"
            )
    print(f"done: {count} seeds, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
