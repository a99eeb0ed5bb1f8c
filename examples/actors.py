"""An actor that keeps its state through a crash: a word counter fed by tasks.

Run it: ``python examples/actors.py``. It starts a local cluster whose workers checkpoint
actors to a temporary directory, counts the words of 2,000 lines through one actor, kills
the worker process hosting the actor halfway (SIGKILL, as an OOM killer would), and shows
that the count is still exact: the actor came back on another worker from its newest
checkpoint, and the calls that checkpoint did not include ran again, once each.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections import Counter

import dista_runtime as dista


@dista.actor(checkpoint_every=100)
class WordCount:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.lines = 0

    def add(self, words: list[str]) -> int:
        self.counts.update(words)
        self.lines += 1
        return self.lines

    def top(self, n: int) -> list[tuple[str, int]]:
        return self.counts.most_common(n)

    def pid(self) -> int:
        return os.getpid()


@dista.task
def split(line: str) -> list[str]:
    return line.lower().split()


def main() -> None:
    lines = [f"the quick brown fox {i % 7} jumps over the lazy dog {i % 3}" for i in range(2000)]
    with tempfile.TemporaryDirectory() as store:
        os.environ["DISTA_CHECKPOINT_URI"] = f"file://{store}"  # before init: workers inherit
        with dista.init():
            counter = WordCount.remote()
            start = time.perf_counter()
            answers = []
            for i, line in enumerate(lines):
                answers.append(counter.add.remote(split.remote(line)))  # a ref as argument
                if i == 1000:
                    victim = counter.pid.remote().get(timeout=30)
                    os.kill(victim, signal.SIGKILL)
                    print(f"killed the actor's worker (pid {victim}) after 1,000 lines")
            done = dista.get(answers, timeout=120)
            elapsed = time.perf_counter() - start
            print(
                f"{len(done)} lines counted in {elapsed:.2f} s, each once: {done == list(range(1, 2001))}"
            )
            print("top words:", counter.top.remote(3).get(timeout=30))
            assert counter.pid.remote().get(timeout=30) != victim
            counter.kill()


if __name__ == "__main__":
    main()
