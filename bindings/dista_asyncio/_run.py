"""Waiting on asyncio: a role's main (`run`), a loop for blocking callers (`LoopThread`),
and a coroutine's wait for a runtime `Latch` (what ``await ref`` does on asyncio)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable
from typing import Final, TypeVar

from dista_runtime.binding import Latch, Loop

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


def run(
    start: Callable[[Loop], Latch[T]],
    stop: Callable[[], object] | None = None,
    *,
    loop: str = "asyncio",
) -> T:
    """A role's main: a new loop (uvloop when installed) runs until the latch ``start``
    gives is settled; SIGINT and SIGTERM call ``stop`` on it (without: KeyboardInterrupt).
    ``loop`` is the name it was chosen by (`dista_runtime.loops`): always asyncio here."""
    running = new_event_loop()

    async def main() -> T:
        if stop is not None:
            for sig in (signal.SIGINT, signal.SIGTERM):
                running.add_signal_handler(sig, stop)
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


class LoopThread:
    """A loop on a daemon thread, serving blocking callers (`dista.init`)."""

    def __init__(self, name: str = "dista-io") -> None:
        self._loop = new_event_loop()
        self.loop = AsyncioLoop(self._loop)
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def stop(self) -> None:
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            # What the engines left (a connection accepted in the last turn, its transport
            # still to be made; a dial in its handshake) ends before the loop closes.
            with contextlib.suppress(Exception):
                _cancel_left(self._loop)
                for _ in range(2):
                    self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()


def background(*, loop: str = "asyncio") -> LoopThread:
    """A loop thread for blocking callers (``loop``: the name it was chosen by)."""
    return LoopThread()
