"""The head: a sans-IO scheduler and reference counter.

Theory of operation
-------------------
The binding reports links (`connection_made`, `receive_data`, `connection_lost`), always
with the current time in nanoseconds, and carries out `decisions()` after each call. The
head numbers drivers, queues their tasks, dispatches each ready task to a worker slot whose
registry hash matches the driver's, routes every answer to the driver that owns the object,
and counts references:

    "The head counts references to every object: its driver's, until a release, and one
    per submitted task that takes it as input, until that task settles. At zero it forgets
    the object, and sends free to the worker holding it."

An object is also kept while its own task is unsettled, so a late answer still finds it.
A task is WAITING for inputs, QUEUED for a slot, RUNNING on a worker, then DONE. A failed
input fails every task that depends on it, transitively, naming the input; the cascade is a
loop, not recursion, so a chain of any length fails cleanly. A worker that is lost has its
running tasks retried elsewhere (at most ``max_retries`` times) and the objects only it held
fail with an error naming it (if it may be alive, they wait for it: `_head_recovery`). Ready tasks wait in one `FairQueue` per registry (round-robin
between drivers); idle worker slots wait in one deque per registry; a task whose largest
stored input sits on an idle worker goes there. A cancelled task a worker holds is withdrawn
from it (or interrupted there); slots lent by blocked tasks, tasks taken back for idle
workers and tasks no worker can run are `Scheduling`'s (`_head_scheduling`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Final

from . import frame as F
from ._conventions import (
    CANCEL_FORCE,
    ERROR_COVERED,
    ID_BITS,
    ID_MASK,
    NUMBER_SPACE,
    TASK_ID_MASK,
    retry_limit,
)
from ._decisions import Decision, Exit
from ._durations import Durations
from ._events import (
    ActorCall,
    ActorCreate,
    ActorKill,
    Address,
    Adopted,
    Cancel,
    Checkpoint,
    Checkpointed,
    Claim,
    Drain,
    Error,
    Event,
    Free,
    HeadStats,
    Hello,
    Holding,
    Located,
    Release,
    Result,
    Resumed,
    Span,
    Stats,
    Status,
    Stop,
    Stored,
    Task,
    TaskAfter,
    TaskMany,
    Timeline,
    TimelineRecord,
    Welcome,
)
from ._fairqueue import FairQueue
from ._head_actors import DEFAULT_ACTOR_KEEP_BYTES
from ._head_records import (
    ActorRecord,
    ActorState,
    ObjState,
    Peer,
    TaskRecord,
    TaskState,
    TrackedObject,
)
from ._head_recovery import LIVENESS_NS, RECOVERY_GRACE_NS
from ._head_scheduling import ANYWHERE
from ._head_security import Guard, HelloWatch, hello_refusal, may_stop
from ._head_status import status_text
from ._links import Links
from ._roles import Role
from ._timeline import TimelineLog
from .frame import Bytes

__all__ = ["Head"]

#: The default cap on timeline records the head keeps; the oldest are dropped first.
TIMELINE_CAP: Final = 100_000
#: How long tasks wait for a worker with their driver's registry before they fail.
NO_WORKER_GRACE_NS: Final = 10_000_000_000
#: Tasks each worker gets at once: more than one hides the round trip between a result and
#: the next task.
WORKER_SLOTS: Final = 2
#: Extra tasks a worker may get when they are known to be short (see `_durations`).
PREFETCH: Final = 32
#: Times a task is retried after losing its worker (a task ID may carry its own limit).
MAX_RETRIES: Final = 3
#: A link that has not said hello this long after connecting is closed.
HELLO_DEADLINE_NS: Final = 10_000_000_000
#: A link that has not said hello and read nothing this long is closed.
HELLO_IDLE_NS: Final = 5_000_000_000
#: Bytes of inline results the head keeps for one driver; past it, its results are stored on
#: workers (DISTA_HEAD_INLINE_CAP).
INLINE_CAP_BYTES: Final = 256 << 20

_PENDING: Final = ObjState.PENDING
_INLINE: Final = ObjState.INLINE
_STORED: Final = ObjState.STORED
_FAILED: Final = ObjState.FAILED
_WAITING: Final = TaskState.WAITING
_QUEUED: Final = TaskState.QUEUED
_RUNNING: Final = TaskState.RUNNING
_DONE: Final = TaskState.DONE


class Head(Guard):
    """The head's whole state; see the module docstring."""

    def __init__(
        self,
        *,
        epoch: int,
        first_number: int,
        max_retries: int = MAX_RETRIES,
        worker_slots: int = WORKER_SLOTS,
        prefetch: int = PREFETCH,
        timeline_cap: int = TIMELINE_CAP,
        exit_without_drivers: bool = False,
        allocate: Callable[[int], bytearray | memoryview] | None = None,
        portable_tasks: Iterable[int] = (),
        no_worker_grace_ns: int = NO_WORKER_GRACE_NS,
        actor_keep_bytes: int = DEFAULT_ACTOR_KEEP_BYTES,
        liveness_ns: int = LIVENESS_NS,
        recovery_grace_ns: int = RECOVERY_GRACE_NS,
        hello_deadline_ns: int = HELLO_DEADLINE_NS,
        hello_idle_ns: int = HELLO_IDLE_NS,
        inline_cap_bytes: int = INLINE_CAP_BYTES,
    ) -> None:
        if not 1 <= first_number < NUMBER_SPACE:
            raise ValueError(f"first_number must be in [1, 2**24), not {first_number}")
        self.epoch: Final = epoch
        self.max_retries = max_retries
        self.worker_slots = worker_slots
        # Extra slots per worker for tasks known to be short (see `_durations`).
        self.prefetch = prefetch
        self._durations = Durations()
        # A local head lives while a driver is connected (clients don't count), then stops
        # itself and its workers.
        self.exit_without_drivers = exit_without_drivers
        # Where a frame of 1 MiB or more (a large argument) lands when read into place.
        self._allocate = allocate
        # Task IDs (low 60 bits) that any worker runs, whatever its registry: by-value ones.
        self._portable = frozenset(t & TASK_ID_MASK for t in portable_tasks)
        self.no_worker_grace_ns = no_worker_grace_ns
        self.actor_keep_bytes = actor_keep_bytes
        self._actors: dict[int, ActorRecord] = {}
        self._waiting_actors: deque[ActorRecord] = deque()
        self._dead_actors: deque[int] = deque()
        self.actors_alive = 0
        self._orphaned: dict[int, int] = {}  # registry with no worker -> since when
        self._workers_of: dict[int, set[Peer]] = {}
        self._next_number = first_number
        self._links = Links()
        self._peers: dict[int, Peer] = {}
        self._numbers: dict[int, Peer] = {}  # driver number -> its peer
        self._objects: dict[int, TrackedObject] = {}
        self._ready: dict[int, FairQueue[TaskRecord]] = {}  # registry -> ready tasks
        self._idle: dict[int, deque[Peer]] = {}  # registry -> workers with a free slot
        self._timeline = TimelineLog(timeline_cap)
        self.held_bytes = 0
        self.pending = 0  # tasks WAITING or QUEUED
        self.running = 0
        self.stopping = False
        self._now = 0
        # A worker silent this long is lost (0: never); see `_head_recovery`.
        self.liveness_ns = liveness_ns
        self.recovery_grace_ns = recovery_grace_ns
        self._claims: dict[int, int] = {}
        self._away: dict[int, tuple[Peer, int]] = {}
        self._parked: dict[int, tuple[int, list[tuple[int, ActorCall, bool]]]] = {}
        self._parked_calls: set[int] = set()
        self._unclaimed: dict[int, tuple[Peer, int]] = {}
        self._limbo: dict[int, tuple[str, int]] = {}
        self._stale: dict[int, Peer] = {}
        self._adopting: dict[int, Peer] = {}
        self._adopt_tries: dict[int, int] = {}
        self._tick_at = 0
        self._hello_watch = HelloWatch(hello_deadline_ns, hello_idle_ns)
        if inline_cap_bytes < 0:
            raise ValueError(f"inline_cap_bytes must be >= 0 (0: off), not {inline_cap_bytes}")
        self.inline_cap_bytes = inline_cap_bytes
        self._inline_of: dict[int, int] = {}  # driver number -> bytes of its inline results

    # -- the binding's side -------------------------------------------------------------------

    def connection_made(self, now: int) -> int:
        """A peer connected: the link number to use for it from now on."""
        link = self._links.open(Role.HEAD)
        if self._allocate is not None:
            conn = self._links.conn(link)
            assert conn is not None
            conn.land(None, self._allocate)
        self._peers[link] = Peer(link)
        self._hello_watch.opened(link, now)
        return link

    def receive_data(self, link: int, data: Bytes, now: int) -> None:
        """Bytes read from ``link``."""
        self._now = now
        events, error = self._links.receive(link, data)
        self._received(link, events, error)

    def _received(self, link: int, events: list[Event], error: str | None) -> None:
        peer = self._peers.get(link)
        if peer is None:
            return
        peer.heard = self._now
        if peer.role is None:
            self._hello_watch.heard(link, self._now)
        peers = self._peers
        for event in events:
            if peers.get(link) is not peer:
                return  # refused mid-batch: the rest of its frames are moot
            self._on_event(peer, event)
        if error is not None:
            self._lose(peer, f"protocol error: {error}")
            self._links.close(link, f"protocol error: {error}")

    def get_buffer(self, link: int, sizehint: int = -1) -> memoryview:
        """Where to read ``link``'s next bytes (`Connection.get_buffer`)."""
        return self._links.get_buffer(link, sizehint)

    def buffer_updated(self, link: int, nbytes: int, now: int) -> None:
        """`receive_data` for ``nbytes`` read into the view `get_buffer` gave."""
        self._now = now
        events, error = self._links.buffer_updated(link, nbytes)
        self._received(link, events, error)

    def connection_lost(self, link: int, now: int, why: str | None = None) -> None:
        """The binding's connection for ``link`` closed (or failed).

        ``why`` is what the binding knows beyond the closed connection (a supervisor's
        "worker pid 4242 died: SIGSEGV"); it goes into the errors of what the peer took along.
        Without it the peer may well be alive (a link cut or reset): a worker's stored
        objects wait for it to rejoin with holding, as a silent worker's do
        (`_head_recovery`).
        """
        self._now = now
        peer = self._peers.get(link)
        self._links.forget(link)
        self._hello_watch.done(link)
        if peer is None:
            return
        if why is None:
            if peer.role == Role.WORKER:
                self._to_limbo(peer, f"{peer.name} disconnected (connection lost)")
            elif self._driver_away(peer):
                return  # it may resume on a new connection (`_head_recovery`)
        self._lose(peer, why or "connection lost")

    def decisions(self) -> list[Decision]:
        """What to do now: writes, closes, exit; in order."""
        return self._links.decisions()

    def _epoch(self) -> int:
        return self.epoch

    def _stopping(self) -> bool:
        return self.stopping

    def _exit_without_drivers(self) -> bool:
        return self.exit_without_drivers

    def next_deadline(self) -> int | None:
        """When `on_timer` has work to do (nanoseconds, as ``now``), or None."""
        times = [
            t
            for t in (
                super().next_deadline(),
                self._recovery_deadline(),
                self._hello_watch.next_deadline(),
            )
            if t is not None
        ]
        return min(times) if times else None

    def on_timer(self, now: int) -> None:
        """Time passed: tasks and actors that waited out their grace fail, silent workers
        are lost, claims and holdings that waited out theirs end (`_head_recovery`)."""
        super().on_timer(now)
        self._on_recovery_timer(now)
        self._hello_watch.due(now, self._no_hello)

    @property
    def drivers(self) -> int:
        """Connected drivers (clients excluded): a local head lives while there are any."""
        return sum(1 for p in self._peers.values() if p.role == Role.DRIVER)

    def stats(self) -> HeadStats:
        workers = sum(len(w) for w in self._workers_of.values())
        return HeadStats(len(self._objects), self.held_bytes, self.pending, self.running, workers)

    def status(self) -> str:
        return status_text(self, self._peers.values(), self._ready)

    # -- dispatch of incoming events -----------------------------------------------------------

    def _on_event(self, peer: Peer, event: Event) -> None:
        role = peer.role
        if role is None:
            assert isinstance(event, Hello)  # the connection lets nothing else through first
            self._on_hello(peer, event)
        elif role == Role.WORKER:
            self._on_worker_event(peer, event)
        elif role == Role.OBSERVER:
            self._on_observer_event(peer, event)
        else:
            self._on_driver_event(peer, event)

    def _on_hello(self, peer: Peer, hello: Hello) -> None:
        role = Role(hello.role)
        self._hello_watch.done(peer.link)
        refusal = hello_refusal(peer.roles, role)
        if refusal is not None:
            self._refuse(peer, refusal)
            return
        peer.role = role
        peer.registry = hello.registry_hash
        if role == Role.WORKER:
            assert hello.address is not None
            peer.address = hello.address
            self._replace_worker(peer)
            peer.heard = self._now
            peer.free = self.worker_slots
            peer.spare = self.prefetch
            self._workers_of.setdefault(peer.registry, set()).add(peer)
            self._orphaned.pop(peer.registry, None)
            self._place_waiting()  # actors that wait come first
            self._make_idle(peer)
            self._pump(peer.registry)
            self._steal_for(peer)
            for other in list(self._peers.values()):
                if other.draining and other.holds and other is not peer:
                    self._maybe_release_drained(other)  # it may adopt what they hold
        elif role in (Role.DRIVER, Role.CLIENT):
            number = self._assign_number(peer, hello)
            if number == 0:
                return
            peer.number = number
            if hello.resume is None:
                peer.epoch = self.epoch
            self._numbers[number] = peer
            self._links.send(peer.link, Welcome(number, self.epoch))

    def _assign_number(self, peer: Peer, hello: Hello) -> int:
        if hello.resume is not None:
            # A driver of an earlier head keeps its number, so its object IDs stay valid.
            return self._resume_number(peer, hello)
        for _ in range(NUMBER_SPACE):
            number = self._next_number
            self._next_number = number + 1 if number + 1 < NUMBER_SPACE else 1
            if number not in self._numbers:
                return number
        self._refuse(peer, "every driver number is in use")  # pragma: no cover
        return 0

    def _refuse(self, peer: Peer, why: str) -> None:
        self._links.send(peer.link, Error(0, why))
        self._links.close(peer.link, why)
        self._peers.pop(peer.link, None)

    def _on_driver_event(self, peer: Peer, event: Event) -> None:
        if isinstance(event, Task):
            self._submit(peer, event.object_id, event.task_id, 1, event)
        elif isinstance(event, Release):
            self._release(peer, event.object_id)
        elif isinstance(event, TaskAfter):
            self._submit_after(peer, event)
        elif isinstance(event, TaskMany):
            self._submit(peer, event.object_id, event.task_id, event.results, event)
        elif isinstance(event, Cancel):
            self._cancel(peer, event.object_id, event.mark == CANCEL_FORCE)
        elif isinstance(event, ActorCall):
            self._on_actor_call(peer, event)
        elif isinstance(event, Stats):
            self._links.send(peer.link, Stats(self.stats()))
        elif isinstance(event, Timeline):
            self._links.send(peer.link, Timeline(self._take_timeline(peer.number)))
        elif isinstance(event, ActorCreate):
            self._on_actor_create(peer, event)
        elif isinstance(event, ActorKill):
            self._on_actor_kill(peer, event)
        elif isinstance(event, Checkpoint):
            self._on_checkpoint_ask(peer, event)
        elif isinstance(event, (Result, Error)):
            self._on_driver_answer(peer, event)
        elif isinstance(event, Claim):
            self._on_claim(peer, event)
        elif isinstance(event, Resumed):
            self._on_resumed(peer)
        else:
            oid = getattr(event, "object_id", 0)
            name = F.kind_name(event.kind)
            self._links.send(peer.link, Error(oid, f"{name} is not supported by this head"))

    def _on_worker_event(self, peer: Peer, event: Event) -> None:
        if isinstance(event, Holding):
            self._on_holding(peer, event)
            return
        if isinstance(event, Adopted):
            self._on_adopted(peer, event)
            return
        if isinstance(event, Drain):
            self._on_drain(peer)
            return
        actor = peer.actor
        if actor is not None and actor.state is not ActorState.WAITING:
            # A worker hosting an actor runs nothing else: every answer is the actor's.
            if actor.restoring and getattr(event, "object_id", 0) == actor.actor_id:
                if isinstance(event, (Result, Error)):
                    self._on_restored(peer, actor, event)
            elif isinstance(event, Error) and event.mark == ERROR_COVERED:
                self._on_covered_call(peer, event)
            elif isinstance(event, (Result, Stored)):
                self._on_actor_answer(peer, event.object_id, event, None)
            elif isinstance(event, Error):
                self._on_actor_answer(peer, event.object_id, None, event.message)
            elif isinstance(event, Checkpointed):
                self._on_checkpointed(peer, event)
            return
        if isinstance(event, Result):
            self._on_answer(peer, event.object_id, event, None)
        elif isinstance(event, Span):
            if event.mark:
                self._on_mark(peer, event)
            else:
                self._on_span(peer, event)
        elif isinstance(event, Stored):
            self._on_answer(peer, event.object_id, event, None)
        elif isinstance(event, Error):
            self._on_answer(peer, event.object_id, None, event.message)

    def _on_observer_event(self, peer: Peer, event: Event) -> None:
        if isinstance(event, Status):
            self._links.send(peer.link, Status(self.status()))
        elif isinstance(event, Timeline):
            self._links.send(peer.link, Timeline(self._timeline.all()))
        elif isinstance(event, Stop):
            refusal = may_stop(peer.roles)
            if refusal is not None:
                self._refuse(peer, refusal)
            else:
                self._stop("stopped by an observer")

    # -- submission ----------------------------------------------------------------------------

    def _check_new_ids(self, peer: Peer, oid: int, results: int) -> bool:
        """Whether ``results`` IDs from ``oid`` are this driver's and unused; else say why."""
        if oid >> ID_BITS != peer.number or not oid & ID_MASK:
            why = f"object ID {oid:#x} is not numbered for driver {peer.number}"
        elif (oid & ID_MASK) + results - 1 > ID_MASK:
            why = f"object IDs {oid:#x} + {results} run past this driver's range"
        elif oid in self._actors:
            why = f"object ID {oid:#x} is already in use (an actor's)"
        elif (results == 1 and oid not in self._objects) or not any(
            i in self._objects for i in range(oid, oid + results)
        ):
            return True
        else:
            why = f"object ID {oid:#x} is already in use"
        self._links.send(peer.link, Error(oid, why))
        return False

    def _submit(
        self, peer: Peer, oid: int, task_id: int, results: int, event: Task | TaskMany | None
    ) -> TaskRecord | None:
        if self._too_many(peer, oid, results):
            return None
        # A resuming driver's frames may be ones this head has: checked only for them.
        if (peer.resuming and self._resent(peer, oid, results)) or not self._check_new_ids(
            peer, oid, results
        ):
            return None
        registry = ANYWHERE if task_id & TASK_ID_MASK in self._portable else peer.registry
        task = TaskRecord(oid, task_id, peer.link, registry, results, event, self._now)
        objects = self._objects
        for i in range(oid, oid + results):
            objects[i] = TrackedObject(i, peer.link, task)
        self.pending += 1
        if event is not None:
            self._enqueue(task)
        return task

    def _submit_after(self, peer: Peer, event: TaskAfter) -> None:
        results = event.results or 1
        if self._foreign_input(peer, event, results):
            return
        task = self._submit(peer, event.object_id, event.task_id, results, None)
        if task is None:
            return
        task.many = event.results is not None
        task.gather = event.gather
        task.value = event.value
        missing = None
        inputs = []
        for input_id in event.inputs:
            obj = self._objects.get(input_id)
            if obj is None:
                missing = input_id
                continue
            obj.refs += 1
            inputs.append(obj)
        task.inputs = tuple(inputs)
        if missing is not None:
            why = f"input {missing:#x} is unknown to the head (released, or never submitted)"
            self._fail_tasks([(task, why)])
            return
        failed = None
        for obj in inputs:
            if obj.state is _PENDING:
                task.waiting += 1
                if obj.waiters is None:
                    obj.waiters = [task]
                else:
                    obj.waiters.append(task)
            elif obj.state is _FAILED and failed is None:
                failed = obj
        if failed is not None:
            self._fail_tasks([(task, f"input {failed.oid:#x} failed: {failed.error}")])
        elif task.waiting == 0:
            self._enqueue(task)

    # -- answers from workers -----------------------------------------------------------------

    def _on_span(self, worker: Peer, span: Span) -> None:
        obj = self._objects.get(span.object_id)
        if obj is not None and obj.task is not None and obj.task.worker is worker:
            obj.task.span = (span.arrived, span.started, span.ended)
            self._durations.record(obj.task.task_id, span.ended - span.started)
        else:
            self._not_given(worker, span.object_id)

    def _on_answer(
        self, worker: Peer, oid: int, answer: Result | Stored | None, error: str | None
    ) -> None:
        obj = self._objects.get(oid)
        task = obj.task if obj is not None else None
        if obj is None or task is None or task.worker is not worker or obj.answered:
            # Stale: a dropped task, a retried one's old worker; or forged. Free what it
            # stored.
            if isinstance(answer, Stored):
                self._free_copy(worker, oid)
            if obj is None or task is None or task.worker is not worker:
                self._not_given(worker, oid)  # (not a duplicate of its own answer)
            return
        obj.answered = True
        task.answers_left -= 1
        if obj.state is _PENDING and not task.dropped:
            self._set_answer(worker, obj, answer, error)
        elif isinstance(answer, Stored):
            self._free_copy(worker, oid)
        if task.answers_left == 0:
            self._finish_run(task)

    def _set_answer(
        self, worker: Peer, obj: TrackedObject, answer: Result | Stored | None, error: str | None
    ) -> None:
        """``worker`` answered pending ``obj``: keep the value or where it lies, tell its
        driver, start the tasks waiting for it; or fail it and them."""
        if error is not None:
            self._fail_object(obj, error)
            return
        if isinstance(answer, Result):
            over = self._over_inline_cap(obj)
            if over is not None:
                self._fail_object(obj, over)
                return
            obj.state = _INLINE
            obj.value = answer.value
            obj.size = len(answer.value)
            self._count_inline(obj)
            self.held_bytes += obj.size
            if obj.held:
                self._links.send(obj.owner, answer)
        else:
            assert answer is not None
            obj.state = _STORED
            obj.size = answer.size
            self.held_bytes += obj.size
            obj.holder = worker
            worker.holds.add(obj.oid)
            if obj.held:
                self._grant(worker, obj.oid, obj.owner)
                self._links.send(obj.owner, Located(obj.oid, worker.address))
        self._wake(obj)

    def _finish_run(self, task: TaskRecord) -> None:
        """The worker has answered every result of ``task``: settle it, free the slot."""
        worker = task.worker
        assert worker is not None
        worker.running.pop(task.oid, None)
        self._give_slot_back(worker, task)
        self.running -= 1
        task.worker = None
        task.withdrawing = False
        if task.sources:
            self._sources_done(task)
        if not task.dropped:
            arrived, started, ended = task.span
            stamps = (task.oid, task.task_id, task.submitted, task.queued, task.dispatched)
            self._timeline.add(
                task.owner, (*stamps, self._now, arrived, started, ended), worker.address
            )
        self._settle(task)
        self._after_slot_freed(worker)

    def _wake(self, obj: TrackedObject) -> None:
        waiters = obj.waiters
        if waiters is None:
            return
        obj.waiters = None
        for task in waiters:
            if task.state is _WAITING:
                task.waiting -= 1
                if task.waiting == 0:
                    self._enqueue(task)

    # -- settling, failing, forgetting ---------------------------------------------------------

    def _settle(self, task: TaskRecord) -> None:
        """``task`` will never answer again: release its inputs and its hold on its results."""
        task.state = _DONE
        if task.sources:
            self._sources_done(task)
        objects = self._objects
        for oid in range(task.oid, task.oid + task.results):
            obj = objects.get(oid)
            if self._stale:
                self._free_stale(oid, obj)
            if obj is not None and obj.task is task:
                obj.task = None
                if obj.state is _PENDING:  # a retried task-many never re-answered this one
                    obj.state = _FAILED
                    obj.error = "its task ended without answering it"
                if obj.refs == 0:
                    self._forget(obj)
        for obj in task.inputs:
            self._unref(obj)

    def _unref(self, obj: TrackedObject) -> None:
        obj.refs -= 1
        if obj.refs == 0 and obj.task is None:
            self._forget(obj)

    def _forget(self, obj: TrackedObject) -> None:
        del self._objects[obj.oid]
        if self._stale:
            self._free_stale(obj.oid, None)  # a stale copy waiting for a run that never came
        if obj.state is _INLINE:
            self.held_bytes -= obj.size
            self._uncount_inline(obj)
            obj.value = b""
        elif obj.state is _STORED:
            self.held_bytes -= obj.size
            holder = obj.holder
            if holder is not None:
                holder.holds.discard(obj.oid)
                self._links.send(holder.link, Free(obj.oid))
                if holder.draining and not holder.holds:
                    self._maybe_release_drained(holder)  # its last object went: it may go

    def _fail_object(self, obj: TrackedObject, why: str) -> None:
        """Fail pending ``obj`` and, transitively, every task waiting on it."""
        stack: list[tuple[TaskRecord, str]] = []
        self._fail_results([obj], why, stack)
        self._fail_tasks(stack)

    def _fail_results(
        self, objs: list[TrackedObject], why: str, stack: list[tuple[TaskRecord, str]]
    ) -> None:
        for obj in objs:
            if obj.state is not _PENDING:
                continue
            obj.state = _FAILED
            obj.error = why
            if obj.held:
                self._links.send(obj.owner, Error(obj.oid, why))
            waiters, obj.waiters = obj.waiters, None
            if waiters:
                because = f"input {obj.oid:#x} failed: {why}"
                stack.extend((t, because) for t in waiters if t.state is _WAITING)

    def _fail_tasks(self, stack: list[tuple[TaskRecord, str]]) -> None:
        """Fail tasks that have not run (or whose run is dropped), cascading without recursion."""
        objects = self._objects
        while stack:
            task, why = stack.pop()
            if task.state is _DONE:
                continue
            results = [
                objects[i] for i in range(task.oid, task.oid + task.results) if i in objects
            ]
            self._fail_results(results, why, stack)
            if task.state is _RUNNING:
                if not task.dropped:
                    task.dropped = True  # its answers are dropped
                    # Its worker drops it if it has not started, else interrupts it.
                    if task.worker is not None:
                        self._links.send(task.worker.link, Free(task.oid))
                continue
            self.pending -= 1
            self._settle(task)

    def _release(self, peer: Peer, oid: int) -> None:
        if self._foreign(peer, oid):
            return
        obj = self._objects.get(oid)
        if obj is None or obj.owner != peer.link or not obj.held:
            if not peer.resuming:  # (a resume releases what this head may have forgotten)
                why = f"release of {oid:#x}, which you don't hold"
                self._links.send(peer.link, Error(oid, why))
            return
        obj.held = False
        self._unref(obj)

    def _cancel(self, peer: Peer, oid: int, force: bool) -> None:
        if self._foreign(peer, oid):
            return
        obj = self._objects.get(oid)
        if obj is None or obj.owner != peer.link:
            return  # already settled and released: nothing left to cancel
        task = obj.task
        if task is None or task.state is _DONE:
            return
        worker = task.worker if task.state is _RUNNING else None
        self._fail_tasks([(task, "cancelled")])
        if force and worker is not None and self._peers.get(worker.link) is worker:
            # The task may not answer an interrupt (stuck in C code): end its worker.
            why = f"stopped to force-cancel task {task.oid:#x}"
            self._links.send(worker.link, Stop())
            self._links.close(worker.link, why)
            self._lose(worker, why)

    # -- losing peers --------------------------------------------------------------------------

    def _lose(self, peer: Peer, why: str) -> None:
        if self._peers.pop(peer.link, None) is None:
            return
        if peer.role == Role.WORKER:
            self._lose_worker(peer, why)
        elif peer.role in (Role.DRIVER, Role.CLIENT):
            self._lose_driver(peer)
            if self.exit_without_drivers and peer.role == Role.DRIVER and not self.drivers:
                self._stop("the last driver left")

    def _lose_worker(self, worker: Peer, why: str) -> None:
        self._forget_worker(worker)
        self._lose_actor_worker(worker, why)
        name = worker.name
        for task in list(worker.running.values()):
            worker.running.pop(task.oid, None)
            self.running -= 1
            task.worker = None
            task.blocked = task.withdrawing = False
            if task.dropped:
                self.pending += 1  # _settle via _fail_tasks expects a not-yet-run task
                task.state = _QUEUED
                self._fail_tasks([(task, "cancelled")])
                continue
            task.retries += 1
            if task.retries > retry_limit(task.task_id, self.max_retries):
                self.pending += 1
                task.state = _QUEUED
                why_task = (
                    f"{name} was lost ({why}) while running this task; "
                    f"gave up after {task.retries} attempt{'s' if task.retries > 1 else ''}"
                )
                self._fail_tasks([(task, why_task)])
                continue
            for oid in range(task.oid, task.oid + task.results):
                obj = self._objects.get(oid)
                if obj is not None:
                    obj.answered = False
            self.pending += 1
            task.state = _QUEUED
            self._queue_of(task.registry).push(task, front=True)
        # Its tasks are back in the queue (after `_forget_worker` looked): with no worker of
        # their registry left they wait the no-worker grace for one, then fail, as tasks
        # queued without one do (they waited for ever, while status said they would fail).
        self._note_orphaned(worker.registry)
        stack: list[tuple[TaskRecord, str]] = []
        lost = [self._objects[oid] for oid in worker.holds if oid in self._objects]
        for obj in lost:
            obj.holder = None
            self.held_bytes -= obj.size
            obj.state = _PENDING  # so that _fail_results takes it
            self._fail_results([obj], f"object lost: {name} disconnected ({why})", stack)
        worker.holds.clear()
        self._fail_tasks(stack)
        self._pump(worker.registry)
        self._adopter_lost(worker)

    def _lose_driver(self, driver: Peer) -> None:
        self._numbers.pop(driver.number, None)
        self._end_actors_of(driver)
        mine = [obj for obj in self._objects.values() if obj.owner == driver.link]
        stack = [
            (obj.task, "its driver disconnected")
            for obj in mine
            if obj.task is not None and obj.task.oid == obj.oid
        ]
        # Its reference goes once: objects it already released gave theirs up then.
        held = [obj for obj in mine if obj.held]
        for obj in held:
            obj.held = False  # no Error frames to a driver that is gone
        self._fail_tasks(stack)
        for obj in held:
            if obj.oid in self._objects:
                self._unref(obj)

    def _stop(self, why: str) -> None:
        self.stopping = True
        for peer in list(self._peers.values()):
            if peer.role == Role.WORKER:
                self._links.send(peer.link, Stop())
                self._links.close(peer.link, why)
            elif peer.role in (Role.DRIVER, Role.CLIENT):
                self._links.send(peer.link, Error(0, f"the head is stopping: {why}"))
                self._links.close(peer.link, why)
        self._links.queue(Exit(why))

    def _take_timeline(self, number: int) -> tuple[TimelineRecord, ...]:
        peer = self._numbers.get(number)
        return self._timeline.take(peer.link) if peer is not None else ()

    def stop(self, why: str, now: int) -> None:
        """Stop as an observer's stop would: workers told to stop, drivers told why, Exit."""
        self._now = now
        if not self.stopping:
            self._stop(why)

    def actors(self) -> list[ActorRecord]:
        """The actors the head knows, live and dead (for status and tests)."""
        return list(self._actors.values())

    def tracked(self, oid: int) -> bool:
        """Whether the head still counts references for ``oid`` (for tests and status)."""
        return oid in self._objects

    def worker_address(self, link: int) -> Address | None:
        peer = self._peers.get(link)
        return peer.address if peer is not None and peer.role == Role.WORKER else None
