"""A driver's (or a task's client's) view of the cluster: its objects and who waits on them.

The `Driver` core runs on the binding's I/O thread; user threads submit, read and release
through this class, which serialises them on one lock. To its engine a session is the
driver's core made safe to share (a `dista_proto.Core`): the engine feeds it (`start`,
`get_buffer`, `buffer_updated`, `connection_lost`...), then takes its `decisions`, of which
the session keeps its own (values, failures, answers: routed by type, `_ROUTES`) and hands
back the I/O ones. A call from a user thread changes the core and asks the binding to
flush (once per burst, not once per call): the engine then takes its decisions. Values are
decoded on the reader's thread, not the I/O thread, so a large result never stalls the
loop. Releases from `ObjectRef.__del__` may run in any thread at any time (even inside this
class, during garbage collection), so they only append to a queue that `decisions` drains.
Its actors are a part it holds, `actors` (`SessionActors`), sharing its lock and slots.
A submit over the budget of in-flight argument bytes waits for answers first (`budget`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

import dista_proto as dp
from dista_proto.frame import Bytes

from .._clock import now
from .._errors import DistaError, GetTimeoutError
from .._net.latch import Latch
from .._values import names
from .._values.codec import decode
from .._values.errors import error_from_message
from .awaiting import wait_latch
from .budget import InflightBudget
from .budget import wait as wait_room
from .driver_actors import SessionActors
from .slots import FAILED, LOCATED, PENDING, VALUE, SessionIO, Slot

__all__ = ["Hooks", "Session", "SessionIO"]

_PENDING: Final = PENDING
_LOCATED: Final = LOCATED
_VALUE: Final = VALUE
_FAILED: Final = FAILED


def _no_hook() -> None:
    pass


@dataclass(frozen=True)
class Hooks:
    """What a worker's client session does around its tasks' waits (`install_worker_hooks`
    is gone: the worker passes these to the session it makes)."""

    #: Entered around every blocking wait of `Session.get_value`: a task blocked reading
    #: another task's result lends its thread slot to another runner.
    on_block: Callable[[], AbstractContextManager[object]] = nullcontext
    #: Entered around every ``await`` of a ref that is not there yet: an ``async def`` task
    #: awaiting another task's result lends its slot meanwhile.
    on_await: Callable[[], AbstractContextManager[object]] = nullcontext
    #: Called before every submit or wait: a task the worker runs inline on its loop
    #: (`dista_runtime._execution.inline`) is stopped before it submits or blocks there.
    on_use: Callable[[], None] = _no_hook


_Slot = Slot
Fire = list[Callable[[], object]]


class Session:
    def __init__(self, core: dp.Driver, io: SessionIO, hooks: Hooks | None = None) -> None:
        self.core = core
        self.io = io
        hooks = hooks or Hooks()
        self._on_block = hooks.on_block
        self._on_await = hooks.on_await
        self._on_use = hooks.on_use
        self._lock = threading.Lock()
        self._told = -1  # the labels' generation told to the core (`names`)
        self._slots: dict[int, _Slot] = {}
        self._releases: deque[int] = deque()
        self._stats_waiters: deque[Callable[[dp.HeadStats | None], None]] = deque()
        self._timeline_waiters: deque[Callable[[tuple[dp.TimelineRecord, ...] | None], None]]
        self._timeline_waiters = deque()
        self.welcomed: threading.Event = threading.Event()
        self.closed: str = ""
        #: A cancelled ``await ref`` cancels the ref's task as well (``connect(...,
        #: cancel_remote=True)``); otherwise it only stops waiting.
        self.cancel_remote = False
        #: Backpressure: submitters wait while the core keeps this many argument bytes
        #: for unfinished work (`dista_runtime._session.budget`); ``budget.limit`` is set
        #: by the host (``DISTA_DRIVER_INFLIGHT_BYTES``).
        self.budget: InflightBudget = InflightBudget()
        #: Its actors: created, called, checkpointed and killed through this part.
        self.actors: SessionActors = SessionActors(
            core=core,
            io=io,
            lock=self._lock,
            slots=self._slots,
            host=self,
            on_use=hooks.on_use,
            on_block=hooks.on_block,
            on_await=hooks.on_await,
        )

    # -- the engine's side (I/O thread): the core, shared ----------------------------------

    def start(self, resume: dp.Resume | None = None) -> None:
        """The connection to the head is up: say hello."""
        with self._lock:
            self.core.start(now(), resume)

    def connection_made(self, now: int) -> int:
        return self.core.connection_made(now)  # refused: a driver only dials

    def receive_data(self, link: int, data: Bytes, now: int) -> None:
        with self._lock:
            self.core.receive_data(link, data, now)

    def get_buffer(self, link: int, sizehint: int = -1) -> memoryview:
        """Where to read ``link``'s next bytes; `buffer_updated` takes them."""
        with self._lock:
            return self.core.get_buffer(link, sizehint)

    def buffer_updated(self, link: int, nbytes: int, now: int) -> None:
        """``nbytes`` were read into the view `get_buffer` gave: the core takes them."""
        with self._lock:
            self.core.buffer_updated(link, nbytes, now)

    def connection_lost(self, link: int, now: int) -> None:
        fire: Fire = []
        with self._lock:
            core = self.core
            core.connection_lost(link, now)
            # A driver the head numbered resumes (`HeadLost`); else the core says why not.
            if link == dp.HEAD_LINK and core.closed_reason:
                self._close_locked(core.closed_reason, fire)
        _run(fire)

    def connected(self, link: int, now: int) -> None:
        with self._lock:
            self.core.connected(link, now)

    def next_deadline(self) -> int | None:
        with self._lock:
            return self.core.next_deadline()

    def on_timer(self, now: int) -> None:
        with self._lock:
            self.core.on_timer(now)

    def decisions(self) -> list[dp.Decision]:
        """The releases queued meanwhile go to the core; of its decisions, the session's
        own are carried out here (waiters woken once the lock is released) and the I/O
        ones returned."""
        fire: Fire = []
        with self._lock:
            self._drain_releases()
            if names.generation() != self._told:  # new labels: the head hears them now
                self._told = names.generation()
                self.core.telling.label(names.entries())
            out = self._decide(fire)
        _run(fire)
        return out

    def vitals(self, vitals: dp.Vitals) -> None:
        """Tell the head how this process is (`dista_runtime._hosts.vitals`)."""
        with self._lock:
            self.core.telling.vitals(vitals)

    def _drain_releases(self) -> None:
        releases = self._releases
        while releases:
            oid = releases.popleft()
            if self.actors.release_pinned(oid):
                continue  # an actor call waits for its value: released once it has gone
            if self._slots.pop(oid, None) is not None and not self.closed:
                self.core.release(oid)
        self.actors.drain_drops()

    def leave(self) -> None:
        """A clean shutdown: tell the head to drop what this driver owns (`Driver.leave`)."""
        with self._lock:
            if not self.closed:
                self.core.leave()

    def close(self, why: str) -> None:
        fire: Fire = []
        with self._lock:
            self._close_locked(why, fire)
        _run(fire)

    def _close_locked(self, why: str, fire: Fire) -> None:
        if self.closed:
            return
        self.closed = why
        self.welcomed.set()
        for oid, slot in self._slots.items():
            if slot.state in (_PENDING, _LOCATED):
                slot.state = _FAILED
                slot.value = f"object {oid:#x} is lost: {why}"
            fire.extend(slot.callbacks)
            slot.callbacks = []
            if slot.waiters:
                fire.extend(slot.waiters)
                slot.waiters = None
        fire.extend(partial(w, None) for w in self._stats_waiters)
        fire.extend(partial(w, None) for w in self._timeline_waiters)
        self._stats_waiters.clear()
        self._timeline_waiters.clear()
        fire.extend(self.budget.close())

    def _decide(self, fire: Fire) -> list[dp.Decision]:
        """Carry out the core's decisions that are the session's (`_ROUTES`), until it has
        none left (some ask more of it: a fetch); the rest, the I/O ones, in order."""
        out: list[dp.Decision] = []
        routes = _ROUTES
        while decisions := self.core.decisions():
            for d in decisions:
                carry_out = routes.get(type(d))
                if carry_out is None:
                    out.append(d)  # the engine's: write, connect, close, exit, a lost head
                else:
                    carry_out(self, d, fire)
        fire.extend(self.budget.wake(self.core.inflight_bytes))
        return out

    def _on_value(self, d: dp.ObjectValue, fire: Fire) -> None:
        self._settle(d.object_id, _VALUE, d.value, fire)

    def _on_located(self, d: dp.ObjectLocated, fire: Fire) -> None:
        self._located(d.object_id, fire)

    def _on_failed(self, d: dp.ObjectFailed, fire: Fire) -> None:
        if d.object_id:
            self._settle(d.object_id, _FAILED, d.message, fire)

    def _on_actor_warning(self, d: dp.ActorWarning, fire: Fire) -> None:
        self.actors.on_warning(d)

    def _on_actor_awaits_host(self, d: dp.ActorAwaitsHost, fire: Fire) -> None:
        say = self.actors.on_awaits_host(d)
        if say is not None:
            fire.append(say)

    def _on_refused(self, d: dp.Refused, fire: Fire) -> None:
        pass  # the core keeps the reason: the session closes with it when lost

    def _on_welcomed(self, d: dp.Welcomed, fire: Fire) -> None:
        self.welcomed.set()

    def _on_stats(self, d: dp.StatsReceived, fire: Fire) -> None:
        if self._stats_waiters:
            fire.append(partial(self._stats_waiters.popleft(), d.counts))

    def _on_timeline(self, d: dp.TimelineReceived, fire: Fire) -> None:
        if self._timeline_waiters:
            fire.append(partial(self._timeline_waiters.popleft(), d.records))

    def _settle(self, oid: int, state: int, value: Bytes | str, fire: Fire) -> None:
        slot = self._slots.get(oid)
        if slot is None:
            return  # released meanwhile
        slot.state = state
        slot.value = value
        if slot.callbacks:
            fire.extend(slot.callbacks)
            slot.callbacks = []
        if slot.waiters:
            fire.extend(slot.waiters)
            slot.waiters = None

    def _located(self, oid: int, fire: Fire) -> None:
        slot = self._slots.get(oid)
        if slot is None:
            return
        slot.state = _LOCATED
        if slot.waiters:  # done: the value stays where it lies
            fire.extend(slot.waiters)
            slot.waiters = None
        if slot.callbacks:
            # Someone is already waiting for the value: bring it now.
            slot.fetching = True
            self.core.fetch(oid)
            fire.extend(slot.callbacks)
            slot.callbacks = []

    # -- the user's side (any thread) ------------------------------------------------------

    def check_open(self) -> None:
        """Raise `DistaError` if this session is closed (under the lock)."""
        if self.closed:
            raise DistaError(f"this Dista session is closed ({self.closed}); call dista.init()")

    def submit(self, task_id: int, argument: Bytes, inputs: Sequence[int], results: int) -> int:
        self._on_use()
        nbytes = argument.nbytes if isinstance(argument, memoryview) else len(argument)
        while True:
            with self._lock:
                self.check_open()
                room = self.room_locked(nbytes)
                if room is None:
                    oid = self._submit_locked(task_id, argument, inputs, results)
                    break
            self.wait_room(room)
        self.io.schedule_flush()
        return oid

    def room_locked(self, nbytes: int) -> threading.Event | None:
        """None if ``nbytes`` more of argument may go now; else an event to `wait_room` for."""
        return self.budget.room(self.core.inflight_bytes, nbytes, self.io.in_io_thread())

    def wait_room(self, room: threading.Event) -> None:
        """Wait (out of the lock) for answers that make room; a task lends its slot meanwhile."""
        self.io.schedule_flush()  # what is queued goes first: its answers make the room
        with self._on_block():
            wait_room(room)

    def _submit_locked(
        self, task_id: int, argument: Bytes, inputs: Sequence[int], results: int
    ) -> int:
        core = self.core
        if inputs:
            many = results if results > 1 else None
            oid = core.submit_after(task_id, inputs, gather=True, value=argument, results=many)
        elif results > 1:
            oid = core.submit_many(task_id, argument, results)
        else:
            oid = core.submit(task_id, argument)
        slots = self._slots
        for i in range(results):
            slots[oid + i] = _Slot()
        return oid

    def release(self, oid: int) -> None:
        self._releases.append(oid)
        self.io.schedule_flush()

    def cancel(self, oid: int, force: bool = False) -> None:
        with self._lock:
            self.check_open()
            self.core.cancel(oid, force)
        self.io.schedule_flush()

    def is_done(self, oid: int) -> bool:
        slot = self._slots.get(oid)
        return slot is not None and slot.state != _PENDING

    def on_done(self, oid: int, callback: Callable[[], object], fetch: bool = False) -> bool:
        """Call ``callback`` once ``oid`` is located, has a value or failed; False if it is.
        ``fetch``: once located, bring its value here too (a get of many, Ray's
        ``fetch_local``); else a stored value stays on its worker."""
        self._on_use()
        with self._lock:
            slot = self._slots.get(oid)
            if slot is None or slot.state != _PENDING:
                return False
            if fetch:
                slot.callbacks.append(callback)
            elif slot.waiters is None:
                slot.waiters = [callback]
            else:
                slot.waiters.append(callback)
            return True

    def poll(self, oid: int, callback: Callable[[], object]) -> tuple[bool, Any]:
        """(True, encoded value or failure) if ``oid`` is read; else register ``callback``."""
        self._on_use()
        flush = False
        with self._lock:
            slot = self._slots.get(oid)
            if slot is None:
                raise ValueError(f"object {oid:#x} is not held by this session")
            if slot.state == _VALUE or slot.state == _FAILED:
                return True, slot
            if slot.state == _LOCATED and not slot.fetching:
                slot.fetching = True
                self.core.fetch(oid)
                flush = True
            slot.callbacks.append(callback)
        if flush:
            self.io.schedule_flush()
        return False, None

    def blocking(self) -> AbstractContextManager[object]:
        """Entered around a wait of this session's refs outside `get_value` (`dista.get`
        of many): in a task, its slot is lent meanwhile."""
        return self._on_block()

    def get_value(self, oid: int, timeout: float | None) -> Any:
        if self.io.in_io_thread():
            raise RuntimeError(
                "ref.get() would block the event loop that runs Dista: use `await ref`"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            event = threading.Event()
            ready, slot = self.poll(oid, event.set)
            if ready:
                return _outcome(oid, slot)
            with self._on_block():
                arrived = _wait(event, deadline)
            if not arrived:
                raise GetTimeoutError(f"object {oid:#x} was not ready within {timeout} s")

    async def await_value(self, oid: int, *, cancellable: bool = True) -> Any:
        """The value, awaited on whatever loop runs the caller (`dista_runtime._session.awaiting`);
        a cancelled wait cancels the task too with ``cancel_remote``, if ``cancellable`` (an
        actor call's is not: the wait stops and the call still runs)."""
        while True:
            latch: Latch[None] = Latch()
            ready, slot = self.poll(oid, partial(latch.set, None))
            if ready:
                return _outcome(oid, slot)
            with self._on_await():
                try:
                    await wait_latch(latch, None)
                except BaseException:  # the awaiting task was cancelled
                    remote = self.cancel_remote and cancellable
                    if remote and not self.closed and not self.is_done(oid):
                        self.cancel(oid)
                    raise

    def request(self, what: str, timeout: float | None) -> Any:
        """A stats or timeline answer from the head, waiting at most ``timeout`` seconds."""
        if self.io.in_io_thread():
            raise RuntimeError(
                f"dista.{what}() would block the event loop that runs Dista (its answer "
                f"arrives on this very loop): use `await dista.{what}_async()`"
            )
        box: list[Any] = []
        event = threading.Event()

        def got(answer: object) -> None:
            box.append(answer)
            event.set()

        self._ask(what, got)
        if not event.wait(timeout):
            raise GetTimeoutError(f"the head did not answer a {what} request within {timeout} s")
        return self._answered(what, box[0])

    async def request_async(self, what: str, timeout: float | None) -> Any:
        """`request` for a coroutine: waits without blocking its loop (any loop)."""
        latch: Latch[object] = Latch()
        self._ask(what, latch.set)
        try:
            answer = await wait_latch(latch, timeout)
        except TimeoutError:
            raise GetTimeoutError(
                f"the head did not answer a {what} request within {timeout} s"
            ) from None
        return self._answered(what, answer)

    def _ask(self, what: str, got: Callable[[Any], None]) -> None:
        """Send a stats or timeline request; ``got`` receives the answer (None: closed)."""
        self._on_use()
        with self._lock:
            self.check_open()
            self._drain_releases()  # so that the counts include every release made before
            if what == "stats":
                self._stats_waiters.append(got)
                self.core.request_stats()
            else:
                self._timeline_waiters.append(got)
                self.core.request_timeline()
        self.io.schedule_flush()

    def _answered(self, what: str, answer: object) -> object:
        if answer is None:
            raise DistaError(f"no {what}: the session closed ({self.closed})")
        return answer

    def held(self) -> int:
        return len(self._slots)


#: The decisions a session carries out itself, by type (`Session._decide`).
_ROUTES: Final[dict[type[Any], Callable[[Session, Any, Fire], None]]] = {
    dp.ObjectValue: Session._on_value,
    dp.ObjectLocated: Session._on_located,
    dp.ObjectFailed: Session._on_failed,
    dp.ActorWarning: Session._on_actor_warning,
    dp.ActorAwaitsHost: Session._on_actor_awaits_host,
    dp.Refused: Session._on_refused,
    dp.Welcomed: Session._on_welcomed,
    dp.StatsReceived: Session._on_stats,
    dp.TimelineReceived: Session._on_timeline,
}

#: A blocking wait wakes at least this often: a task interrupted by a cancel gets its
#: KeyboardInterrupt there (a lock's wait in C code can't be interrupted).
_WAIT_SLICE_S: Final = 0.2


def _wait(event: threading.Event, deadline: float | None) -> bool:
    """``event.wait`` until ``deadline`` (monotonic; None: no limit), in slices."""
    while True:
        left = _WAIT_SLICE_S if deadline is None else deadline - time.monotonic()
        if left <= 0:
            return event.is_set()
        if event.wait(min(left, _WAIT_SLICE_S)):
            return True


def _outcome(oid: int, slot: _Slot) -> Any:
    if slot.state == _FAILED:
        assert isinstance(slot.value, str)
        raise error_from_message(slot.value, oid)
    assert slot.value is not None and not isinstance(slot.value, str)
    return decode(slot.value)


def _run(callbacks: list[Callable[[], object]]) -> None:
    for callback in callbacks:
        callback()
