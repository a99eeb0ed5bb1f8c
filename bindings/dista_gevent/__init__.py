"""dista_gevent: every Dista role on gevent's hub, greenlets and sockets.

In a monkey-patched process (``from gevent import monkey; monkey.patch_all()`` first, as
gunicorn's gevent worker does), join a cluster on the hub your greenlets share; a blocking
``ref.get()``, `dista.get`, `dista.wait` or `dista.as_completed` then suspends only the
greenlet that waits::

    with dista_gevent.connect("127.0.0.1:7420"):    # or dista.init(address, loop="gevent")
        value = add.remote(1, 2).get()

Patch before Dista is imported, as gevent asks of every library: the runtime makes some of
its locks at import, and a lock made before the patch would block the whole hub. Unpatched,
the same calls run Dista on a hub of its own, in a thread, and block the caller as they
would anywhere. Every role runs on gevent: ``dista head --loop gevent``, ``dista
worker --loop gevent``, ``dista status --loop gevent``...

Where a gevent worker runs tasks:

- ``dista worker --loop gevent``: plain tasks in the runtime's runner threads (real
  threads: CPU-bound code, interrupted anywhere by a cancel);
- ``dista worker --greenlets`` (implies ``--loop gevent``): the worker monkey-patches
  itself first (`patch`) and runs plain tasks in greenlets (``--threads`` of them), for
  cooperative code (sockets, ``time.sleep``, nested ``ref.get()`` suspend the task's
  greenlet only); a cancel interrupts a task at its next wait, and no task runs inline on
  the hub. The choice is the worker's, not a task's: one process is patched or not;
- ``async def`` tasks, either way: on one asyncio loop in a thread of gevent's threadpool.

The roles themselves are the runtime's; this adapts gevent's hub to its contract
(`dista_runtime.binding`): `GeventBackend` is what the runtime loads (``backend_class``),
`GeventLoop` its loop.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import ClassVar, TypeVar

from dista_runtime import Cluster
from dista_runtime.binding import Backend, Latch, Loop, LoopThread, Start, Stop

from . import _connect, _run
from ._connect import connect
from ._loop import GeventLoop, patched
from ._run import SharedHub, background, patch, run, wait

__all__ = ["GeventBackend", "GeventLoop", "background", "backend_class", "connect", "patch"]
__all__ += ["patched", "run", "wait"]

T = TypeVar("T")


class GeventBackend(Backend):
    """Dista on gevent: this package's functions, as `dista_runtime.loops` uses them
    (and `patch`, which ``dista worker --greenlets`` calls first)."""

    loop_type: ClassVar[type[Loop]] = GeventLoop

    @staticmethod
    def run(start: Start[T], stop: Stop | None = None, *, loop: str = "gevent") -> T:
        return _run.run(start, stop, loop=loop)

    @staticmethod
    def background(*, loop: str = "gevent") -> SharedHub | LoopThread[GeventLoop]:
        return _run.background(loop=loop)

    @staticmethod
    def wait(latch: Latch[T], timeout: float | None = None) -> T:
        return _run.wait(latch, timeout)

    @staticmethod
    def connect(
        address: str | None = None, *, timeout: float = 10.0
    ) -> AbstractContextManager[Cluster]:
        return _connect.connect(address, timeout=timeout)

    @staticmethod
    def patch() -> None:
        _run.patch()


backend_class = GeventBackend
