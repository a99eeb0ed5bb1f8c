"""Tasks sent ahead: a short task waiting only on results a worker is making goes to that
worker before they exist (Dista's extension, docs/protocol.md "Tasks sent ahead").

Without it, each link of a chain of tasks costs a message each way between the head and a
worker: the result up, the next task down, with the head's turn between. A worker that
says it runs ahead (`HELLO_RUNS_AHEAD`) gets, when a task is sent to it, every task that
waits on that task's results and on nothing else that is missing, as long as the
dependent is known to be short and fits a prefetch slot (the budget of `Peer.fits_prefetch`,
so at most about 2 ms of estimated work waits there); and, in turn, the tasks waiting on
those. The inputs still to come are located at `MADE_HERE` (0.0.0.0:0, no object server's
address): the worker waits for its own results and starts the task the moment they exist. A dependent that did
not fit waits on its producer in `_frontier`, and goes when its worker has room again.

Everything else is as for a task sent from the queue: it holds a prefetch slot, its answers
settle it, a lost worker's tasks run again (a task sent ahead whose input is then missing
waits for it again, see `Scheduler._dispatch`), and the worker gives one back unstarted
(`SPAN_WITHDRAWN`) when what it waited for will not come (its producer failed, was
withdrawn or cancelled): queued again, it fails with its input or waits for it as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ._conventions import MADE_HERE
from ._durations import Durations
from ._events import InlineInput, LocatedInput, TaskInput, TaskInputs
from ._head_objects import Objects
from ._head_records import ObjState, Peer, TaskRecord, TaskState
from ._lifecycle import TaskCause

__all__ = ["Ahead", "early", "task_inputs"]

_PENDING: Final = ObjState.PENDING
_INLINE: Final = ObjState.INLINE
_STORED: Final = ObjState.STORED
_WAITING: Final = TaskState.WAITING
_RUNNING: Final = TaskState.RUNNING

_NONE: Final[list[TaskRecord]] = []  # (never added to: see `_dependents`)

#: How a task goes to a worker once its frame is built (`Scheduler.send_run`).
SendRun = Callable[[TaskRecord, Peer, "int | None", TaskInputs, TaskCause], None]


def early(task: TaskRecord) -> bool:
    """Whether ``task`` went ahead of an input not made yet: it can run nowhere else yet."""
    return task.event is None and any(obj.state is _PENDING for obj in task.inputs)


def task_inputs(task: TaskRecord, ahead: bool = False) -> TaskInputs | str:
    """The task-inputs frame of ``task``, or why an input failed. ``ahead``: it goes to the
    worker making its inputs still to come, which are located at `MADE_HERE`."""
    inputs: list[TaskInput] = []
    for obj in task.inputs:
        if obj.state is _INLINE:
            inputs.append(InlineInput(obj.oid, obj.value))
        elif obj.state is _STORED and obj.holder is not None:
            inputs.append(LocatedInput(obj.oid, obj.holder.address))
        elif obj.state is _PENDING and ahead:
            inputs.append(LocatedInput(obj.oid, MADE_HERE))
        else:
            return f"input {obj.oid:#x} failed: {obj.error}"
    many = task.results if task.many else None
    return TaskInputs(task.oid, task.task_id, tuple(inputs), task.gather, task.value, many)


class Ahead:
    """Sends tasks ahead to the workers making their inputs."""

    def __init__(
        self,
        objects: Objects,
        durations: Durations,
        may_run: Callable[[Peer, int], bool],
        send_run: SendRun,
    ) -> None:
        self._objects = objects
        self._durations = durations
        self._may_run = may_run
        self._send_run = send_run
        #: Per worker, the tasks running there whose dependents did not fit (by result ID).
        self._frontier: dict[Peer, dict[int, TaskRecord]] = {}
        self.count: int = 0  # tasks sent ahead

    def sent(self, task: TaskRecord, worker: Peer) -> None:
        """``task`` was sent to ``worker``: send ahead what waits only on it, and so on."""
        waiting = self._dependents(task)
        if waiting and worker.runs_ahead and not worker.draining and worker.actor is None:
            stack = [(task, waiting)]  # (no allocation for the many tasks nothing waits on)
            while stack:
                producer, waiting = stack.pop()
                sent = (t for t in waiting if self._try(t, producer, worker))
                stack.extend((t, self._dependents(t)) for t in sent)

    def waits(self, task: TaskRecord) -> None:
        """``task`` was just submitted and waits: if a worker makes what it waits for, it
        goes there ahead (and what waits on it, in turn, when it comes)."""
        maker = next((obj.task for obj in task.inputs if obj.state is _PENDING), None)
        worker = maker.worker if maker is not None else None
        if maker is None or worker is None or maker.state is not _RUNNING:
            return
        if worker.runs_ahead and not worker.draining and worker.actor is None:
            self._try(task, maker, worker)

    def _try(self, task: TaskRecord, producer: TaskRecord, worker: Peer) -> bool:
        """Send ``task`` ahead to ``worker`` if it fits; whether it went."""
        if not self._fits(task, worker):
            return False
        cost = self._durations.short_estimate(task.task_id)
        if cost is None:
            return False  # not known to be short: it waits for its inputs here
        if not worker.fits_prefetch(cost):
            self._frontier.setdefault(worker, {})[producer.oid] = producer
            return False
        self._send(task, worker, cost)
        return True

    def room_freed(self, worker: Peer) -> None:
        """``worker`` has room again: send what waits on its producers in the frontier."""
        producers = self._frontier.pop(worker, None)
        if producers:
            for producer in producers.values():
                if producer.worker is worker and producer.state is _RUNNING:
                    self.sent(producer, worker)

    def forget(self, worker: Peer) -> None:
        """``worker`` takes no more work (lost, draining)."""
        self._frontier.pop(worker, None)

    def _dependents(self, producer: TaskRecord) -> list[TaskRecord]:
        """The tasks waiting on ``producer``'s results (a copy: sending one ahead takes it
        off its inputs' waiters)."""
        by_id = self._objects.by_id
        if producer.results == 1:
            obj = by_id.get(producer.oid)
            return list(obj.waiters) if obj is not None and obj.waiters else _NONE
        found: list[TaskRecord] = []
        for oid in range(producer.oid, producer.oid + producer.results):
            obj = by_id.get(oid)
            if obj is not None and obj.waiters:
                found.extend(obj.waiters)
        return found

    def _fits(self, task: TaskRecord, worker: Peer) -> bool:
        """Whether ``task`` waits only on results ``worker`` is making, and may run there."""
        if task.state is not _WAITING or task.event is not None:
            return False
        if not self._may_run(worker, task.registry):
            return False
        for obj in task.inputs:
            state = obj.state
            if state is _PENDING:
                maker = obj.task
                if maker is None or maker.worker is not worker or maker.state is not _RUNNING:
                    return False
            elif state is not _INLINE and (state is not _STORED or obj.holder is None):
                return False
        return True

    def _send(self, task: TaskRecord, worker: Peer, cost: int | None) -> None:
        frame = task_inputs(task, ahead=True)
        assert not isinstance(frame, str)  # (`_fits`: no input failed)
        for obj in task.inputs:
            waiters = obj.waiters
            if obj.state is _PENDING and waiters is not None:
                # No longer waiting here: queued again later, it waits afresh if need be.
                while task in waiters:
                    waiters.remove(task)
        task.waiting = 0
        self.count += 1
        self._send_run(task, worker, cost, frame, TaskCause.AHEAD)
