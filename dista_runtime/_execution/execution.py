"""A worker's execution engine, for any loop: where each task runs, and how it comes back.

The `Worker` core decides what runs (`RunTask`) and what is taken back (`CancelTask`);
`Execution` carries that out with what the binding's loop offers (`dista_runtime._net.contract.Loop`:
call soon, call soon from another thread, start a coroutine, name the running one):

- plain tasks on runner threads (`dista_runtime._execution.runners`: withdrawn before they start,
  interrupted when cancelled, lending their slot while they block on other results),
  except those learnt to be short and self-contained, which run inline on the loop
  (`dista_runtime._execution.inline`);
- ``async def`` tasks as coroutines on the loop, lending their slot while they await a ref;
- finished tasks handed back to the loop in batches: one wake-up for however many finished;
- an actor's work on a thread of its own, in order (`dista_runtime._execution.worker_actors`).

A loop may say how runners start (its optional ``runner``, a `Runner`: gevent's greenlets in
a monkey-patched process); such runners may wait cooperatively, so no task runs inline on
that loop (it would switch away in the middle of the loop's work). A loop may also run
coroutines off its own thread (gevent runs them on an asyncio loop in a thread): a
coroutine's await then reaches the core through `call_soon_threadsafe`, as runners do.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterator

import dista_proto as dp

from .._clock import now
from .._net.contract import Loop, TaskHandle
from .._values.errors import message_from_exception
from .call import Call, Calls, Outcome, encode_results, run_call
from .inline import InlinePolicy, RunOnThread
from .runners import Runner, Runners
from .worker_actors import ActorHost

__all__ = ["Execution", "Runner"]


class Execution:
    """Runs a worker core's tasks on ``loop``; see the module docstring. Its engine routes
    `RunTask` to `run` and `CancelTask` to `cancel`; ``transmit`` carries out the core's
    decisions after every input this gives it (a task done, withdrawn, blocked)."""

    def __init__(
        self, core: dp.Worker, threads: int, loop: Loop, transmit: Callable[[], None]
    ) -> None:
        self.core = core
        self._loop = loop
        self._transmit = transmit
        self._current_task = loop.current_task
        self.calls = Calls()
        self.inline = InlinePolicy()
        runner: Runner | None = getattr(loop, "runner", None)
        self._may_inline = runner is None
        self.runners = Runners(threads, self.inline, self.finished, self.blocked, runner)
        self._done: deque[Outcome] = deque()
        self._drain_scheduled = False
        self._loop_thread = threading.get_ident()  # made on its loop
        self._tasks: dict[int, TaskHandle] = {}  # async tasks by first result ID
        self._oids: dict[object, int] = {}  # the same, by task (read from any thread)
        self._awaiting: dict[int, int] = {}  # async task -> refs it awaits now (slot lent)
        self.actors = ActorHost(core, loop, transmit)

    def run(self, decision: dp.RunTask) -> None:
        """Run a task where it should run (see the module docstring)."""
        try:
            call = self.calls.prepare(decision)
        except Exception as e:
            at = now()
            self.finished((decision.object_id, None, message_from_exception(e), at, at))
            return
        if call.is_async:
            oid = decision.object_id
            task = self._loop.create_task(self._run_async(decision, call))
            self._tasks[oid] = task
            self._oids[task] = oid
            task.add_done_callback(lambda _: self._forget(oid))
        elif self._may_inline and self.inline.may_inline(call.function):
            try:
                outcome = run_call(decision, call, self.inline, inline=True)
            except RunOnThread:
                self.runners.submit(decision, call)
                return
            self._done.append(outcome)
            if not self._drain_scheduled:
                self._drain_scheduled = True
                self._loop.call_soon(self._drain)
        else:
            self.runners.submit(decision, call)

    def _forget(self, oid: int) -> None:
        task = self._tasks.pop(oid, None)
        if task is not None:
            self._oids.pop(task, None)

    def cancel(self, decision: dp.CancelTask) -> None:
        """The head wants a task back: drop it if it has not started, else interrupt it
        if it was cancelled (a withdrawn task that started just runs on)."""
        oid = decision.object_id
        if self.runners.withdraw(oid):
            self.core.task_withdrawn(oid, now())
            self._transmit()
        elif not decision.withdraw:
            # After the rest of this read's decisions: an interrupted runner takes the next
            # queued task at once, and cancels of those may be right behind this one.
            self._loop.call_soon(self._interrupt, oid)

    def _interrupt(self, oid: int) -> None:
        task = self._tasks.get(oid)
        if task is not None:
            task.cancel()
        else:
            self.runners.interrupt(oid)

    @contextlib.contextmanager
    def awaiting(self) -> Iterator[None]:
        """Around an ``async def`` task's ``await`` of a ref (where the loop runs coroutines):
        lend its slot, as a runner thread's blocking get does."""
        task = self._current_task()
        oid = self._oids.get(task, 0) if task is not None else 0
        if not oid:
            yield
            return
        mark = self._mark_blocked if threading.get_ident() == self._loop_thread else self.blocked
        depth = self._awaiting.get(oid, 0)
        self._awaiting[oid] = depth + 1
        if not depth:
            mark(oid, True)
        try:
            yield
        finally:
            depth = self._awaiting.pop(oid) - 1
            if depth:
                self._awaiting[oid] = depth
            else:
                mark(oid, False)

    def blocked(self, oid: int, blocked: bool) -> None:
        """A runner's task blocked on other tasks' results, or resumed (any thread)."""
        try:
            self._loop.call_soon_threadsafe(self._mark_blocked, oid, blocked)
        except RuntimeError:
            pass  # the loop is gone: the worker is exiting

    def _mark_blocked(self, oid: int, blocked: bool) -> None:
        if blocked:
            self.core.task_blocked(oid, now())
        else:
            self.core.task_resumed(oid, now())
        self._transmit()

    async def _run_async(self, task: dp.RunTask, call: Call) -> None:
        started = now()
        try:
            values = encode_results(await call.run(), task.results)
        except BaseException as e:  # cancelled, SystemExit...: this task's failure only
            error = message_from_exception(e)
            self.finished((task.object_id, None, error, started, now()))
        else:
            self.finished((task.object_id, values, "", started, now()))

    def finished(self, outcome: Outcome) -> None:
        """A task ended (any thread): queue it for the loop, waking the loop once a batch."""
        self._done.append(outcome)
        if not self._drain_scheduled:
            self._drain_scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:
                pass  # the loop is gone: the worker is exiting

    def _drain(self) -> None:
        self._drain_scheduled = False
        core = self.core
        done = self._done
        while done:
            oid, values, error, started, ended = done.popleft()
            if values is None:
                core.task_failed(oid, error, started, ended)
            else:
                core.task_done(oid, values, started, ended)
        self._transmit()
