"""How long each task ID has been running lately: what the head prefetches by.

A worker with only its `worker_slots` tasks at a time waits a round trip to the head after
each result before it has the next one; for tasks of a few microseconds that round trip,
not the task, is the cost. So the head learns from spans how long each task ID runs and
sends a worker up to ``prefetch`` more tasks at once when they are known to be short: at
most ``prefetch`` times `SHORT_NS` of estimated work can then wait behind a worker's
current task, while a task never seen, or seen running long, still waits for a slot.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SHORT_NS", "Durations"]

#: A task ID whose recent runs average at most this is short enough to prefetch.
SHORT_NS: Final = 500_000
#: Task IDs remembered; past this the table starts again (a long-lived head, by-name tasks).
_CAP: Final = 4096


class Durations:
    """An exponential moving average (weight 1/4) of run time per task ID."""

    __slots__ = ("_average", "short_ns")

    def __init__(self, short_ns: int = SHORT_NS) -> None:
        self.short_ns = short_ns
        self._average: dict[int, int] = {}

    def record(self, task_id: int, elapsed_ns: int) -> None:
        elapsed_ns = max(0, elapsed_ns)
        average = self._average.get(task_id)
        if average is None:
            if len(self._average) >= _CAP:
                self._average.clear()
            self._average[task_id] = elapsed_ns
        else:
            self._average[task_id] = (3 * average + elapsed_ns) >> 2

    def is_short(self, task_id: int) -> bool:
        average = self._average.get(task_id)
        return average is not None and average <= self.short_ns
