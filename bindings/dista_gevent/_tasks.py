"""Where a gevent worker runs plain tasks in a monkey-patched process: greenlets.

Each runner is a greenlet (`GreenletRunner`, the runtime's
`dista_runtime._execution.execution.Runner`). Its waits (a socket, ``time.sleep``, a nested
``ref.get()``) cooperate, so the worker serves other tasks meanwhile. A cancel throws
KeyboardInterrupt into it at its next wait: a greenlet that computes without waiting cannot
be interrupted (nor does it let anything else run). Without patching, runners are the
runtime's threads, interrupted anywhere, and CPU-bound code belongs there. (``async def``
tasks run on an asyncio loop in a thread: the runtime's `Coroutines`.)
"""

from __future__ import annotations

from collections.abc import Callable

import gevent
from gevent.hub import Hub

__all__ = ["GreenletRunner"]


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
