"""Waiting on anyio: a coroutine's wait for a runtime `Latch` (what ``await ref`` does on
trio), a role's main (`run`), and a loop for blocking callers (`LoopThread`).

The loop name the runtime chose us by picks the backend: "anyio" is anyio on asyncio (on
uvloop when it is installed), "trio" is anyio on trio.
"""

from __future__ import annotations

import importlib.util
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from dista_runtime.binding import Latch, Loop

from ._loop import AnyioLoop, soon_threadsafe

__all__ = ["LoopThread", "background", "backend", "run", "wait"]

T = TypeVar("T")
#: How long `LoopThread.stop` waits for its thread.
_STOP_S = 5.0


def backend(loop: str) -> tuple[str, dict[str, Any]]:
    """anyio's backend and its options for the loop name ``loop``."""
    if loop == "trio":
        return "trio", {}
    return "asyncio", {"use_uvloop": importlib.util.find_spec("uvloop") is not None}


async def settled(latch: Latch[Any], timeout: float | None = None) -> None:
    """Until ``latch`` is settled, without blocking the running loop (either backend):
    TimeoutError after ``timeout`` seconds; a cancelled wait leaves the latch as it is."""
    if latch.done():
        return
    event = anyio.Event()
    call_soon = soon_threadsafe()  # it may be settled on any thread

    def wake(_: object) -> None:
        try:
            call_soon(event.set)
        except RuntimeError:
            pass  # this loop has ended: nobody waits any more

    latch.add_callback(wake)
    with anyio.fail_after(timeout):
        await event.wait()


async def wait(latch: Latch[T], timeout: float | None = None) -> T:
    """``latch``'s result, waited for on the running anyio loop without blocking it
    (TimeoutError after ``timeout`` seconds)."""
    await settled(latch, timeout)
    return latch.result()


def run(
    start: Callable[[Loop], Latch[T]],
    stop: Callable[[], object] | None = None,
    *,
    loop: str = "anyio",
) -> T:
    """A role's main: a new loop of the backend ``loop`` names runs until the latch
    ``start`` gives is settled; SIGINT and SIGTERM call ``stop`` on it (without ``stop``,
    Ctrl-C raises KeyboardInterrupt)."""
    interrupted: list[int] = []

    async def main() -> Latch[T]:
        async with anyio.create_task_group() as group:
            running = AnyioLoop(group)

            def interrupt() -> None:
                interrupted.append(signal.SIGINT)
                running.stop()

            group.start_soon(_signals, stop or interrupt, stop is not None)
            try:
                latch = start(running)
            except Exception as e:  # noqa: BLE001  (raised as it is, not in a group)
                latch = Latch()
                latch.fail(e)
            await settled(latch)
            running.stop()
        return latch

    name, options = backend(loop)
    ended = anyio.run(main, backend=name, backend_options=options)
    if interrupted:
        raise KeyboardInterrupt
    return ended.result()


async def _signals(on_signal: Callable[[], object], terminate: bool) -> None:
    signals = (signal.SIGINT, signal.SIGTERM) if terminate else (signal.SIGINT,)
    with anyio.open_signal_receiver(*signals) as received:
        async for _ in received:
            on_signal()


class LoopThread:
    """A loop of the backend ``loop`` names, on a daemon thread, serving blocking callers
    (`dista.init`); ``loop`` is its `AnyioLoop`."""

    def __init__(self, loop: str = "anyio", name: str = "dista-io") -> None:
        started: Latch[AnyioLoop] = Latch()
        self._thread = threading.Thread(target=self._main, args=(loop, started), name=name)
        self._thread.daemon = True
        self._thread.start()
        self.loop = started.wait()

    @staticmethod
    def _main(loop: str, started: Latch[AnyioLoop]) -> None:
        async def serve() -> None:
            async with anyio.create_task_group() as group:
                started.set(AnyioLoop(group))
                await anyio.sleep_forever()

        name, options = backend(loop)
        try:
            anyio.run(serve, backend=name, backend_options=options)
        except BaseException as e:
            started.fail(e)  # ignored once it started
            raise

    def stop(self) -> None:
        """End the loop and its thread (waiting for it at most a few seconds)."""
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:
            return  # it has ended already
        if self._thread is not threading.current_thread():
            self._thread.join(_STOP_S)


def background(*, loop: str = "anyio") -> LoopThread:
    """A loop thread for blocking callers, of the backend ``loop`` names."""
    return LoopThread(loop)
