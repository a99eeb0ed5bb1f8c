"""Joining a cluster from inside the caller's own loop: what every binding's
`Backend.connect` does, written once.

- `joining`: for an async loop (asyncio, anyio on asyncio or trio): a driver on the
  running loop, welcomed while the caller awaits (the binding's ``wait``), then installed
  as this process's cluster until the ``async with`` ends.
- `joining_on`: for a loop serving blocking or cooperative callers (gevent's hub, shared
  by the caller's greenlets or on a thread of its own): the same, from the caller's side.

Either way a driver whose welcome fails (or whose wait is cancelled) is closed, and the
cluster is shut down when the block ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from typing import TypeVar

from .._net.contract import Background, Loop
from .._net.latch import Latch
from .driver import DriverHost
from .join import Cluster, begin, joined

__all__ = ["joining", "joining_on"]

T = TypeVar("T")


@asynccontextmanager
async def joining(
    loop: Loop,
    address: str | None,
    timeout: float,
    cancel_remote: bool,
    wait: Callable[[Latch[None]], Awaitable[None]],
) -> AsyncIterator[Cluster]:
    """``async with`` a driver on ``loop`` (the running one) joined to the head at
    ``address`` (None: ``DISTA_ADDRESS``): ``await ref`` needs no thread."""
    driver, where = begin(loop, address, timeout, cancel_remote)
    try:
        await wait(driver.welcomed)
    except BaseException:
        driver.close()
        raise
    cluster = joined(driver, where)
    try:
        yield cluster
    finally:
        cluster.shutdown()


@contextmanager
def joining_on(served: Background, address: str | None, timeout: float) -> Iterator[Cluster]:
    """``with`` a driver on ``served`` joined to the head at ``address``; on leaving, the
    cluster is shut down, the driver closed and ``served`` stopped (in that order)."""
    with ExitStack() as undo:  # in reverse: leave the cluster, close the driver, the loop
        undo.callback(served.stop)
        driver, where = _on(served.loop, lambda: begin(served.loop, address, timeout))
        undo.callback(served.loop.call_soon_threadsafe, driver.close)
        driver.welcomed.wait()  # the driver's own timer fails it after ``timeout``
        cluster = joined(driver, where)
        undo.callback(cluster.shutdown)
        yield cluster


def _on(loop: Loop, call: Callable[[], tuple[DriverHost, T]]) -> tuple[DriverHost, T]:
    """``call()`` on ``loop`` (the runtime's roles live there), waited for here."""
    done: Latch[tuple[DriverHost, T]] = Latch()

    def run() -> None:
        try:
            done.set(call())
        except Exception as e:  # noqa: BLE001  (raised in the caller, as it is)
            done.fail(e)

    loop.call_soon_threadsafe(run)
    return done.wait()
