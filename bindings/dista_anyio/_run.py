"""Waiting on anyio: a coroutine's wait for a runtime `Latch` (what ``await ref`` does on
trio), a role's main (`run`), and a loop for blocking callers (`LoopThread`).

The loop name the runtime chose us by picks the backend: "anyio" is anyio on asyncio,
"trio" is anyio on trio.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskStatus

from dista_runtime.binding import Latch, LoopThread, Start, Stop

from ._loop import AnyioLoop, soon_threadsafe

__all__ = ["background", "run", "run_on", "settled", "wait"]

T = TypeVar("T")


def run_on(loop: str, main: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run(main)`` on the backend the loop name ``loop`` gives."""
    return anyio.run(main, backend="trio" if loop == "trio" else "asyncio")


async def settled(latch: Latch[Any], timeout: float | None = None) -> None:
    """Until ``latch`` is settled (on any thread), without blocking the running loop:
    TimeoutError after ``timeout`` seconds; a cancelled wait leaves the latch as it is."""
    if not latch.done():
        event = anyio.Event()
        latch.notify(soon_threadsafe(), event.set)
        with anyio.fail_after(timeout):
            await event.wait()


async def wait(latch: Latch[T], timeout: float | None = None) -> T:
    """``latch``'s result, waited for on the running anyio loop (asyncio or trio) without
    blocking it (TimeoutError after ``timeout`` seconds)."""
    await settled(latch, timeout)
    return latch.result()


def run(start: Start[T], stop: Stop | None = None, *, loop: str = "anyio") -> T:
    """A role's main: a new loop of the backend ``loop`` names runs until the latch
    ``start`` gives is settled; SIGINT and SIGTERM call ``stop`` on it with the signal's
    number (without ``stop``,
    Ctrl-C raises KeyboardInterrupt)."""

    async def main() -> Latch[T]:
        latch: Latch[T] = Latch()  # the role's, once started
        async with anyio.create_task_group() as group:
            running = AnyioLoop(group)
            if threading.current_thread() is threading.main_thread():  # signals go there
                interrupt = stop or (lambda _: latch.fail(KeyboardInterrupt()))
                signals = (signal.SIGINT, signal.SIGTERM) if stop else (signal.SIGINT,)
                await group.start(_on_signals, interrupt, *signals)
            try:
                latch = start(running)
            except Exception as e:  # noqa: BLE001  (raised as it is below, not in a group)
                latch.fail(e)
            await settled(latch)
            running.stop()
        return latch

    return run_on(loop, main).result()


async def _on_signals(call: Any, *signals: signal.Signals, task_status: TaskStatus[None]) -> None:
    with anyio.open_signal_receiver(*signals) as received:
        task_status.started()  # the signals are ours from now on
        async for signum in received:
            call(signum)


def _serve(loop: str) -> Callable[[Latch[AnyioLoop]], None]:
    """What runs a `LoopThread`'s loop: a task group of the backend ``loop`` names."""

    async def main(started: Latch[AnyioLoop]) -> None:
        async with anyio.create_task_group() as group:
            started.set(AnyioLoop(group))
            await anyio.sleep_forever()

    return lambda started: run_on(loop, lambda: main(started))


def background(*, loop: str = "anyio") -> LoopThread[AnyioLoop]:
    """A loop thread for blocking callers, of the backend ``loop`` names."""
    return LoopThread(_serve(loop))
