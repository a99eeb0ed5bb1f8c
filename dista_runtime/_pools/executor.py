"""`dista.Executor`: `concurrent.futures.Executor` over a Dista cluster.

It is a drop-in for `ProcessPoolExecutor` where a program only submits, maps and waits:
its futures are `concurrent.futures.Future`s, so `wait`, `as_completed`,
`add_done_callback`, `asyncio.wrap_future` and `loop.run_in_executor` work as they do
with the standard executors. docs/executor.md lists, behaviour by behaviour, where it
differs from `ProcessPoolExecutor` and why; in short: any picklable callable runs (a
lambda, a closure, a function of ``__main__``: they travel by value), ``cancel()`` also
stops a task that is already running, and the cluster may be another machine's.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ParamSpec, TypeVar

from .._api.cluster import Cluster
from .futures import DistaFuture
from .lease import acquire
from .remote import chunk_task, make_setup
from .runner import Runner, batched

__all__ = ["Executor"]

P = ParamSpec("P")
T = TypeVar("T")


class Executor(concurrent.futures.Executor):
    """Run calls on a Dista cluster, with the interface of `ProcessPoolExecutor`.

    ``Executor()`` starts a local cluster of ``max_workers`` worker processes (default: one
    per core) and stops it at `shutdown`, as `ProcessPoolExecutor()` does its processes.
    If this process has already joined a cluster (``dista.init()`` earlier, or another
    executor or pool running), it runs there instead, and ``max_workers`` is ignored.
    ``Executor("host:port")`` joins the cluster at that address (leaving it at
    `shutdown`); ``Executor(cluster=c)`` runs on the cluster ``c`` this process joined,
    and never stops it. ``Executor(4)`` is ``Executor(max_workers=4)``, as with
    `ProcessPoolExecutor`.

    ``initializer(*initargs)`` runs in each worker process before the first of this
    executor's tasks that it runs (`dista_runtime._pools.remote` says how).
    ``max_tasks_per_child`` is not supported: workers are shared and long-lived; a value
    warns and is ignored.
    """

    def __init__(
        self,
        address: str | int | None = None,
        *,
        cluster: Cluster | None = None,
        max_workers: int | None = None,
        initializer: Callable[..., object] | None = None,
        initargs: Iterable[Any] = (),
        max_tasks_per_child: int | None = None,
    ) -> None:
        if isinstance(address, int):
            if max_workers is not None:
                raise TypeError("max_workers given twice (positionally and by name)")
            address, max_workers = None, address
        if max_workers is not None and max_workers <= 0:
            raise ValueError("max_workers must be greater than 0")
        if address is not None and cluster is not None:
            raise TypeError("give an address or a cluster, not both")
        if max_tasks_per_child is not None:
            warnings.warn(
                "dista.Executor does not support max_tasks_per_child: its workers are "
                "shared and long-lived; the value is ignored",
                RuntimeWarning,
                stacklevel=2,
            )
        setup = make_setup(f"executor-{uuid.uuid4().hex}", initializer, initargs)
        self._runner = Runner(acquire(address, cluster, max_workers), setup)
        self._shutdown = False
        self._shutdown_lock = threading.Lock()

    def __repr__(self) -> str:
        state = "shut down" if self._shutdown else "running"
        return f"<dista.Executor {state}, {len(self._runner.pending())} pending>"

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> DistaFuture[T]:
        """Run ``fn(*args, **kwargs)`` as a task; its future at once.

        Refs among the arguments (at any depth) are read on the worker, as with a task's
        ``.remote``. Raises `TypeError` at once if ``fn`` or an argument cannot be pickled
        (`ProcessPoolExecutor` sets that error on the future instead), and `RuntimeError`
        after `shutdown`.
        """
        with self._shutdown_lock:
            self._check_open()
            return self._runner.call(fn, args, kwargs)

    def map(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
    ) -> Iterator[T]:
        """``fn(*args)`` for each ``args`` of ``zip(*iterables)``; the results in order.

        As `ProcessPoolExecutor.map`: the iterables are read and every call submitted
        now, in chunks of ``chunksize`` calls that each run as one task; the results are
        yielded in order as they arrive. ``timeout`` (seconds, from this call) raises
        `TimeoutError` from the iteration; an error raised by a call is raised there too,
        at its place. Leaving the iteration early cancels the calls not yet read.
        """
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        end = None if timeout is None else timeout + time.monotonic()
        runner = self._runner
        futures: list[DistaFuture[Any]] = []
        # Not armed: only the iterator reads them (it settles each as it reads it, with one
        # thread hand-off less), and `shutdown` arms what it must wait for.
        if chunksize == 1:
            for args in zip(*iterables, strict=False):
                with self._shutdown_lock:
                    self._check_open()
                    futures.append(runner.call(fn, args, {}, armed=False))
            return _results(futures, end, chunked=False)
        star = len(iterables) != 1  # one iterable: its items as they are, not 1-tuples
        task = chunk_task(fn, runner.setup, star)
        rows = zip(*iterables, strict=False) if star else iterables[0]
        for chunk in batched(rows, chunksize):
            with self._shutdown_lock:
                self._check_open()
                futures.append(runner.chunk(task, chunk, armed=False))
        return _results(futures, end, chunked=True)

    def _check_open(self) -> None:
        if self._shutdown:
            raise RuntimeError("cannot schedule new futures after shutdown")

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking calls. ``cancel_futures`` cancels every call not finished, running
        ones included (`ProcessPoolExecutor` cancels only those not started). ``wait``
        returns once every other call is done; either way, the cluster this executor
        started (if no other executor or pool still uses it) stops once they are."""
        with self._shutdown_lock:
            first = not self._shutdown
            self._shutdown = True
        if cancel_futures:
            self._runner.cancel_all()
        if wait:
            self._runner.finish()
        elif first:
            # As the standard executors: the calls still run, and the interpreter waits for
            # them at exit (this thread is not a daemon), then the cluster stops.
            threading.Thread(target=self._runner.finish, name="dista-executor-shutdown").start()


def _results(futures: list[DistaFuture[Any]], end: float | None, chunked: bool) -> Iterator[Any]:
    """The values of ``futures`` in order (each a list of values if ``chunked``); the ones
    not read are cancelled when the iteration stops, whatever stops it."""
    try:
        futures.reverse()  # pop from the end: each future is let go of once read
        while futures:
            future = futures.pop()
            try:
                value = future._result_here(None if end is None else end - time.monotonic())
            finally:
                future.cancel()  # the standard library's `_result_or_cancel`
            del future
            if chunked:
                yield from value
            else:
                yield value
    finally:
        for future in futures:
            future.cancel()
