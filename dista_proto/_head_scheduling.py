"""The head's scheduler: ready queues, idle workers, slots and prefetch; runs and their
answers; the timeline of finished runs.

Which ready task goes to which worker, and when. Ready tasks wait in one `FairQueue` per
registry hash (round-robin between drivers, FIFO within one); workers with a free slot wait
in one deque per registry, those with nothing running first, and take the tasks of their
own registry and of those it serves (`Registries`), oldest first; a task whose largest
stored input sits on a worker with room goes there (locality). A worker has
``worker_slots`` slots and ``prefetch`` spare ones for tasks known to be short
(`Durations`). By-value tasks wait in their driver's registry's by-value queue
(`by_value_key`) for workers serving it or accepting by-value code of any registry.

No worker idles while work waits on another: a task only takes a prefetch slot when no idle
worker has a real slot; a task whose worker blocks lends its slot until it resumes; a worker
that runs dry takes work back from a busy one (`_head_take_back`). A lost worker's tasks are
retried elsewhere (at most ``max_retries`` times); tasks of a registry no connected worker
serves wait ``no_worker_grace_ns`` for one, then fail. A short task waiting only on a
worker's results goes ahead to it (`_head_ahead`).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from typing import Final

from ._conventions import SPAN_BLOCKED, SPAN_RESUMED, SPAN_WITHDRAWN, TASK_ID_MASK, retry_limit
from ._durations import Durations
from ._events import Error, Result, Span, Stored, Task, TaskInputs, TaskMany
from ._fairqueue import FairQueue, has_work
from ._head_ahead import Ahead, task_inputs
from ._head_counts import Counts
from ._head_objects import Copies, Objects
from ._head_records import ObjState, Peer, TaskRecord, TaskState
from ._head_registries import BY_VALUE, Registries, by_value_key, home_registry, oldest, unrunnable
from ._head_take_back import TakeBack
from ._head_wire import Wire
from ._lifecycle import Slot, SlotCause, TaskCause
from ._timeline import TimelineLog

__all__ = ["Scheduler"]

_PENDING: Final = ObjState.PENDING
_STORED: Final = ObjState.STORED
_FAILED: Final = ObjState.FAILED
_QUEUED: Final = TaskState.QUEUED
_RUNNING: Final = TaskState.RUNNING
_DROPPED: Final = TaskState.DROPPED
_ON_WORKER: Final = frozenset({TaskState.RUNNING, TaskState.WITHDRAWING, TaskState.DROPPED})
Frame = Task | TaskMany | TaskInputs


class Scheduler:
    """Ready tasks, idle workers, and the tasks each worker runs."""

    def __init__(
        self,
        wire: Wire,
        counts: Counts,
        objects: Objects,
        *,
        worker_slots: int,
        prefetch: int,
        max_retries: int,
        no_worker_grace_ns: int,
        portable_tasks: frozenset[int],
        timeline_cap: int,
        wall_offset_ns: int = 0,
    ) -> None:
        self._wire = wire
        self._counts = counts
        self._objects = objects
        self.worker_slots = worker_slots
        # Extra slots per worker for tasks known to be short (see `_durations`).
        self.prefetch = prefetch
        self.max_retries = max_retries
        self.no_worker_grace_ns = no_worker_grace_ns
        # Task IDs (low 60 bits) that carry their code (by-value ones): they run on workers
        # of their driver's registry, or on those that accept by-value code of any.
        self.portable = portable_tasks
        self.accepting: set[Peer] = set()  # connected, undrained workers of any registry
        self.durations: Durations = Durations()
        self.timeline: TimelineLog = TimelineLog(timeline_cap, wall_offset_ns)
        self.ready: dict[int, FairQueue[TaskRecord]] = {}  # registry -> ready tasks
        self.idle: dict[int, deque[Peer]] = {}  # registry -> workers with a free slot
        self.workers_of: dict[int, set[Peer]] = {}  # registry -> connected, undrained workers
        self.orphaned: dict[int, int] = {}  # registry with no worker -> since when
        self.registries: Registries = Registries()  # which registries' workers serve which drivers
        self._sources: Copies | None = None
        self._kept_for_actor: Callable[[Peer], bool] = _no_actor
        self.ahead: Ahead = Ahead(objects, self.durations, self.may_run, self.send_run)
        self.take_back: TakeBack = TakeBack(wire, counts, self.workers_of, self.ready)

    def bind(self, sources: Copies, kept_for_actor: Callable[[Peer], bool]) -> None:
        """Who hears about draining sources and stale copies (`Holdings`), and who says
        whether a worker whose last task ended is kept for an actor (and starts it)."""
        self._sources = sources
        self._kept_for_actor = kept_for_actor

    def registry_of(self, task_id: int, peer: Peer) -> int:
        """The registry whose workers run ``task_id`` for ``peer``."""
        by_value = task_id & TASK_ID_MASK in self.portable
        return peer.registry | BY_VALUE if by_value else peer.registry  # (`by_value_key`)

    def served(self, key: int) -> bool:
        """Whether a connected worker may run the tasks queued under ``key``."""
        if key >= BY_VALUE:
            if self.accepting:
                return True
            key = home_registry(key)
        if key in self.workers_of:
            return True
        servers = self.registries.servers.get(key)
        return servers is not None and any(w in self.workers_of for w in servers)

    def may_run(self, worker: Peer, key: int) -> bool:
        """Whether ``worker`` may run a task (or host an actor) queued under ``key``."""
        if key >= BY_VALUE:
            return worker.any_registry or self.registries.may_serve(
                worker.registry, home_registry(key)
            )
        return self.registries.may_serve(worker.registry, key)

    def workers_for(self, registry: int) -> set[Peer]:
        """The connected, undrained workers that run tasks of ``registry``'s drivers."""
        found = self.workers_of.get(registry, set())
        for server in self.registries.servers.get(registry, ()):
            found = found | self.workers_of.get(server, set())
        return found

    def learn_names(self, peer: Peer, names: frozenset[int]) -> bool:
        """``peer`` imports the tasks ``names`` (task-names); whether connected workers now
        serve a registry they did not (waiting actors may go to them)."""
        peer.names_sent = True
        pairs = [p for p in self.registries.learn(peer.registry, names) if p[0] in self.workers_of]
        for server, served in pairs:
            self.orphaned.pop(served, None)
            self.orphaned.pop(by_value_key(served), None)
            self.pump(server)
        return bool(pairs)

    def names_gone(self, peer: Peer) -> None:
        """``peer`` is gone (after `forget_worker`): with the last that sent them, its names go."""
        if peer.names_sent:
            self.registries.left(peer.registry)

    # -- workers coming and going ----------------------------------------------------------

    def add_worker(self, worker: Peer) -> None:
        worker.free = self.worker_slots
        worker.spare = self.prefetch
        self.workers_of.setdefault(worker.registry, set()).add(worker)
        for registry in (worker.registry, *self.registries.serves.get(worker.registry, ())):
            self.orphaned.pop(registry, None)
            self.orphaned.pop(by_value_key(registry), None)
        if worker.any_registry:
            self.accepting.add(worker)
            self.orphaned = {k: t for k, t in self.orphaned.items() if k < BY_VALUE}

    def offer(self, worker: Peer) -> None:
        """``worker`` may take work: idle it, give it tasks, or take some back for it."""
        self.make_idle(worker)
        self.pump(worker.registry)
        self.take_back.for_idle(worker)

    def forget_worker(self, worker: Peer) -> None:
        """``worker`` takes no more work (lost or draining)."""
        self.ahead.forget(worker)
        idle = self.idle.get(worker.registry)
        if worker.idle and idle is not None:
            # Out of its registry's idle deque now, not when a pump reaches it: peers
            # saying hello with registries of their own (fuzzed) left one deque each,
            # holding a gone worker, and every portable task's pump walked them all.
            worker.idle = False
            with contextlib.suppress(ValueError):
                idle.remove(worker)
            if not idle:
                del self.idle[worker.registry]
        serving = self.workers_of.get(worker.registry)
        if serving is not None:
            serving.discard(worker)
            if not serving:
                del self.workers_of[worker.registry]
                self.note_orphaned(worker.registry)
                for served in self.registries.serves.get(worker.registry, ()):
                    self.note_orphaned(served)
        if worker in self.accepting:
            self.accepting.discard(worker)
            if not self.accepting:
                for key in [k for k in self.ready if k >= BY_VALUE]:
                    self.note_orphaned(key)

    def note_orphaned(self, registry: int) -> None:
        """If tasks of ``registry`` (or its by-value ones) wait and no worker may run them,
        start their grace."""
        keys = (registry,) if registry >= BY_VALUE else (registry, by_value_key(registry))
        for key in keys:
            if not self.served(key) and has_work(self.ready.get(key)):
                self.orphaned.setdefault(key, self._wire.now)

    def lose_tasks(self, worker: Peer, why: str) -> None:
        """``worker`` is lost: its tasks run again elsewhere (at the front of their queue),
        or fail once they ran out of retries; a dropped one settles."""
        keys = {task.registry for task in worker.running.values()} | {worker.registry}
        objects = self._objects
        counts = self._counts
        name = worker.name
        for task in list(worker.running.values()):
            worker.running.pop(task.oid, None)
            counts.move_slot(task, worker, SlotCause.GIVE_BACK)
            task.worker = None
            if task.state is _DROPPED:
                counts.move_task(task, TaskCause.LOST)
                objects.settle(task)
                continue
            counts.move_task(task, TaskCause.LOST)
            task.retries += 1
            task.answered = None
            if task.retries > retry_limit(task.task_id, self.max_retries):
                why_task = (
                    f"{name} was lost ({why}) while running this task; "
                    f"gave up after {task.retries} attempt{'s' if task.retries > 1 else ''}"
                )
                objects.fail_tasks([(task, why_task)])
                continue
            self._queue_of(task.registry).push(task, front=True)
        # Its tasks are back in the queue (after `forget_worker` looked): with no worker of
        # their registry left they wait the no-worker grace for one, then fail, as tasks
        # queued without one do (they waited for ever, while status said they would fail).
        for key in keys:
            self.note_orphaned(key)

    # -- the pulled timer: tasks no worker can run -----------------------------------------

    def next_deadline(self) -> int | None:
        if not self.orphaned:
            return None
        return min(self.orphaned.values()) + self.no_worker_grace_ns

    def on_timer(self, now: int) -> None:
        """Fail tasks that waited out the grace for a worker of their registry."""
        for registry, since in list(self.orphaned.items()):
            if now < since + self.no_worker_grace_ns:
                continue
            del self.orphaned[registry]
            if self.served(registry):
                continue
            queue = self.ready.get(registry)
            failed, grace = [], self.no_worker_grace_ns
            lacking = self.registries.closest(registry, set(self.workers_of))
            while queue is not None and (task := queue.pop()) is not None:
                failed.append((task, unrunnable(task.task_id, registry, grace, lacking)))
            self.ready.pop(registry, None)  # a registry no worker has: keep no queue for it
            self._objects.fail_tasks(failed)

    # -- answers ---------------------------------------------------------------------------

    def on_span(self, worker: Peer, span: Span) -> None:
        if span.mark:
            self._on_mark(worker, span)
            return
        obj = self._objects.by_id.get(span.object_id)
        if obj is not None and obj.task is not None and obj.task.worker is worker:
            obj.task.span = (span.arrived, span.started, span.ended)
            self.durations.record(obj.task.task_id, span.ended - span.started)
        else:
            self._wire.not_given(worker, span.object_id)

    def on_answer(self, worker: Peer, event: Result | Stored | Error) -> None:
        """A worker's answer for one result of a task it runs."""
        oid = event.object_id
        answer: Result | Stored | None = None
        error: str | None = None
        if isinstance(event, Error):
            error = event.message
        else:
            answer = event
        obj = self._objects.by_id.get(oid)
        task = obj.task if obj is not None else None
        if obj is None or task is None or task.worker is not worker:
            # Stale: a dropped task, a retried one's old worker; or forged. Free what it
            # stored.
            if isinstance(answer, Stored):
                self._free_copy(worker, oid)
            self._wire.not_given(worker, oid)
            return
        if task.results > 1:
            answered = task.answered
            if answered is None:
                answered = task.answered = set()
            elif oid in answered:
                if isinstance(answer, Stored):  # (a duplicate of its own answer)
                    self._free_copy(worker, oid)
                return
            answered.add(oid)
        task.answers_left -= 1
        if obj.state is _PENDING and task.state is not _DROPPED:
            self._objects.set_answer(worker, obj, answer, error)
        elif isinstance(answer, Stored):
            self._free_copy(worker, oid)
        if task.answers_left == 0:
            first = obj if oid == task.oid else self._objects.by_id.get(task.oid)
            self._finish_run(task, first is not None and first.state is _FAILED)

    def _free_copy(self, worker: Peer, oid: int) -> None:
        if self._sources is not None:
            self._sources.free_copy(worker, oid)

    def _finish_run(self, task: TaskRecord, failed: bool) -> None:
        """The worker has answered every result of ``task`` (its first ``failed``): settle
        it, free the slot."""
        worker = task.worker
        assert worker is not None
        worker.running.pop(task.oid, None)
        counts = self._counts
        counts.move_slot(task, worker, SlotCause.GIVE_BACK)
        dropped = task.state is _DROPPED
        counts.move_task(task, TaskCause.ANSWERED)
        task.worker = None
        if not dropped:
            arrived, started, ended = task.span
            self.timeline.add(
                task.owner, task.oid, task.task_id, task.submitted, task.queued,
                task.dispatched, self._wire.now, arrived, started, ended, worker.address,
                task.function, failed,
            )  # fmt: skip
        self._objects.settle(task)
        self._after_slot_freed(worker)

    # -- slots lent, given back, taken back ------------------------------------------------

    def _on_mark(self, worker: Peer, span: Span) -> None:
        """Dista's span marks (`dista_proto._conventions`): blocked, resumed, withdrawn."""
        obj = self._objects.by_id.get(span.object_id)
        task = obj.task if obj is not None else None
        if task is None or task.worker is not worker or task.state not in _ON_WORKER:
            self._wire.not_given(worker, span.object_id)  # stale: settled, retried elsewhere
            return
        if span.mark == SPAN_BLOCKED:
            if task.slot is not Slot.LENT:
                self._counts.move_slot(task, worker, SlotCause.BLOCK)
                self.make_idle(worker)
                self.pump(worker.registry)
        elif span.mark == SPAN_RESUMED:
            if task.slot is Slot.LENT:
                self._counts.move_slot(task, worker, SlotCause.RESUME)
        elif span.mark == SPAN_WITHDRAWN:
            self._withdrawn(worker, task)

    def _withdrawn(self, worker: Peer, task: TaskRecord) -> None:
        """``worker`` dropped ``task`` unstarted: settle it if cancelled, else queue it again."""
        worker.running.pop(task.oid, None)
        counts = self._counts
        counts.move_slot(task, worker, SlotCause.GIVE_BACK)
        task.worker = None
        dropped = task.state is _DROPPED
        counts.move_task(task, TaskCause.WITHDRAWN)
        if dropped:
            self._objects.settle(task)
        else:
            self._queue_of(task.registry).push(task, front=True)
            self._pump_for(task.registry)
        self._after_slot_freed(worker)

    def _after_slot_freed(self, worker: Peer) -> None:
        if worker.draining:
            if self._sources is not None:
                self._sources.recheck(worker)
        elif self._wire.peers.get(worker.link) is worker and (
            worker.actor is None or not self._kept_for_actor(worker)
        ):
            self.offer(worker)
            self.ahead.room_freed(worker)

    # -- queues ----------------------------------------------------------------------------

    def enqueue(self, task: TaskRecord) -> None:
        """``task`` is ready: queue it and dispatch what fits."""
        now = self._wire.now
        self._counts.move_task(task, TaskCause.READY)
        task.queued = now
        key = task.registry
        # (`served`'s first test inline: the hot path)
        if key not in self.workers_of and not self.served(key):
            self.orphaned.setdefault(key, now)
        self._queue_of(key).push(task)
        if key < BY_VALUE:
            self.pump(key)
            if self.registries.servers:
                for server in self.registries.servers.get(key, ()):
                    self.pump(server)
        else:
            self._pump_for(key)

    def _pump_for(self, key: int) -> None:
        """Pump the workers that may run tasks queued under ``key``."""
        registry = home_registry(key)
        self.pump(registry)
        servers = self.registries.servers.get(registry, set())
        for server in servers:
            self.pump(server)
        if key >= BY_VALUE:
            for other in {w.registry for w in self.accepting} - {registry} - servers:
                self.pump(other)

    def _queue_of(self, registry: int) -> FairQueue[TaskRecord]:
        queue = self.ready.get(registry)
        if queue is None:
            queue = self.ready[registry] = FairQueue()
        return queue

    def queued(self, registry: int) -> int:
        queue = self.ready.get(registry)
        return len(queue) if queue is not None else 0

    # -- scheduling ------------------------------------------------------------------------

    def make_idle(self, worker: Peer) -> None:
        if worker.idle and not worker.running:
            # Already waiting with a slot free, now with nothing running: to the front,
            # ahead of workers still busy with something (O(idle workers), only then).
            waiting = self.idle[worker.registry]
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
        idle = self.idle.get(worker.registry)
        if idle is None:
            idle = self.idle[worker.registry] = deque()
        if worker.running:
            idle.append(worker)
        else:
            idle.appendleft(worker)  # a worker with nothing to do goes first

    def pump(self, registry: int) -> None:
        """Dispatch ready tasks of ``registry``, of the registries it serves, and by-value
        ones its workers may run, to its idle workers."""
        queue = self.ready.get(registry)
        own = self.ready.get(registry | BY_VALUE)  # its by-value queue (`by_value_key`)
        idle = self.idle.get(registry)
        if not idle:
            return
        ready = self.ready
        mine = [queue, own]
        for served in self.registries.serves.get(registry, ()):
            mine += (ready.get(served), ready.get(served | BY_VALUE))
        others = [q for k, q in ready.items() if k >= BY_VALUE] if self.accepting else []
        if not (any(has_work(q) for q in mine) or any(has_work(q) for q in others)):
            return
        peers = self._wire.peers
        short_ids = self.durations
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
            if own is None and len(mine) == 2 and not (others and worker.any_registry):
                task, source = (queue.peek() if queue is not None else None), queue
            else:
                task, source = oldest([*mine, *others] if worker.any_registry else mine)
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
                    if target is None and worker.fits_prefetch(cost):
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
        peers = self._wire.peers
        for worker in idle:
            if (
                worker.free > 0
                and not worker.draining
                and worker.actor is None
                and peers.get(worker.link) is worker
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
                    holder.fits(cost)
                    and not holder.draining
                    and holder.actor is None
                    and self.may_run(holder, task.registry)
                ):
                    best, size = holder, obj.size
        return best

    def _dispatch(self, task: TaskRecord, worker: Peer, cost: int | None) -> None:
        event = task.event
        frame: Frame
        if event is None:
            if any(obj.state is _PENDING for obj in task.inputs):
                # An input went pending again since it was queued (its worker was lost and
                # may come back): the task waits for it (the ready queue dropped it).
                self._counts.move_task(task, TaskCause.WAIT)
                for obj in task.inputs:
                    if obj.state is _PENDING:
                        self._objects.wait_for(task, obj)
                return
            built = task_inputs(task)
            if isinstance(built, str):
                self._objects.fail_tasks([(task, built)])
                return
            frame = built
        else:
            frame = event
        self.send_run(task, worker, cost, frame, TaskCause.DISPATCH)
        self.ahead.sent(task, worker)

    def send_run(
        self, task: TaskRecord, worker: Peer, cost: int | None, frame: Frame, cause: TaskCause
    ) -> None:
        """Send ``task`` to ``worker`` as ``frame``: its slot, its state, its inputs'
        grants and sources."""
        before = task.sources
        counts = self._counts
        if isinstance(frame, TaskInputs):
            self._wire.grant_inputs(task.inputs, worker)  # before it fetches them
        # A short task takes a prefetch slot while one fits, keeping slots for the rest.
        if worker.fits_prefetch(cost):
            assert cost is not None
            task.spare_ns = cost
            counts.move_slot(task, worker, SlotCause.TAKE_SPARE)
        else:
            counts.move_slot(task, worker, SlotCause.TAKE)
        counts.move_task(task, cause)
        task.worker = worker
        task.dispatched = self._wire.now
        if cause is TaskCause.AHEAD:
            task.queued = task.dispatched  # (it never waited in a queue)
        task.answers_left = task.results
        worker.running[task.oid] = task
        self._objects.store_mark(task.oid, worker)
        self._wire.links.send(worker.link, frame)
        if task.event is None:
            # Other workers its stored inputs are on: they serve its fetches, so a
            # draining one waits for it before it leaves.
            task.sources = tuple(
                obj.holder
                for obj in task.inputs
                if obj.state is _STORED and obj.holder is not None and obj.holder is not worker
            )
        if before and self._sources is not None:
            # Sent before (and withdrawn, or its worker lost): not read from there now.
            for source in before:
                if source.draining and source not in task.sources:
                    self._sources.recheck(source)


def _no_actor(worker: Peer) -> bool:
    return False  # pragma: no cover
