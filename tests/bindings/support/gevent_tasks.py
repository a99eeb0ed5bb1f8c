"""Tasks the gevent binding's tests run on workers (an importable module: known by name)."""

from __future__ import annotations

import asyncio
import threading
import time

import dista_runtime as dista


@dista.task
def runs_in() -> str:
    """ "greenlet" in a gevent greenlet (a ``--greenlets`` worker), else "thread"."""
    import gevent

    return "greenlet" if isinstance(gevent.getcurrent(), gevent.Greenlet) else "thread"


@dista.task
async def async_runs_in() -> tuple[str, bool]:
    """The running asyncio loop's thread name, and whether it is the process's main one."""
    await asyncio.sleep(0.01)
    return threading.current_thread().name, threading.current_thread() is threading.main_thread()


@dista.task
def cooperative_naps(count: int, seconds: float) -> float:
    """``count`` greenlets that each sleep ``seconds``, joined: how long it took (about
    ``seconds`` where ``time.sleep`` cooperates)."""
    import gevent

    start = time.monotonic()
    gevent.joinall([gevent.spawn(time.sleep, seconds) for _ in range(count)])
    return time.monotonic() - start
