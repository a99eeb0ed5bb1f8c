"""Joining a cluster from gevent code: ``with dista_gevent.connect("HOST:PORT"):``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TypeVar

from dista_runtime.binding import Cluster, Latch, begin, joined

from ._loop import GeventLoop
from ._run import background

__all__ = ["connect"]

T = TypeVar("T")


def _on(loop: GeventLoop, call: Callable[[], T]) -> T:
    """``call()`` on ``loop``'s hub (the runtime's roles live there), waited for here."""
    done: Latch[T] = Latch()

    def run() -> None:
        try:
            done.set(call())
        except Exception as e:  # noqa: BLE001  (raised in the caller, as it is)
            done.fail(e)

    loop.call_soon_threadsafe(run)
    return done.wait()


@contextmanager
def connect(address: str | None = None, *, timeout: float = 10.0) -> Iterator[Cluster]:
    """``with dista_gevent.connect("HOST:PORT") as cluster:`` join the head there as this
    process's driver; ``address`` is what `dista.init` takes (None: ``DISTA_ADDRESS``).

    In a monkey-patched process the driver runs on the caller's hub and a blocking
    ``ref.get()`` (`dista.get`, `wait`, `as_completed`) suspends only its greenlet; in an
    unpatched one it runs on a hub of its own, in a thread.
    """
    served = background()
    with ExitStack() as undo:  # in reverse: leave the cluster, close the driver, the hub
        undo.callback(served.stop)
        driver, where = _on(served.loop, lambda: begin(served.loop, address, timeout))
        undo.callback(served.loop.call_soon_threadsafe, driver.close)
        driver.welcomed.wait()  # the driver's own timer fails it after ``timeout``
        cluster = joined(driver, where)
        undo.callback(cluster.shutdown)
        yield cluster
