"""The rehearsal's work (tests/processes/test_rehearsal.py): small tasks whose results are
checked, and a checkpointed actor whose every answer is checked in order."""

from __future__ import annotations

import time

import dista_runtime as dista


@dista.task
def square(i: int) -> int:
    time.sleep(0.001)  # long enough that a restart lands among running tasks
    return i * i


@dista.actor(checkpoint_every=25)
class Ledger:
    """Counts what it was given: its n-th answer is n, if every call was applied once."""

    def __init__(self) -> None:
        self.calls = 0
        self.total = 0

    def add(self, amount: int) -> int:
        self.calls += 1
        self.total += amount
        return self.calls

    def balance(self) -> tuple[int, int]:
        return self.calls, self.total
