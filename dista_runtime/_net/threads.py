"""A loop on a daemon thread of its own, serving blocking callers (`Backend.background`
for `dista.init`): start the thread, wait until its loop is ready, and on `LoopThread.stop`
end the loop from its own thread and join it. What runs the loop is the binding's
(``serve``); the rest is this module's, once for every binding.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from .contract import Loop
from .latch import Latch

__all__ = ["LoopThread", "StoppableLoop"]


class StoppableLoop(Loop, Protocol):
    """A `Loop` that a call on it can end (its ``serve`` then returns)."""

    def stop(self) -> None: ...


L = TypeVar("L", bound=StoppableLoop)


class LoopThread(Generic[L]):
    """``serve`` run on a daemon thread named ``name``: it makes the loop there, settles
    the latch it is given with it once ready (`loop`), and returns once the loop's ``stop``
    has ended it. If it fails before that, the constructor raises its error."""

    def __init__(self, serve: Callable[[Latch[L]], object], name: str = "dista-io") -> None:
        started: Latch[L] = Latch()

        def main() -> None:
            try:
                serve(started)
            except BaseException as e:
                started.fail(e)  # it could not start (ignored once it has)
                raise

        self._thread = threading.Thread(target=main, name=name, daemon=True)
        self._thread.start()
        self.loop: L = started.wait()
        self._stopped = False

    def call_blocking(self, call: Callable[[], object]) -> None:
        """Run ``call`` here: the loop is on a thread of its own, so this one may block."""
        call()

    def stop(self) -> None:
        """End the loop and its thread (waiting for it a few seconds at most); once."""
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(RuntimeError):  # it has ended already
            self.loop.call_soon_threadsafe(self.loop.stop)  # after every call made before
        self._thread.join(5.0)
