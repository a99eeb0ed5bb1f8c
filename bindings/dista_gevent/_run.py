"""Waiting on gevent: a greenlet's wait for a runtime `Latch` (`wait`), a role's main
(`run`), the hub that serves blocking callers (`background`), and `patch`."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import TypeVar

import gevent
from gevent import monkey
from gevent.hub import get_hub

from dista_runtime.binding import Latch, LoopThread, Start, Stop

from ._loop import GeventLoop, patched

__all__ = ["SharedHub", "background", "patch", "run", "wait"]

T = TypeVar("T")


def wait(latch: Latch[T], timeout: float | None = None) -> T:
    """``latch``'s result; only the calling greenlet waits, the hub runs on (TimeoutError
    after ``timeout`` seconds). The latch may be settled from any thread."""
    if not latch.done():
        hub = get_hub()
        # An async watcher: woken from any thread, and active while we wait, so the hub
        # never concludes that nothing can wake this greenlet (gevent's LoopExit). Told
        # from the hub, once the wait has started it: a send before that would be lost.
        watcher = hub.loop.async_()
        hub.loop.run_callback(latch.add_callback, lambda _: watcher.send())
        with gevent.Timeout(timeout, False):
            hub.wait(watcher)
        if not latch.done():
            raise TimeoutError(f"not settled within {timeout} s")
    return latch.result()


def run(start: Start[T], stop: Stop | None = None, *, loop: str = "gevent") -> T:
    """A role's main on this thread's hub: until the latch ``start`` gives is settled.
    SIGINT and SIGTERM call ``stop`` in a greenlet, with the signal's number (without it, Ctrl-C raises
    KeyboardInterrupt). ``loop`` is the name it was chosen by: always gevent here."""
    signals = (signal.SIGINT, signal.SIGTERM) if stop is not None else ()
    handlers = [gevent.signal_handler(s, stop, s) for s in signals]
    try:
        return wait(start(GeventLoop()))
    finally:
        for handler in handlers:
            handler.cancel()


class SharedHub:
    """The hub the caller's greenlets share, serving them (a monkey-patched process: the
    runtime's waits cooperate). `stop` leaves the hub running: it is the caller's."""

    def __init__(self) -> None:
        self.loop: GeventLoop = GeventLoop()

    def stop(self) -> None:
        self.loop.closed = True

    def call_blocking(self, call: Callable[[], object]) -> None:
        """Run ``call`` where it may wait: a signal handler runs on the hub, which may not
        (gevent's BlockingSwitchOutError), so there in a greenlet of its own."""
        if gevent.getcurrent() is get_hub():
            gevent.spawn(call)
        else:
            call()


def background(*, loop: str = "gevent") -> SharedHub | LoopThread[GeventLoop]:
    """The hub serving blocking callers (``loop``: the name it was chosen by): the caller's
    in a monkey-patched process (whose waits cooperate), else a hub of its own on a thread
    (an unpatched process's waits would block the caller's hub)."""
    return SharedHub() if patched() else LoopThread(lambda started: GeventLoop().serve(started))


def patch() -> None:
    """Monkey-patch this process, as gunicorn's gevent worker does (``dista worker
    --greenlets`` does it first thing): its plain tasks then run in greenlets."""
    monkey.patch_all()
