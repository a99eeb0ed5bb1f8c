"""Where a worker runs user code: runner threads that can be withdrawn from and interrupted.

Loop-independent: a binding hands `Runners` the tasks that go to threads, and gets back
outcomes (`finished`, from any thread) and blocked/resumed notices (`on_blocked`, from the
runner thread that blocks), which it carries to its loop and the `Worker` core.

- One thread per slot the head gives, plus one more whenever a running task blocks reading
  another task's result (the head lends that task's slot meanwhile, and the tasks it waits
  for may land here), so nested tasks cannot starve the worker.
- A task not started yet can be withdrawn (`withdraw`): the head cancelled it, or wants it
  to run on an idle worker. A started one can be interrupted (`interrupt`): an exception
  is raised in its thread at its next Python instruction, and its sleeps (`time.sleep`)
  and Dista waits return at once so that it gets there, as Ray's cancel raises
  KeyboardInterrupt in the task.
- Whatever a task raises, `SystemExit` and `KeyboardInterrupt` included, becomes its error
  frame: a task cannot take its runner thread, or its worker, down with it.
- A finished task's argument and call are dropped before the thread waits for the next
  one, so a large argument is freed when its task ends, not when the next one comes.

Runners are threads unless the loop gives a `Runner`: gevent's binding, in a monkey-patched
process, runs them as greenlets (whose interrupt is a ``throw`` at their next wait), and
everything above holds for them as it does for threads.
"""

from __future__ import annotations

import contextlib
import ctypes
import queue
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Final, Protocol, SupportsIndex

import dista_proto as dp

from .._clock import now
from .call import Call, Outcome, run_call
from .inline import InlinePolicy

__all__ = ["Runner", "Runners"]

#: Raises an exception in one runner at its next chance; None forgets one not raised yet.
Interrupter = Callable[[type[BaseException] | None], object]


class Runner(Protocol):
    """How a worker starts the runners of its plain tasks, when its loop says so (an optional
    ``runner`` attribute of the `dista_runtime._net.contract.Loop`): without one, each is a thread,
    interrupted by raising in that thread."""

    def spawn(self, target: Callable[[], object]) -> None:
        """Start a runner that calls ``target`` (on the loop, or in another runner)."""
        ...

    def interrupter(self) -> Interrupter:
        """Called in a runner: how to interrupt it (called on the loop, or the runner itself
        with None)."""
        ...


#: How long a runner whose task was interrupted waits before taking its next one: cancels
#: sent together (a loop of ``ref.cancel()``) arrive one by one, and the next queued task
#: may be among them; it should be withdrawn, not started.
_AFTER_INTERRUPT_S: Final = 0.05
#: What an interrupted task fails with (the head drops a cancelled task's answers anyway).
_CANCELLED: Final = "cancelled: the task was interrupted"

_real_sleep = time.sleep


class _Current(threading.local):
    """A runner thread's own state."""

    def __init__(self) -> None:
        self.runner = False
        self.oid = 0  # the task it runs, or 0
        self.depth = 0  # nested blocking waits
        self.wake = threading.Event()  # set to cut its sleeps short when interrupted


class Runners:
    """Threads that run user code; see the module docstring."""

    def __init__(
        self,
        threads: int,
        policy: InlinePolicy,
        finished: Callable[[Outcome], None],
        on_blocked: Callable[[int, bool], None],
        runner: Runner | None = None,
    ) -> None:
        self.base = threads
        self.runner = runner
        self.policy = policy
        self.finished = finished
        self.on_blocked = on_blocked
        self.lock = threading.Lock()
        self.threads = 0
        self.blocked = 0
        self._queue: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._queued: dict[int, tuple[dp.RunTask, Call]] = {}  # not started yet
        # oid -> how to interrupt its runner, and its wake event (not the thread-local: read
        # from another thread, that would be the reader's own)
        self._running: dict[int, tuple[Interrupter, threading.Event]] = {}
        self._current = _Current()
        _install_sleep(self)
        for _ in range(threads):
            self._spawn()

    # -- the binding's side ----------------------------------------------------------------

    def submit(self, task: dp.RunTask, call: Call) -> None:
        with self.lock:
            self._queued[task.object_id] = (task, call)
        self._queue.put(task.object_id)

    def withdraw(self, oid: int) -> bool:
        """Drop ``oid``'s task if no thread has started it; whether it was dropped."""
        with self.lock:
            return self._queued.pop(oid, None) is not None

    def interrupt(self, oid: int) -> bool:
        """Raise KeyboardInterrupt in the thread running ``oid``'s task; whether one was."""
        with self.lock:
            running = self._running.get(oid)
            if running is None:
                return False
            raise_in, wake = running
            raise_in(KeyboardInterrupt)
            wake.set()
            return True

    def stop(self) -> None:
        """Let every idle runner thread end (busy ones end with their task)."""
        for _ in range(self.threads):
            self._queue.put(None)

    # -- the task's side ------------------------------------------------------------------

    def current(self) -> int:
        """The task this thread runs (0 outside a runner thread)."""
        return self._current.oid

    def interrupted(self) -> bool:
        """Whether this thread's task was interrupted (its sleeps and waits end early)."""
        return self._current.wake.is_set()

    def sleep(self, seconds: float) -> None:
        """`time.sleep` for a task: cut short if the task is interrupted."""
        state = self._current
        if state.oid and seconds > 0:
            state.wake.wait(seconds)
        else:
            _real_sleep(seconds)

    @contextlib.contextmanager
    def blocking(self) -> Iterator[None]:
        """Around a wait for other tasks' results: lend this task's slot meanwhile."""
        state = self._current
        if not state.runner or not state.oid:
            yield
            return
        state.depth += 1
        outer = state.depth == 1
        if outer:
            with self.lock:
                self.blocked += 1
                if self.threads - self.blocked < self.base:
                    self._spawn()
            self.on_blocked(state.oid, True)
        try:
            yield
        finally:
            state.depth -= 1
            if outer:
                with self.lock:
                    self.blocked -= 1
                self.on_blocked(state.oid, False)

    # -- the threads ----------------------------------------------------------------------

    def _spawn(self) -> None:
        self.threads += 1
        if self.runner is not None:
            self.runner.spawn(self._loop)
        else:
            threading.Thread(target=self._loop, name="dista-runner", daemon=True).start()

    def _loop(self) -> None:
        state = self._current
        state.runner = True
        raise_in: Interrupter
        if self.runner is not None:
            raise_in = self.runner.interrupter()
        else:
            raise_in = partial(_raise_in, threading.get_ident())
        while True:
            try:
                if not self._run_next(state, raise_in):
                    return
            except KeyboardInterrupt:
                continue  # an interrupt that landed after its task had ended

    def _run_next(self, state: _Current, raise_in: Interrupter) -> bool:
        with self.lock:
            if self.threads - self.blocked > self.base:
                self.threads -= 1  # a spare started while a task was blocked
                return False
        oid = self._queue.get()
        if oid is None:
            with self.lock:
                self.threads -= 1
            return False
        with self.lock:
            item = self._queued.pop(oid, None)
            if item is None:
                return True  # withdrawn before it started
            self._running[oid] = (raise_in, state.wake)
            state.oid = oid
        task, call = item
        del item
        outcome: Outcome
        try:
            outcome = run_call(task, call, self.policy)
        except BaseException:  # an interrupt outside the task's own code
            at = now()
            outcome = (oid, None, _CANCELLED, at, at)
        del task, call  # the argument goes now, not when the next task comes
        interrupted = self._finish(oid, raise_in, state)
        self.finished(outcome)
        if interrupted:
            _real_sleep(_AFTER_INTERRUPT_S)
        return True

    def _finish(self, oid: int, raise_in: Interrupter, state: _Current) -> bool:
        """``oid``'s task ended on this thread; whether it was interrupted."""
        while True:
            try:
                with self.lock:
                    self._running.pop(oid, None)
                    state.oid = 0
                    interrupted = state.wake.is_set()
                    if interrupted:
                        raise_in(None)  # clear an interrupt that has not landed
                        state.wake.clear()
                return interrupted
            except KeyboardInterrupt:
                continue


def _raise_in(ident: int, exception: type[BaseException] | None) -> None:
    """Raise ``exception`` in thread ``ident`` at its next instruction (None: cancel that)."""
    arg = ctypes.py_object(exception) if exception is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), arg)


_sleepers: list[Runners] = []


def _install_sleep(runners: Runners) -> None:
    """Make ``time.sleep`` in this worker process cut short for an interrupted task."""
    _sleepers.append(runners)
    if time.sleep is not _sleep:
        time.sleep = _sleep


def _sleep(seconds: float | SupportsIndex) -> None:
    for runners in _sleepers:
        if runners.current():
            runners.sleep(float(seconds))
            return
    _real_sleep(seconds)
