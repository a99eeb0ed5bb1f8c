"""The head core alone, the same inputs every time: for before/after comparisons of a change
to the head that a busy machine's timings cannot resolve.

``record`` runs `head_core`'s clusters (plain tasks from 1 and 4 drivers, a task-after
chain) and saves every input the head got, in order (connects and reads, with their
``now``). ``replay`` feeds them to a fresh `Head` of the tree it runs from, and reports the
head's time per task; with ``--writes FILE`` it also saves what the head wrote, or, if FILE
exists, says whether this head wrote the same bytes (a refactor should). Record with the
interpreted core (it subclasses `Head`); replay with either. The inputs are
valid for any head that answers them the same way, so record once and replay every tree::

    python benchmarks/head_replay.py record /tmp/inputs.pickle          # in the old tree
    python benchmarks/head_replay.py replay /tmp/inputs.pickle --writes /tmp/w.pickle
    cd ../new && python benchmarks/head_replay.py replay /tmp/inputs.pickle --writes /tmp/w.pickle

Timings on a shared machine move by 10% or more between runs; instructions do not. Under
``valgrind --tool=callgrind --callgrind-out-file=/dev/null python benchmarks/head_replay.py
replay FILE``, minus the same with ``--load-only``, is the head's instruction count,
repeatable to a few in a million.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree, first

import dista_proto as dp
from benchmarks import head_core

#: (name, drivers, tasks, chain): head_core's throughput cases.
CASES = [
    ("plain tasks, 1 driver", 1, head_core.TASKS, False),
    ("plain tasks, 4 drivers", 4, head_core.TASKS, False),
    ("task-after chain, 1 driver", 1, head_core.CHAIN_TASKS, True),
]
#: One input: ("c", now) for a connect, ("r", link, data, now) for a read.
Input = tuple[Any, ...]


def _recording(log: list[Input]) -> type[dp.Head]:
    """A `Head` that notes its inputs in ``log``."""

    class Recording(dp.Head):
        def connection_made(self, now: int) -> int:
            log.append(("c", now))
            return super().connection_made(now)

        def receive_data(self, link: int, data: dp.frame.Bytes, now: int) -> None:
            log.append(("r", link, bytes(data), now))
            super().receive_data(link, data, now)

    return Recording


def record(path: Path) -> None:
    inputs: dict[str, tuple[int, list[Input]]] = {}
    real = dp.Head
    for name, drivers, tasks, chain in CASES:
        log: list[Input] = []
        dp.Head = _recording(log)  # type: ignore[misc]  # what head_core's clusters make
        try:
            head_core.Cluster(drivers, tasks, chain=chain).run()
        finally:
            dp.Head = real  # type: ignore[misc]
        inputs[name] = (tasks, log)
    path.write_bytes(pickle.dumps(inputs))
    print(f"recorded {sum(len(log) for _, log in inputs.values()):,} inputs to {path}")


def replay(path: Path, writes: Path | None) -> None:
    inputs: dict[str, tuple[int, list[Input]]] = pickle.loads(path.read_bytes())
    wrote: dict[str, list[tuple[int, bytes]]] = {}
    for name, (tasks, log) in inputs.items():
        head = dp.Head(epoch=1, first_number=1, worker_slots=head_core.WORKER_SLOTS, prefetch=0)
        out: list[tuple[int, bytes]] = []
        start = time.perf_counter_ns()
        for entry in log:
            if entry[0] == "c":
                head.connection_made(entry[1])
                continue
            head.receive_data(entry[1], entry[2], entry[3])
            for d in head.decisions():
                assert isinstance(d, dp.Write), d
                out.append((d.link, b"".join(d.buffers)))
        spent = time.perf_counter_ns() - start
        if head.stats().objects:
            raise RuntimeError(f"{name}: the head still tracks objects after the replay")
        wrote[name] = out
        print(f"{name:<30}{spent / tasks / 1e3:>8.2f} µs/task (head only, with the pipes)")
    if writes is None:
        return
    if not writes.exists():
        writes.write_bytes(pickle.dumps(wrote))
        print(f"saved what the head wrote to {writes}")
        return
    before: dict[str, list[tuple[int, bytes]]] = pickle.loads(writes.read_bytes())
    for name, out in wrote.items():
        same = before.get(name) == out
        print(f"{name:<30}{'the same bytes' if same else 'OTHER BYTES'} as {writes}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("mode", choices=["record", "replay"])
    parser.add_argument("inputs", type=Path)
    parser.add_argument("--writes", type=Path, help="save, or compare with, what the head wrote")
    parser.add_argument(
        "--load-only", action="store_true", help="read the inputs and stop (callgrind's base)"
    )
    args = parser.parse_args()
    if args.mode == "record":
        record(args.inputs)
    elif args.load_only:
        pickle.loads(args.inputs.read_bytes())
    else:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {0})  # one core, as head_core pins itself
        replay(args.inputs, args.writes)


if __name__ == "__main__":
    main()
