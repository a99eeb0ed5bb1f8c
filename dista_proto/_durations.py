"""How long each task ID has been running lately: what the head prefetches by.

A worker with only its `worker_slots` tasks at a time waits a round trip to the head after
each result before it has the next one; for tasks of a few microseconds that round trip,
not the task, is the cost. So the head learns from spans how long each task ID runs and
sends a worker up to ``prefetch`` more tasks at once when they are known to be short, while
their estimates add up to at most `PREFETCH_NS`: so at most that much estimated work waits
in a worker's prefetch slots behind its current task (32 tasks of 50 µs, or 4 of 0.5 ms),
while a task never seen, or seen running long, still waits for a slot.
"""

from __future__ import annotations

from typing import Final

__all__ = ["PREFETCH_NS", "SHORT_NS", "Durations"]

#: A task ID whose recent runs average at most this is short enough to prefetch.
SHORT_NS: Final = 500_000
#: The estimated work one worker's prefetch slots may hold at once.
PREFETCH_NS: Final = 2_000_000
#: Task IDs remembered; past this the table starts again (a long-lived head, by-name tasks).
_CAP: Final = 4096


class Durations:
    """An exponential moving average (weight 1/4) of run time per task ID."""

    __slots__ = ("_average", "short_ns")

    def __init__(self, short_ns: int = SHORT_NS) -> None:
        self.short_ns: int = short_ns
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

    def short_estimate(self, task_id: int) -> int | None:
        """The task ID's average run time if it is short enough to prefetch, else None."""
        average = self._average.get(task_id)
        return average if average is not None and average <= self.short_ns else None
