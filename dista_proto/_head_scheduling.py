"""The head's scheduling: ready queues, idle workers, slots and prefetch.

Which ready task goes to which worker, and when. Ready tasks wait in one `FairQueue` per
registry hash (round-robin between drivers, FIFO within one); workers with a free slot wait
in one deque per registry, those with nothing running first; a task whose largest stored
input sits on a worker with room goes there (locality). A worker has ``worker_slots`` slots
and ``prefetch`` spare ones that only tasks known to be short may take (`Durations`).
A few task IDs (by-value functions) run on any worker: their tasks wait in the queue under
`ANYWHERE` and are served to idle workers of every registry, oldest first against the
registry's own queue.

No worker idles while work waits on another: a task only takes a prefetch slot when no idle
worker has a real slot; a task whose worker blocks (reading other objects) lends its slot
until it resumes; and a worker that runs dry while its queue is empty asks the busiest
worker of its registry for its newest task back (`FREE_WITHDRAW`): if that worker has not
started it, it says so (`SPAN_WITHDRAWN`) and the task is queued again, at the front.
`Head` inherits this; the state it reads is the head's own.
"""

from __future__ import annotations

import contextlib
from collections import deque
from typing import Final

from ._conventions import FREE_WITHDRAW, SPAN_BLOCKED, SPAN_RESUMED, SPAN_WITHDRAWN, TASK_ID_MASK
from ._durations import PREFETCH_NS, Durations
from ._events import (
    Free,
    InlineInput,
    LocatedInput,
    Span,
    Task,
    TaskInput,
    TaskInputs,
    TaskMany,
)
from ._fairqueue import FairQueue
from ._head_grants import Granting
from ._head_records import ObjState, Peer, TaskRecord, TaskState, TrackedObject
from ._links import Links

__all__ = ["ANYWHERE", "Scheduling"]

#: The registry key of tasks any worker can run (by-value functions).
ANYWHERE: Final = -1

_INLINE: Final = ObjState.INLINE
_STORED: Final = ObjState.STORED
_QUEUED: Final = TaskState.QUEUED
_RUNNING: Final = TaskState.RUNNING


class Scheduling(Granting):
    """The scheduling half of `Head`."""

    _links: Links
    _peers: dict[int, Peer]
    _ready: dict[int, FairQueue[TaskRecord]]  # registry -> ready tasks
    _idle: dict[int, deque[Peer]]  # registry -> workers with a free slot
    _durations: Durations
    _objects: dict[int, TrackedObject]
    _workers_of: dict[int, set[Peer]]  # registry -> its connected, undrained workers
    _orphaned: dict[int, int]  # registry with queued tasks and no worker -> since when
    _now: int
    pending: int
    running: int

    no_worker_grace_ns: int

    def _fail_tasks(self, stack: list[tuple[TaskRecord, str]]) -> None:
        raise NotImplementedError  # the head's

    def _settle(self, task: TaskRecord) -> None:
        raise NotImplementedError  # the head's

    def _maybe_release_drained(self, worker: Peer) -> None:
        raise NotImplementedError  # the head's

    def _not_given(self, worker: Peer, oid: int) -> None:
        raise NotImplementedError  # the head's

    def _foreign_actor(self, peer: Peer, actor_id: int, oid: int) -> bool:
        raise NotImplementedError  # the head's

    def _store_mark(self, oid: int, worker: Peer) -> None:
        raise NotImplementedError  # the head's

    # -- the pulled timer: tasks no worker can run ---------------------------------------

    def next_deadline(self) -> int | None:
        """When `on_timer` has work to do (nanoseconds, as ``now``), or None."""
        actors = self._actors_deadline()
        if not self._orphaned:
            return actors
        tasks = min(self._orphaned.values()) + self.no_worker_grace_ns
        return tasks if actors is None else min(tasks, actors)

    def _actors_deadline(self) -> int | None:
        raise NotImplementedError  # the head's

    def _fail_waiting_actors(self, now: int) -> None:
        raise NotImplementedError  # the head's

    def _actor_worker_free(self, worker: Peer) -> bool:
        raise NotImplementedError  # the head's

    def on_timer(self, now: int) -> None:
        """Time passed: fail tasks that waited out the grace for a worker of their registry."""
        self._now = now
        self._fail_waiting_actors(now)
        for registry, since in list(self._orphaned.items()):
            if now < since + self.no_worker_grace_ns:
                continue
            del self._orphaned[registry]
            if self._workers_of.get(registry):
                continue
            queue = self._ready.get(registry)
            waited = self.no_worker_grace_ns / 1e9
            failed = []
            while queue is not None and (task := queue.pop()) is not None:
                why = (
                    f"no worker can run task {task.task_id & TASK_ID_MASK:#x}: none of the "
                    f"connected workers has this driver's registry {registry:#018x} "
                    f"(waited {waited:g} s for one)"
                )
                failed.append((task, why))
            self._ready.pop(registry, None)  # a registry no worker has: keep no queue for it
            self._fail_tasks(failed)

    # -- slots lent, given back, taken back ----------------------------------------------

    def _on_mark(self, worker: Peer, span: Span) -> None:
        """Dista's span marks (`dista_proto._conventions`): blocked, resumed, withdrawn."""
        obj = self._objects.get(span.object_id)
        task = obj.task if obj is not None else None
        if task is None or task.worker is not worker or task.state is not _RUNNING:
            self._not_given(worker, span.object_id)  # stale: settled, retried elsewhere
            return
        if span.mark == SPAN_BLOCKED:
            if not task.blocked:
                self._give_slot_back(worker, task)
                task.blocked = True
                worker.blocked += 1
                self._make_idle(worker)
                self._pump(worker.registry)
        elif span.mark == SPAN_RESUMED:
            if task.blocked:
                task.blocked = False
                worker.blocked -= 1
                worker.free -= 1  # it takes a slot back, even if that overcommits for now
        elif span.mark == SPAN_WITHDRAWN:
            self._withdrawn(worker, task)

    def _withdrawn(self, worker: Peer, task: TaskRecord) -> None:
        """``worker`` dropped ``task`` unstarted: settle it if cancelled, else queue it again."""
        worker.running.pop(task.oid, None)
        self._give_slot_back(worker, task)
        self.running -= 1
        task.worker = None
        task.withdrawing = False
        if task.dropped:
            self._settle(task)
        else:
            self.pending += 1
            task.state = _QUEUED
            self._queue_of(task.registry).push(task, front=True)
            if task.registry == ANYWHERE:
                for registry in list(self._idle):
                    self._pump(registry)
            else:
                self._pump(task.registry)
        self._after_slot_freed(worker)

    def _after_slot_freed(self, worker: Peer) -> None:
        if worker.draining:
            self._maybe_release_drained(worker)
        elif self._peers.get(worker.link) is worker and not self._actor_worker_free(worker):
            self._make_idle(worker)
            self._pump(worker.registry)
            self._steal_for(worker)

    def _forget_worker(self, worker: Peer) -> None:
        """``worker`` takes no more work (lost or draining)."""
        idle = self._idle.get(worker.registry)
        if worker.idle and idle is not None:
            # Out of its registry's idle deque now, not when a pump reaches it: peers
            # saying hello with registries of their own (fuzzed) left one deque each,
            # holding a gone worker, and every portable task's pump walked them all.
            worker.idle = False
            with contextlib.suppress(ValueError):
                idle.remove(worker)
            if not idle:
                del self._idle[worker.registry]
        serving = self._workers_of.get(worker.registry)
        if serving is not None:
            serving.discard(worker)
            if not serving:
                del self._workers_of[worker.registry]
                self._note_orphaned(worker.registry)

    def _note_orphaned(self, registry: int) -> None:
        """If tasks of ``registry`` wait and no worker of it is left, start their grace."""
        if registry not in self._workers_of and _has_work(self._ready.get(registry)):
            self._orphaned.setdefault(registry, self._now)

    def _enqueue(self, task: TaskRecord) -> None:
        task.state = _QUEUED
        task.queued = self._now
        if task.registry != ANYWHERE and task.registry not in self._workers_of:
            self._orphaned.setdefault(task.registry, self._now)
        self._queue_of(task.registry).push(task)
        if task.registry == ANYWHERE:
            for registry in list(self._idle):
                self._pump(registry)
        else:
            self._pump(task.registry)

    def _queue_of(self, registry: int) -> FairQueue[TaskRecord]:
        queue = self._ready.get(registry)
        if queue is None:
            queue = self._ready[registry] = FairQueue()
        return queue

    # -- scheduling ----------------------------------------------------------------------------

    def _make_idle(self, worker: Peer) -> None:
        if worker.idle and not worker.running:
            # Already waiting with a slot free, now with nothing running: to the front,
            # ahead of workers still busy with something (O(idle workers), only then).
            waiting = self._idle[worker.registry]
            if waiting[0] is not worker:
                waiting.remove(worker)
                waiting.appendleft(worker)
            return
        if (
            worker.idle
            or (worker.free <= 0 and worker.spare <= 0)
            or worker.draining
            or worker.actor is not None
        ):
            return
        worker.idle = True
        idle = self._idle.get(worker.registry)
        if idle is None:
            idle = self._idle[worker.registry] = deque()
        if worker.running:
            idle.append(worker)
        else:
            idle.appendleft(worker)  # a worker with nothing to do goes first

    def _pump(self, registry: int) -> None:
        """Dispatch ready tasks of ``registry`` (and portable ones) while it has free slots."""
        queue = self._ready.get(registry)
        anywhere = self._ready.get(ANYWHERE)
        idle = self._idle.get(registry)
        if not idle or not (_has_work(queue) or _has_work(anywhere)):
            return
        peers = self._peers
        short_ids = self._durations
        while idle:
            worker = idle[0]
            if (
                (worker.free <= 0 and worker.spare <= 0)
                or worker.draining
                or worker.actor is not None
                or peers.get(worker.link) is not worker
            ):
                idle.popleft()
                worker.idle = False
                continue
            task = queue.peek() if queue is not None else None
            source: FairQueue[TaskRecord] | None
            if anywhere is not None:
                other = anywhere.peek()
                if other is not None and (task is None or other.queued < task.queued):
                    task, source = other, anywhere
                else:
                    source = queue
            else:
                source = queue
            if task is None or source is None:
                return
            cost = short_ids.short_estimate(task.task_id)
            target = self._preferred(task, cost)
            if target is None:
                if worker.free > 0:
                    target = worker
                else:
                    # A real slot anywhere before a prefetch slot here: a task never waits
                    # behind another worker's work while this registry has an idle slot.
                    target = self._with_slot(idle)
                    if target is None and _fits_prefetch(worker, cost):
                        target = worker
                    if target is None:
                        return  # only prefetch slots are free: the task waits for a slot
            source.pop()
            self._dispatch(task, target, cost)
            if len(idle) > 1 and idle[0] is target:
                # Spread: every idle worker gets its first task before any gets a second,
                # so a short task does not wait behind a long one while a worker idles.
                idle.rotate(-1)

    def _with_slot(self, idle: deque[Peer]) -> Peer | None:
        """The first idle worker with a slot (not just a prefetch slot) free."""
        for worker in idle:
            if (
                worker.free > 0
                and not worker.draining
                and worker.actor is None
                and self._peers.get(worker.link) is worker
            ):
                return worker
        return None

    def _preferred(self, task: TaskRecord, cost: int | None) -> Peer | None:
        """The idle worker holding the task's largest stored input, if any (locality)."""
        best = None
        size = -1
        for obj in task.inputs:
            if obj.state is _STORED and obj.size > size and obj.holder is not None:
                holder = obj.holder
                if (
                    _fits(holder, cost)
                    and not holder.draining
                    and holder.actor is None
                    and (holder.registry == task.registry or task.registry == ANYWHERE)
                ):
                    best, size = holder, obj.size
        return best

    def _dispatch(self, task: TaskRecord, worker: Peer, cost: int | None) -> None:
        event = task.event
        if event is None:
            built = self._task_inputs(task)
            if isinstance(built, str):
                self._fail_tasks([(task, built)])
                return
            frame: Task | TaskMany | TaskInputs = built
            self._grant_inputs(task, worker)  # before it fetches them
        else:
            frame = event
        # A short task takes a prefetch slot while one fits, keeping slots for the rest.
        task.spare = _fits_prefetch(worker, cost)
        if task.spare:
            assert cost is not None
            task.spare_ns = cost
            worker.spare -= 1
            worker.prefetched += cost
        else:
            worker.free -= 1
        task.state = _RUNNING
        task.worker = worker
        task.dispatched = self._now
        task.answers_left = task.results
        worker.running[task.oid] = task
        self.pending -= 1
        self.running += 1
        self._store_mark(task.oid, worker)
        self._links.send(worker.link, frame)

    def _give_slot_back(self, worker: Peer, task: TaskRecord) -> None:
        """``task`` no longer holds a slot of ``worker`` (it ended, blocked or came back)."""
        if task.blocked:
            task.blocked = False  # its slot was lent when it blocked
            worker.blocked -= 1
        elif task.spare:
            task.spare = False
            worker.spare += 1
            worker.prefetched -= task.spare_ns
            task.spare_ns = 0
        else:
            worker.free += 1

    def _steal_for(self, worker: Peer) -> None:
        """``worker`` ran dry and nothing is queued for it: ask the busiest worker of its
        registry for tasks it holds but may not have started, one per free slot."""
        if (
            worker.running
            or worker.draining
            or worker.actor is not None
            or worker.free <= 0
            or worker.registry not in (self._workers_of)
        ):
            return
        if _has_work(self._ready.get(worker.registry)) or _has_work(self._ready.get(ANYWHERE)):
            return
        for _ in range(worker.free):
            victim, task = None, None
            most = 1  # a worker running one task has nothing waiting behind it
            for other in self._workers_of[worker.registry]:
                if other is worker or len(other.running) <= most:
                    continue
                count, newest = 0, None
                for t in other.running.values():
                    if not (t.blocked or t.withdrawing or t.dropped):
                        count, newest = count + 1, t  # the newest: least likely started
                if count > most:
                    most, victim, task = count, other, newest
            if victim is None or task is None:
                return
            task.withdrawing = True
            self._links.send(victim.link, Free(task.oid, FREE_WITHDRAW))

    def _task_inputs(self, task: TaskRecord) -> TaskInputs | str:
        inputs: list[TaskInput] = []
        for obj in task.inputs:
            if obj.state is _INLINE:
                inputs.append(InlineInput(obj.oid, obj.value))
            elif obj.state is _STORED and obj.holder is not None:
                inputs.append(LocatedInput(obj.oid, obj.holder.address))
            else:
                return f"input {obj.oid:#x} failed: {obj.error}"
        many = task.results if task.many else None
        return TaskInputs(task.oid, task.task_id, tuple(inputs), task.gather, task.value, many)


def _has_work(queue: FairQueue[TaskRecord] | None) -> bool:
    """Whether ``queue`` holds a live task. (Not ``bool(queue)``: compiled by mypyc, a
    native class is always true, whatever its ``__len__``.)"""
    return queue is not None and queue.peek() is not None


def _fits_prefetch(worker: Peer, cost: int | None) -> bool:
    """Whether a task of estimated ``cost`` (None: not short) fits a prefetch slot."""
    return cost is not None and worker.spare > 0 and worker.prefetched + cost <= PREFETCH_NS


def _fits(worker: Peer, cost: int | None) -> bool:
    """Whether ``worker`` has room for a task of estimated ``cost``: a slot or a prefetch one."""
    return worker.free > 0 or _fits_prefetch(worker, cost)
