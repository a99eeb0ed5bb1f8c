"""The head's objects and their references: submission, answers, settling, forgetting, the
failure cascade, and each driver's cap on inline results.

Theory of operation
-------------------
The page: "The head counts references to every object: its driver's, until a release, and
one per submitted task that takes it as input, until that task settles. At zero it forgets
the object, and sends free to the worker holding it."

An object is also kept while its own task is unsettled, so a late answer still finds it. A
failed input fails every task that depends on it, transitively, naming the input; the
cascade is a loop, not recursion, so a chain of any length fails cleanly. Tasks whose
inputs are all there go to the scheduler (``ready``); where stored copies on workers are
concerned (a stale copy to free once a task settles, a draining holder whose last object
went) `Copies` is told.

Inline cap: the bytes of inline results the head keeps per driver are bounded
(``inline_cap_bytes``); at the cap its tasks are sent with a mark telling the worker to
store their results (`FREE_STORE`), and an inline answer past it fails.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Final, Protocol

from ._conventions import FREE_STORE, FREE_WITHDRAW, ID_BITS, ID_MASK, at_mark
from ._encode import result_frame
from ._events import Error, Free, Result, Stop, Stored
from ._head_counts import Counts
from ._head_records import ObjState, Peer, TaskRecord, TaskState, TrackedObject
from ._head_wire import Wire
from ._lifecycle import ObjCause, TaskCause

__all__ = ["Copies", "Objects", "inline_cap_text"]

_PENDING: Final = ObjState.PENDING
_INLINE: Final = ObjState.INLINE
_STORED: Final = ObjState.STORED
_FAILED: Final = ObjState.FAILED
_WAITING: Final = TaskState.WAITING
_DONE: Final = TaskState.DONE
_RUNNING_STATES: Final = frozenset({TaskState.RUNNING, TaskState.WITHDRAWING})
_DROPPED: Final = TaskState.DROPPED
_ON_WORKER: Final = _RUNNING_STATES | {_DROPPED}


class Copies(Protocol):
    """What the head's parts tell the keeper of stored copies on workers (`Holdings`)."""

    #: Stale copies to free once what makes them again settles: ID -> the worker. (Empty,
    #: a settle or forget concerns the keeper only for sources or a draining holder: it is
    #: not asked then, on the per-task path.)
    stale: dict[int, Peer]

    def task_settled(self, task: TaskRecord) -> None:
        """``task`` settled: its sources may leave, stale copies of its results go."""

    def forgotten(self, obj: TrackedObject) -> None:
        """``obj`` is forgotten: a stale copy of it goes; a draining holder may leave."""

    def call_answered(self, oid: int) -> None:
        """An actor call was answered: a stale copy of its result goes."""

    def free_copy(self, worker: Peer, oid: int) -> None:
        """``worker`` stored a copy of ``oid`` nobody needs: free it, unless it is needed."""

    def recheck(self, worker: Peer) -> None:
        """A draining ``worker`` may be able to leave now."""


def inline_cap_text(oid: int, number: int, cap: int) -> str:
    """The error for an inline result past its driver's cap."""
    return (
        f"object {oid:#x}: driver {number} keeps {_size(cap)} of inline results in the head, "
        "its cap (DISTA_HEAD_INLINE_CAP): release refs it no longer needs"
    )


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"


class Objects:
    """Every object the head counts references for, by ID."""

    def __init__(
        self,
        wire: Wire,
        counts: Counts,
        *,
        actor_ids: Container[int],
        inline_cap_bytes: int,
    ) -> None:
        if inline_cap_bytes < 0:
            raise ValueError(f"inline_cap_bytes must be >= 0 (0: off), not {inline_cap_bytes}")
        self._wire = wire
        self._counts = counts
        self._actor_ids = actor_ids  # actor IDs are object IDs too: never reused
        self.inline_cap_bytes = inline_cap_bytes
        self.by_id: dict[int, TrackedObject] = {}
        #: Owner link -> how many of `by_id` it owns: whether a quiet driver still has
        #: work or references at the head (`PeerWatch` spares it), without a scan.
        self.owned: dict[int, int] = {}
        self._inline_of: dict[int, int] = {}  # driver number -> bytes of its inline results
        self._ready: Callable[[TaskRecord], None] = _unbound
        self._waits: Callable[[TaskRecord], None] | None = None
        self._copies: Copies = _NoCopies()
        self._stale: dict[int, Peer] = {}

    def bind(
        self,
        ready: Callable[[TaskRecord], None],
        copies: Copies,
        waits: Callable[[TaskRecord], None] | None = None,
    ) -> None:
        """Where ready tasks go (the scheduler), who is told about copies (`Holdings`), and
        who about tasks that wait for their inputs (`Ahead`)."""
        self._ready = ready
        self._waits = waits
        self._copies = copies
        self._stale = copies.stale  # (read on every settle: the dict itself, held here)

    def get(self, oid: int) -> TrackedObject | None:
        return self.by_id.get(oid)

    # -- new IDs ---------------------------------------------------------------------------

    def check_new_ids(self, peer: Peer, oid: int, results: int) -> bool:
        """Whether ``results`` IDs from ``oid`` are this driver's and unused; else say why."""
        objects = self.by_id
        if oid >> ID_BITS != peer.number or not oid & ID_MASK:
            why = f"object ID {oid:#x} is not numbered for driver {peer.number}"
        elif (oid & ID_MASK) + results - 1 > ID_MASK:
            why = f"object IDs {oid:#x} + {results} run past this driver's range"
        elif oid in self._actor_ids:
            why = f"object ID {oid:#x} is already in use (an actor's)"
        elif (results == 1 and oid not in objects) or not any(
            i in objects for i in range(oid, oid + results)
        ):
            return True
        else:
            why = f"object ID {oid:#x} is already in use"
        self._wire.links.send(peer.link, Error(oid, why))
        return False

    def track(self, oid: int, owner: int, task: TaskRecord | None = None) -> TrackedObject:
        obj = self.by_id[oid] = TrackedObject(oid, owner, task)
        owned = self.owned
        owned[owner] = owned.get(owner, 0) + 1
        return obj

    # -- submission ------------------------------------------------------------------------

    def submit(self, task: TaskRecord) -> None:
        """Track ``task``'s results; a task with its argument in hand is ready."""
        objects = self.by_id
        for i in range(task.oid, task.oid + task.results):
            objects[i] = TrackedObject(i, task.owner, task)
        owned = self.owned
        owned[task.owner] = owned.get(task.owner, 0) + task.results
        if task.event is not None:
            self._ready(task)

    def take_inputs(self, task: TaskRecord, inputs: tuple[int, ...]) -> None:
        """``task`` (a task-after, tracked) takes ``inputs``: it waits for them, is ready,
        or fails at once naming an input that is unknown or failed."""
        missing = None
        taken = []
        for input_id in inputs:
            obj = self.by_id.get(input_id)
            if obj is None:
                missing = input_id
                continue
            obj.refs += 1
            taken.append(obj)
        task.inputs = tuple(taken)
        if missing is not None:
            why = f"input {missing:#x} is unknown to the head (released, or never submitted)"
            self.fail_tasks([(task, why)])
            return
        failed = None
        for obj in taken:
            if obj.state is _PENDING:
                self.wait_for(task, obj)
            elif obj.state is _FAILED and failed is None:
                failed = obj
        if failed is not None:
            self.fail_tasks([(task, f"input {failed.oid:#x} failed: {failed.error}")])
        elif task.waiting == 0:
            self._ready(task)
        else:
            self._counts.move_task(task, TaskCause.WAIT)
            if self._waits is not None:
                self._waits(task)

    def wait_for(self, task: TaskRecord, obj: TrackedObject) -> None:
        task.waiting += 1
        if obj.waiters is None:
            obj.waiters = [task]
        else:
            obj.waiters.append(task)

    # -- answers ---------------------------------------------------------------------------

    def set_answer(
        self,
        worker: Peer,
        obj: TrackedObject,
        answer: Result | Stored | None,
        error: str | None,
        position: int = 0,
    ) -> None:
        """``worker`` answered pending ``obj``: keep the value or where it lies, tell its
        driver, start the tasks waiting for it; or fail it and them. ``position``: where
        the actor call ``obj`` is ran in its actor's order, told to a Dista driver with it
        (page drivers read no task-ID field in a result)."""
        if position and not self._wire.told_positions(obj.owner):
            position = 0
        if error is not None:
            self.fail_object(obj, error, at_mark(position) if position else 0)
            return
        if isinstance(answer, Result):
            over = self._over_inline_cap(obj)
            if over is not None:
                self.fail_object(obj, over)
                return
            self.keep_inline(obj, answer.value)
            if obj.held:
                if position:  # (no `Result` made for it: one per actor call)
                    frame = result_frame(obj.oid, answer.value, position)
                    self._wire.links.send_encoded(obj.owner, frame)
                else:
                    self._wire.links.send(obj.owner, answer)
        else:
            assert answer is not None
            obj.size = answer.size
            self._counts.move_object(obj, ObjCause.STORE)
            obj.holder = worker
            worker.holds.add(obj.oid)
            if obj.held:
                self._wire.locate(obj, worker, worker.address, position)
        self.wake(obj)

    def keep_inline(self, obj: TrackedObject, value: bytes | bytearray | memoryview) -> None:
        """``obj``'s value is ``value``, kept here."""
        obj.value = value
        obj.size = len(value)
        self._counts.move_object(obj, ObjCause.INLINE)
        number = obj.oid >> ID_BITS
        self._inline_of[number] = self._inline_of.get(number, 0) + obj.size

    def keep_error(self, obj: TrackedObject, why: str) -> None:
        """``obj`` (new, a resuming driver's) failed, as its driver knows: no error frame."""
        obj.error = why
        self._counts.move_object(obj, ObjCause.FAIL)

    def attach(self, obj: TrackedObject, worker: Peer) -> None:
        """``worker`` holds pending ``obj`` (it came back, or reported it): stored there."""
        self._counts.move_object(obj, ObjCause.ATTACH)  # size: known, or 0 for a claim
        obj.holder = worker
        worker.holds.add(obj.oid)
        self.wake(obj)

    def wake(self, obj: TrackedObject) -> None:
        waiters = obj.waiters
        if waiters is None:
            return
        obj.waiters = None
        ready = self._ready
        for task in waiters:
            if task.state is _WAITING:
                task.waiting -= 1
                if task.waiting == 0:
                    ready(task)

    # -- settling, failing, forgetting -----------------------------------------------------

    def settle(self, task: TaskRecord) -> None:
        """``task`` will never answer again: release its inputs and its hold on its results.
        (Its state is DONE already.)"""
        if task.sources or self._stale:
            self._copies.task_settled(task)
        objects = self.by_id
        for oid in range(task.oid, task.oid + task.results):
            obj = objects.get(oid)
            if obj is not None and obj.task is task:
                obj.task = None
                if obj.state is _PENDING:  # a retried task-many never re-answered this one
                    obj.error = "its task ended without answering it"
                    self._counts.move_object(obj, ObjCause.FAIL)
                if obj.refs == 0:
                    self.forget(obj)
        for obj in task.inputs:
            self.unref(obj)

    def unref(self, obj: TrackedObject) -> None:
        obj.refs -= 1
        if obj.refs == 0 and obj.task is None:
            self.forget(obj)

    def forget(self, obj: TrackedObject) -> None:
        del self.by_id[obj.oid]
        owned = self.owned
        left = owned[obj.owner] - 1
        if left:
            owned[obj.owner] = left
        else:
            del owned[obj.owner]
        state = obj.state
        holder = obj.holder
        self._counts.move_object(obj, ObjCause.FORGET)
        if state is _INLINE:
            self._uncount_inline(obj)
            obj.value = b""
        elif state is _STORED and holder is not None:
            holder.holds.discard(obj.oid)
            self._wire.links.send(holder.link, Free(obj.oid))
        if self._stale or (holder is not None and holder.draining):
            self._copies.forgotten(obj)

    def fail_object(self, obj: TrackedObject, why: str, mark: int = 0) -> None:
        """Fail pending ``obj`` (its error frame ``mark``ed) and, transitively, every
        task waiting on it."""
        stack: list[tuple[TaskRecord, str]] = []
        self.fail_results([obj], why, stack, mark)
        self.fail_tasks(stack)

    def fail_results(
        self,
        objs: list[TrackedObject],
        why: str,
        stack: list[tuple[TaskRecord, str]],
        mark: int = 0,
    ) -> None:
        for obj in objs:
            if obj.state is not _PENDING:
                continue
            obj.error = why
            self._counts.move_object(obj, ObjCause.FAIL)
            if obj.held:
                self._wire.links.send(obj.owner, Error(obj.oid, why, mark))
            waiters, obj.waiters = obj.waiters, None
            if waiters:
                because = f"input {obj.oid:#x} failed: {why}"
                stack.extend((t, because) for t in waiters if t.state is _WAITING)

    def fail_tasks(self, stack: list[tuple[TaskRecord, str]]) -> None:
        """Fail tasks that have not run (or whose run is dropped), cascading without
        recursion; a running one's answers are dropped from then on."""
        objects = self.by_id
        counts = self._counts
        while stack:
            task, why = stack.pop()
            state = task.state
            if state is _DONE or state is _DROPPED:
                continue
            results = [
                objects[i] for i in range(task.oid, task.oid + task.results) if i in objects
            ]
            self.fail_results(results, why, stack)
            if state in _RUNNING_STATES:
                counts.move_task(task, TaskCause.DROP)
                # Its worker drops it if it has not started, else interrupts it. With its
                # first result stored there already (it ran; the rest is on its way), a
                # free would delete that result, which its driver may have been told of.
                if task.worker is not None:
                    first = objects.get(task.oid)
                    ran = (
                        first is not None
                        and first.state is _STORED
                        and first.holder is task.worker
                    )
                    mark = FREE_WITHDRAW if ran else 0
                    self._wire.links.send(task.worker.link, Free(task.oid, mark))
                continue
            counts.move_task(task, TaskCause.FAIL)
            self.settle(task)

    def release(self, peer: Peer, oid: int) -> None:
        obj = self.by_id.get(oid)
        if obj is None or obj.owner != peer.link or not obj.held:
            if not peer.resuming:  # (a resume releases what this head may have forgotten)
                why = f"release of {oid:#x}, which you don't hold"
                self._wire.links.send(peer.link, Error(oid, why))
            return
        obj.held = False
        self.unref(obj)

    def cancel(self, peer: Peer, oid: int, force: bool) -> tuple[Peer, str] | None:
        """Cancel the task of ``peer``'s object ``oid``; a forced cancel of a running one
        also stops its worker's process: that worker and why, for the head to lose."""
        obj = self.by_id.get(oid)
        if obj is None or obj.owner != peer.link:
            return None  # already settled and released: nothing left to cancel
        task = obj.task
        if task is None or task.state is _DONE:
            return None
        worker = task.worker if task.state in _ON_WORKER else None
        self.fail_tasks([(task, "cancelled")])
        if force and worker is not None and self._wire.alive(worker):
            # The task may not answer an interrupt (stuck in C code): end its worker.
            why = f"stopped to force-cancel task {task.oid:#x}"
            self._wire.links.send(worker.link, Stop())
            self._wire.close(worker.link, why)
            return worker, why
        return None

    def reown(self, was: int, now: int) -> None:
        """The objects ``was`` owned are ``now``'s (a driver resumed on a new link)."""
        moved = self.owned.pop(was, 0)
        if moved:
            self.owned[now] = self.owned.get(now, 0) + moved

    def owned_by(self, link: int) -> list[TrackedObject]:
        return [obj for obj in self.by_id.values() if obj.owner == link]

    def rename_tallies(self, was: int, now: int) -> None:
        """The driver on link ``was`` is on ``now``: its tallies go with it."""
        self._counts.rename_owner(was, now)

    def drop_driver(self, driver: Peer) -> None:
        """A driver is gone: its tasks fail and its references go (no error frames)."""
        mine = self.owned_by(driver.link)
        stack = [
            (obj.task, "its driver disconnected")
            for obj in mine
            if obj.task is not None and obj.task.oid == obj.oid
        ]
        # Its reference goes once: objects it already released gave theirs up then.
        held = [obj for obj in mine if obj.held]
        for obj in held:
            obj.held = False  # no Error frames to a driver that is gone
        self.fail_tasks(stack)
        for obj in held:
            if obj.oid in self.by_id:
                self.unref(obj)
        self._counts.owner_gone(driver.link)  # (after its tasks' failures are counted)

    def holder_lost(self, worker: Peer, why: str) -> None:
        """``worker`` is lost for good: what it alone held fails, and what waits on it."""
        stack: list[tuple[TaskRecord, str]] = []
        objects = self.by_id
        lost = [objects[oid] for oid in worker.holds if oid in objects]
        for obj in lost:
            if obj.state is not _STORED:
                continue
            obj.holder = None
            self._counts.move_object(obj, ObjCause.HOLDER_LOST)  # so that it fails below
            self.fail_results([obj], f"object lost: {worker.name} disconnected ({why})", stack)
        worker.holds.clear()
        self.fail_tasks(stack)

    def holder_away(self, worker: Peer) -> list[int]:
        """``worker`` is lost but may come back: what it stored is pending again (waiting
        for it); the IDs of those objects."""
        away = []
        for oid in worker.holds:
            obj = self.by_id.get(oid)
            if obj is not None and obj.state is _STORED:
                obj.holder = None
                self._counts.move_object(obj, ObjCause.HOLDER_LOST)
                away.append(oid)
        worker.holds.clear()
        return away

    # -- the inline cap --------------------------------------------------------------------

    def inline_bytes(self, number: int) -> int:
        """Bytes of driver ``number``'s inline results the head keeps (its cap's count)."""
        return self._inline_of.get(number, 0)

    def _over_inline_cap(self, obj: TrackedObject) -> str | None:
        """Why ``obj``'s inline answer is not kept: its driver is at its cap (the task was
        sent before it got there, or to a worker that does not know `FREE_STORE`)."""
        cap = self.inline_cap_bytes
        number = obj.oid >> ID_BITS
        if cap and self._inline_of.get(number, 0) >= cap:
            return inline_cap_text(obj.oid, number, cap)
        return None

    def _uncount_inline(self, obj: TrackedObject) -> None:
        number = obj.oid >> ID_BITS
        left = self._inline_of.get(number, 0) - obj.size
        if left > 0:
            self._inline_of[number] = left
        else:
            self._inline_of.pop(number, None)

    def store_mark(self, oid: int, worker: Peer) -> None:
        """Before the task or actor call whose first result is ``oid`` goes to ``worker``:
        if its driver keeps its cap of inline results here, the worker is told to store its
        results whatever their size."""
        cap = self.inline_cap_bytes
        if cap and self._inline_of.get(oid >> ID_BITS, 0) >= cap:
            self._wire.links.send(worker.link, Free(oid, FREE_STORE))


def _unbound(task: TaskRecord) -> None:
    raise AssertionError("Objects.bind was not called")  # pragma: no cover


class _NoCopies:
    """Until `Objects.bind`: nothing is stored anywhere yet."""

    def __init__(self) -> None:
        self.stale: dict[int, Peer] = {}

    def task_settled(self, task: TaskRecord) -> None:  # pragma: no cover
        pass

    def forgotten(self, obj: TrackedObject) -> None:  # pragma: no cover
        pass

    def call_answered(self, oid: int) -> None:  # pragma: no cover
        pass

    def free_copy(self, worker: Peer, oid: int) -> None:  # pragma: no cover
        pass

    def recheck(self, worker: Peer) -> None:  # pragma: no cover
        pass
