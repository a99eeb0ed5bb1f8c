"""Where a gevent worker runs user code: greenlet runners, and coroutines on asyncio.

- Plain tasks, in a monkey-patched process: each runner is a greenlet (`GreenletRunner`,
  the runtime's `dista_runtime._execution.execution.Runner`). Its waits (a socket, ``time.sleep``, a
  nested ``ref.get()``) cooperate, so the worker serves other tasks meanwhile. A cancel
  throws KeyboardInterrupt into it at its next wait: a greenlet that computes without
  waiting cannot be interrupted (nor does it let anything else run). Without patching,
  runners are the runtime's threads, interrupted anywhere, and CPU-bound code belongs there.
- ``async def`` tasks: a coroutine needs an asyncio loop (``await asyncio.sleep``, ``await
  ref``), which cannot share a thread with the hub. `Coroutines` runs one asyncio loop in a
  thread of gevent's threadpool (a real thread, patched or not) for all of them; their
  handles (`CoroutineTask`) are made, cancelled and told of the end on the hub.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import gevent
from gevent import monkey
from gevent.hub import Hub

if TYPE_CHECKING:
    from ._loop import GeventLoop

__all__ = ["CoroutineTask", "Coroutines", "GreenletRunner"]


class GreenletRunner:
    """A worker's runners as greenlets on ``hub`` (`dista_runtime._execution.execution.Runner`)."""

    def __init__(self, hub: Hub) -> None:
        self._hub = hub

    def spawn(self, target: Callable[[], object]) -> None:
        gevent.spawn(target)

    def interrupter(self) -> Callable[[type[BaseException] | None], object]:
        """How to interrupt the calling greenlet: a throw on the hub's next turn, unless
        forgotten first (its task ended)."""
        runner = gevent.getcurrent()
        pending: list[type[BaseException]] = []

        def throw() -> None:
            if pending and not runner.dead:
                runner.throw(pending.pop())

        def interrupt(exception: type[BaseException] | None) -> None:
            if exception is None:
                pending.clear()
            elif not pending:
                pending.append(exception)
                self._hub.loop.run_callback(throw)

        return interrupt


class Coroutines:
    """One asyncio loop, in a thread of ``loop``'s hub's threadpool, for a worker's
    ``async def`` tasks; `handles` maps its tasks to theirs (on its thread only)."""

    def __init__(self, loop: GeventLoop) -> None:
        self.loop = loop
        # asyncio's own selector, not gevent's: this loop blocks its thread, not a hub.
        self.aloop = aloop = asyncio.SelectorEventLoop(
            monkey.get_original("selectors", "DefaultSelector")()
        )
        self.handles: dict[asyncio.Task[Any], CoroutineTask] = {}
        # Run until `GeventLoop.close` stops it, then closed: its thread ends with its hub.
        loop.hub.threadpool.spawn(lambda: [f() for f in (aloop.run_forever, aloop.close)])

    def call(self, callback: Callable[[], object]) -> None:
        """``callback()`` on asyncio's thread, after the hub's current turn (by then the
        runtime holds the handle `GeventLoop.create_task` returned), in order."""
        self.loop.call_soon(self.aloop.call_soon_threadsafe, callback)

    def current(self) -> CoroutineTask | None:
        """The handle of the coroutine running now (on asyncio's thread), or None."""
        try:
            task = asyncio.current_task()
        except RuntimeError:  # not on asyncio's thread
            return None
        return self.handles.get(task) if task is not None else None


class CoroutineTask:
    """A coroutine run by `Coroutines` (a `dista_runtime._net.loop.TaskHandle`, for the hub)."""

    def __init__(self, owner: Coroutines, coro: Coroutine[Any, Any, None]) -> None:
        self._owner = owner
        owner.call(lambda: self._start(coro))

    def cancel(self) -> None:
        # Behind its start (the same way), and behind its first step on asyncio's loop: a
        # coroutine cancelled before it runs never gets to say it ended.
        self._owner.call(lambda: self._owner.aloop.call_soon(self._task.cancel))

    def add_done_callback(self, callback: Callable[[Any], object], /) -> None:
        # Kept by its asyncio task (after its start, the same way), which calls it once done
        # (soon, if it is done already): then it is called on the hub.
        done = lambda _: self._owner.loop.call_soon_threadsafe(callback, self)
        self._owner.call(lambda: self._task.add_done_callback(done))

    def _start(self, coro: Coroutine[Any, Any, None]) -> None:  # on asyncio's thread
        self._task = self._owner.aloop.create_task(coro)
        self._owner.handles[self._task] = self
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:  # on asyncio's thread
        del self._owner.handles[task]
