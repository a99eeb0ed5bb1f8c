"""Taking work back for an idle worker (docs/protocol.md, "Taking work back for an idle
worker"): a worker that runs dry while nothing is queued for it asks the busiest worker of
its registry for the newest task it holds but may not have started (`FREE_WITHDRAW`), once
per free slot. A worker that had not started it answers `SPAN_WITHDRAWN` and the scheduler
queues it again at the front, where the idle worker gets it; one that had started runs it
on. This also mends an estimate that proved wrong (a "short" task that runs long with
prefetched tasks behind it) and workers joining after tasks were spread over the first.
"""

from __future__ import annotations

from typing import Final

from ._conventions import FREE_WITHDRAW
from ._events import Free
from ._fairqueue import FairQueue, has_work
from ._head_ahead import early
from ._head_counts import Counts
from ._head_records import Peer, TaskRecord, TaskState
from ._head_registries import BY_VALUE
from ._head_wire import Wire
from ._lifecycle import Slot, TaskCause

__all__ = ["TakeBack"]

_RUNNING: Final = TaskState.RUNNING


class TakeBack:
    """Asks busy workers for tasks back on behalf of idle ones of their registry; reads the
    scheduler's ``workers_of`` and ``ready`` (its own dicts, shared)."""

    def __init__(
        self,
        wire: Wire,
        counts: Counts,
        workers_of: dict[int, set[Peer]],
        ready: dict[int, FairQueue[TaskRecord]],
    ) -> None:
        self._wire = wire
        self._counts = counts
        self.workers_of = workers_of
        self.ready = ready

    def for_idle(self, worker: Peer) -> None:
        """``worker`` ran dry and nothing is queued for it: ask the busiest worker of its
        registry for tasks it holds but may not have started, one per free slot."""
        if (
            worker.running
            or worker.draining
            or worker.actor is not None
            or worker.free <= 0
            or worker.registry not in self.workers_of
        ):
            return
        ready = self.ready
        if has_work(ready.get(worker.registry)) or has_work(ready.get(worker.registry | BY_VALUE)):
            return
        for _ in range(worker.free):
            victim, task = None, None
            most = 1  # a worker running one task has nothing waiting behind it
            for other in self.workers_of[worker.registry]:
                if other is worker or len(other.running) <= most:
                    continue
                count, newest = 0, None
                for t in other.running.values():
                    # (Not one sent ahead of its inputs: it could run nowhere else yet.)
                    if t.state is _RUNNING and t.slot is not Slot.LENT and not early(t):
                        count, newest = count + 1, t  # the newest: least likely started
                if count > most:
                    most, victim, task = count, other, newest
            if victim is None or task is None:
                return
            self._counts.move_task(task, TaskCause.ASK_BACK)
            self._wire.links.send(victim.link, Free(task.oid, FREE_WITHDRAW))
