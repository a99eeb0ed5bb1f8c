"""`DistaFuture`: a `concurrent.futures.Future` standing for one task's ref.

A future is settled by one thread per process, the settler, never by the I/O thread: the
session calls back on its I/O thread when a ref is done, and decoding a value there would
stall every connection behind a large result, so the callback only queues the future. The
settler decodes the value (or rebuilds the task's error), sets it on the future, and runs
the future's done callbacks, as the management thread of `ProcessPoolExecutor` does. A
result that stayed on its worker (a large one) is fetched first: the settler asks for it
and is called back again once it is here. A map's futures skip the settler: the map's
iterator, the only one to read them, settles each on its own thread as it reads it (one
thread hand-off per chunk less), and a shutdown that must wait for them arms them.

Cancelling follows the standard `Future` protocol, so that `concurrent.futures.wait` and
`as_completed` see it: `cancel` succeeds until the result has been set, and it then also
cancels the task (a queued task never runs; a running one is interrupted). Unlike a
`ProcessPoolExecutor` future, ours never shows ``running()``: the driver does not know when
a worker starts a task, and a running task can still be cancelled, so it stays pending
until its answer arrives.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any, TypeVar

from .._api.ref import ObjectRef
from .._errors import DistaError

__all__ = ["DistaFuture", "track"]

T = TypeVar("T")

#: How often a reader waiting for a value looks whether another thread cancelled it.
_SLICE_S = 0.05
_arrivals: SimpleQueue[DistaFuture[Any]] = SimpleQueue()
_start_lock = threading.Lock()
_settler: threading.Thread | None = None


class DistaFuture(Future[T]):
    """The future of one task: `cancel` cancels the task; its ref is released once read."""

    def __init__(self, ref: ObjectRef[Any]) -> None:
        super().__init__()
        #: Taken (None) by whoever settles the future: after that nothing may cancel it.
        self._ref: ObjectRef[Any] | None = ref
        #: Orders `cancel` against the settler: `set_running_or_notify_cancel` is called
        #: exactly once (a second call raises), and a ref is never cancelled once released.
        self._guard = threading.Lock()
        self._notified = False
        #: Whether the settler will hear of its answer (`arm`).
        self._armed = False

    def cancel(self) -> bool:
        """Cancel the future and, unless its answer is here already, its task."""
        if not super().cancel():
            return False
        with self._guard:
            if not self._notified:
                # Waiters (`wait`, `as_completed`) learn of a cancel only through this call;
                # make it now rather than when the task's "cancelled" answer comes back.
                self._notified = True
                self.set_running_or_notify_cancel()
            ref = self._ref
            if ref is not None:
                try:
                    ref.cancel()
                except (DistaError, ValueError):
                    pass  # the session closed: its task is gone with it
                if not self._armed:  # no settler will release it
                    self._ref = None
                    ref.release()
        return True

    def arm(self) -> None:
        """Have the settler settle it once its answer is here (once; any thread)."""
        with self._guard:
            ref = self._ref
            if self._armed or ref is None:
                return
            self._armed = True
        _ensure_settler()
        if not ref._session.on_done(ref.object_id, self._again, fetch=True):
            _arrivals.put(self)  # already done: settle it now

    def _arrived(self) -> None:
        """The settler's part: set the value or the error, once it is in this process."""
        ref = self._ref
        if ref is None:
            return
        ready, _ = ref._session.poll(ref.object_id, self._again)
        if not ready:
            return  # located on a worker: it is fetched now, and `_again` comes back
        with self._guard:
            if self._notified:
                running = False
            else:
                self._notified = True
                running = self.set_running_or_notify_cancel()
            ref, self._ref = self._ref, None
        if ref is None:
            return
        try:
            if running:
                try:
                    value = ref.get(0)
                except Exception as e:  # noqa: BLE001  (the task's error, or a lost cluster)
                    self.set_exception(e)
                else:
                    self.set_result(value)
        finally:
            ref.release()

    def _result_here(self, timeout: float | None) -> T:
        """`result`, but reading the value on this thread as soon as it is here rather than
        waiting for the settler to hand it over: a map's reader saves a thread hand-off per
        chunk. Whichever of the two settles the future first, the other leaves it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._settle_here(deadline)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self.result(left)

    def _settle_here(self, deadline: float | None = None) -> None:
        """Wait on this thread (until ``deadline``, monotonic) for the answer and settle the
        future with it, unless someone else does first."""
        ref = self._ref
        here = threading.Event()
        while ref is not None and self._ref is not None:
            try:
                ready, _ = ref._session.poll(ref.object_id, here.set)
            except ValueError:
                return  # released: the settler (or a cancel) took it
            if ready:
                self._arrived()
                return
            with ref._session.blocking():  # in a task: lend its slot meanwhile
                # In slices: a cancel from another thread releases the ref, and a released
                # ref's answer never calls back; then `self._ref` is None.
                while not here.is_set() and self._ref is not None:
                    left = _SLICE_S if deadline is None else deadline - time.monotonic()
                    if left <= 0:
                        return
                    here.wait(min(left, _SLICE_S))
            here.clear()

    def _again(self) -> None:
        """Called on the I/O thread: never decode there, hand it to the settler."""
        _arrivals.put(self)


def _settle() -> None:
    while True:
        future = _arrivals.get()
        try:
            future._arrived()
        except Exception:
            logging.getLogger("dista.pools").exception("settling %r failed", future)


def _ensure_settler() -> None:
    global _settler
    if _settler is not None and _settler.is_alive():
        return
    with _start_lock:
        if _settler is None or not _settler.is_alive():
            _settler = threading.Thread(target=_settle, name="dista-settler", daemon=True)
            _settler.start()


def track(ref: ObjectRef[Any], armed: bool = True) -> DistaFuture[Any]:
    """A future for ``ref``, settled once the task is done. One not ``armed`` is settled
    only by a reader's `DistaFuture._result_here` or once armed: a map's futures, which
    only its iterator reads, skip the settler that way (and `Runner.wait_all` arms them)."""
    future: DistaFuture[Any] = DistaFuture(ref)
    if armed:
        future.arm()
    return future
