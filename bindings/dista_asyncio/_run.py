"""Waiting on asyncio: a role's main (`run`), a loop for blocking callers (`LoopThread`),
and a coroutine's wait for a runtime `Latch` (what ``await ref`` does on asyncio)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Final, TypeVar

from dista_runtime.binding import Latch, Start, Stop
from dista_runtime.binding import LoopThread as _RuntimeLoopThread

from ._loop import AsyncioLoop, new_event_loop

__all__ = ["LoopThread", "background", "run", "wait"]

T = TypeVar("T")


async def wait(latch: Latch[T], timeout: float | None = None) -> T:
    """``latch``'s result, without blocking the running loop (TimeoutError after
    ``timeout`` seconds; a cancelled wait leaves the latch as it is)."""
    if not latch.done():
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        latch.notify(loop.call_soon_threadsafe, lambda: _wake(future))
        await asyncio.wait_for(future, timeout)
    return latch.result()


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def run(start: Start[T], stop: Stop | None = None, *, loop: str = "asyncio") -> T:
    """A role's main: a new loop (uvloop when installed) runs until the latch ``start``
    gives is settled; SIGINT and SIGTERM call ``stop`` on it with the signal's number
    (without: KeyboardInterrupt).
    ``loop`` is the name it was chosen by (`dista_runtime.loops`): always asyncio here."""
    running = new_event_loop()

    async def main() -> T:
        if stop is not None:
            for sig in (signal.SIGINT, signal.SIGTERM):
                running.add_signal_handler(sig, stop, sig)
        return await wait(start(AsyncioLoop(running)))

    try:
        return running.run_until_complete(main())
    finally:
        try:
            _cancel_left(running)
        finally:
            running.close()


#: How long the tasks a role left may take to end once cancelled.
_CANCEL_S: Final = 1.0


def _cancel_left(running: asyncio.AbstractEventLoop) -> None:
    """Cancel what a role left running when it ended (a dial still in its handshake: a
    worker that gave up on its head had just started one for its tasks' session), and let
    it end, as `asyncio.run` does: a task closed with its loop says "Task was destroyed but
    it is pending!", and its transport's close raises "Event loop is closed"."""
    left = asyncio.all_tasks(running)
    if not left:
        return
    for task in left:
        task.cancel()
    # Bounded: a task that ignores its cancellation must not keep the process.
    running.run_until_complete(asyncio.wait(left, timeout=_CANCEL_S))


class _Served(AsyncioLoop):
    """An `AsyncioLoop` that a `LoopThread` serves: `stop` ends its ``run_forever``."""

    def stop(self) -> None:
        self.loop.stop()


def _serve(started: Latch[_Served]) -> None:
    """Run a new loop on this thread (a `LoopThread`'s) until it is stopped, then cancel
    what the engines left (a connection accepted in the last turn, a dial in its
    handshake) and close it, here: from the thread that stops it, which may be inside
    the caller's own running loop (``dista.init()`` in ``asyncio.run``), asyncio refuses
    to run this one, and the coroutine handed to it was never awaited."""
    running = new_event_loop()
    asyncio.set_event_loop(running)
    started.set(_Served(running))
    try:
        running.run_forever()
        with contextlib.suppress(Exception):
            _cancel_left(running)
            for _ in range(2):  # the transports' last callbacks
                running.run_until_complete(asyncio.sleep(0))
    finally:
        running.close()


class LoopThread(_RuntimeLoopThread[_Served]):
    """A loop on a daemon thread of its own, serving blocking callers (`dista.init`)."""

    def __init__(self, name: str = "dista-io") -> None:
        super().__init__(_serve, name)


def background(*, loop: str = "asyncio") -> LoopThread:
    """A loop thread for blocking callers (``loop``: the name it was chosen by)."""
    return LoopThread()
