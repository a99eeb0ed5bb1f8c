"""Joining a cluster from gevent code: ``with dista_gevent.connect("HOST:PORT"):``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
    try:
        driver, where = _on(served.loop, lambda: begin(served.loop, address, timeout))
        try:
            driver.welcomed.wait()  # the driver's own timer ends it after ``timeout``
        except BaseException:
            _on(served.loop, driver.close)
            raise
    except BaseException:
        served.stop()
        raise
    cluster = joined(driver, where)
    try:
        yield cluster
    finally:
        cluster.shutdown()
        served.stop()
