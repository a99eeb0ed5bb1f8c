"""A driver's tasks coming in: task, task-many and task-after become `TaskRecord`s.

Each is checked before the head takes it (`Guard`: too many results, inputs that are not
the driver's; `Resume`: a resuming driver's frame this head already has; `Objects`: IDs in
use), then recorded under the registry whose workers run it, and named for people: a task's
function is its task ID, but a function sent by value is told apart by the digest its
argument begins with (`function_id`).
"""

from __future__ import annotations

from ._conventions import TASK_ID_MASK, function_id
from ._events import Event, Task, TaskAfter, TaskMany
from ._head_counts import Counts
from ._head_objects import Objects
from ._head_records import Peer, TaskRecord
from ._head_resume import Resume
from ._head_scheduling import Scheduler
from ._head_security import Guard
from ._head_wire import Wire
from .frame import Bytes

__all__ = ["Intake"]


class Intake:
    """The routes of a driver's task, task-many and task-after."""

    def __init__(
        self,
        wire: Wire,
        guard: Guard,
        resume: Resume,
        objects: Objects,
        scheduler: Scheduler,
        counts: Counts,
        by_value_task: int,
    ) -> None:
        self._wire = wire
        self._guard = guard
        self._resume = resume
        self._objects = objects
        self._scheduler = scheduler
        self._counts = counts
        # The task whose argument names its function (by value); -1: none is.
        self._by_value = by_value_task & TASK_ID_MASK if by_value_task else -1
        # The last tally row looked up, by (function, owner link): a driver submits the
        # same function many times over, and this is on every task's path.
        self._last: tuple[int, int, list[int]] = (-1, -1, [])

    def on_task(self, peer: Peer, event: Event) -> None:
        assert isinstance(event, (Task, TaskMany))
        results = event.results if isinstance(event, TaskMany) else 1
        self._submit(peer, event.object_id, event.task_id, results, event, event.argument)

    def on_task_after(self, peer: Peer, event: Event) -> None:
        assert isinstance(event, TaskAfter)
        results = event.results or 1
        if self._guard.foreign_input(peer, event, results):
            return
        task = self._submit(peer, event.object_id, event.task_id, results, None, event.value)
        if task is None:
            return
        task.many = event.results is not None
        task.gather = event.gather
        task.value = event.value
        self._objects.take_inputs(task, event.inputs)

    def _submit(
        self,
        peer: Peer,
        oid: int,
        task_id: int,
        results: int,
        event: Task | TaskMany | None,
        argument: Bytes | None,
    ) -> TaskRecord | None:
        if self._guard.too_many(peer, oid, results):
            return None
        # A resuming driver's frames may be ones this head has: checked only for them.
        if (peer.resuming and self._resume.resent(peer, oid, results)) or not (
            self._objects.check_new_ids(peer, oid, results)
        ):
            return None
        registry = self._scheduler.registry_of(task_id, peer)
        task = TaskRecord(oid, task_id, peer.link, registry, results, event, self._wire.now)
        function = task.function
        if function == self._by_value:  # a function sent by value: which one
            function = task.function = function_id(task_id, argument, -1)
        last_function, last_owner, row = self._last
        if function != last_function or peer.link != last_owner:
            row = self._counts.row(function, peer.link)
            self._last = (function, peer.link, row)
        task.tally = row
        self._objects.submit(task)
        return task
