"""A worker's ``async def`` tasks for a loop that cannot run coroutines itself (gevent's
hub): one asyncio loop, on a thread of the binding's choosing, runs them all.

A coroutine needs an asyncio loop (``await asyncio.sleep``, ``await ref``), which cannot
share a thread with a hub. `Coroutines` runs one, with the selector it is given (the
standard library's own in a monkey-patched process: this loop blocks its thread, not a
hub), and its handles (`CoroutineTask`, a `dista_runtime._net.contract.TaskHandle`) are
made, cancelled and told of the end on the owning loop, as the runtime expects of
`Loop.create_task`.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine
from typing import Any

from .._net.contract import Loop

__all__ = ["CoroutineTask", "Coroutines"]


class Coroutines:
    """One asyncio loop, started by ``spawn_thread`` (a thread of a pool, say), for the
    coroutines of ``loop``; `handles` maps its tasks to theirs (on its thread only)."""

    def __init__(
        self,
        loop: Loop,
        spawn_thread: Callable[[Callable[[], object]], object],
        selector: selectors.BaseSelector,
    ) -> None:
        self.loop = loop
        aloop = asyncio.SelectorEventLoop(selector)
        self.aloop: asyncio.SelectorEventLoop = aloop
        self.handles: dict[asyncio.Task[Any], CoroutineTask] = {}
        # Runs until `stop`, then is closed: its thread ends with the owning loop.
        spawn_thread(lambda: [f() for f in (aloop.run_forever, aloop.close)])

    def stop(self) -> None:
        """End asyncio's loop (and so its thread), from any thread."""
        self.aloop.call_soon_threadsafe(self.aloop.stop)

    def start(self, coro: Coroutine[Any, Any, None]) -> CoroutineTask:
        """``coro`` run on asyncio's loop (`Loop.create_task`), from the owning loop."""
        return CoroutineTask(self, coro)

    def call(self, callback: Callable[[], object]) -> None:
        """``callback()`` on asyncio's thread, after the owning loop's current turn (by
        then the runtime holds the handle `start` returned), in order."""
        self.loop.call_soon(self.aloop.call_soon_threadsafe, callback)

    def current(self) -> CoroutineTask | None:
        """The handle of the coroutine running now (on asyncio's thread), or None."""
        try:
            task = asyncio.current_task()
        except RuntimeError:  # not on asyncio's thread
            return None
        return self.handles.get(task) if task is not None else None


class CoroutineTask:
    """A coroutine run by `Coroutines` (a `dista_runtime._net.contract.TaskHandle`, for
    the owning loop)."""

    def __init__(self, owner: Coroutines, coro: Coroutine[Any, Any, None]) -> None:
        self._owner = owner
        owner.call(lambda: self._start(coro))

    def cancel(self) -> None:
        # Behind its start (the same way), and behind its first step on asyncio's loop: a
        # coroutine cancelled before it runs never gets to say it ended.
        self._owner.call(lambda: self._owner.aloop.call_soon(self._task.cancel))

    def add_done_callback(self, callback: Callable[[Any], object], /) -> None:
        # Kept by its asyncio task (behind its start, the same way), which calls it once
        # done, or soon if it is done already (a list of our own would miss that case);
        # the callback itself runs on the owning loop.
        done = lambda _: self._owner.loop.call_soon_threadsafe(callback, self)
        self._owner.call(lambda: self._task.add_done_callback(done))

    def _start(self, coro: Coroutine[Any, Any, None]) -> None:  # on asyncio's thread
        self._task = self._owner.aloop.create_task(coro)
        self._owner.handles[self._task] = self
        self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:  # on asyncio's thread
        del self._owner.handles[task]
