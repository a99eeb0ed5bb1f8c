"""`dista.Pool`: `multiprocessing.Pool`'s interface over a Dista cluster.

A script moves by changing its import: ``from dista_runtime import Pool`` instead of
``from multiprocessing import Pool``. The calls, their arguments, their results and
callbacks, ``close``/``join``/``terminate`` and the context manager (whose exit
terminates) behave as `multiprocessing`'s; docs/executor.md lists where they differ and
why. The largest difference is a gain: functions need not be importable by the workers (a
lambda or a closure travels by value), and the workers may be other machines'.
"""

from __future__ import annotations

import threading
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, Self, TypeVar

from .._api.cluster import Cluster
from .._api.objects import stats
from .futures import DistaFuture
from .lease import acquire
from .remote import chunk_task, make_setup
from .results import AsyncResult, IMapIterator, MapResult
from .runner import Runner, batched

__all__ = ["Pool"]

S = TypeVar("S")
T = TypeVar("T")

_RUN, _CLOSE, _TERMINATE = "RUN", "CLOSE", "TERMINATE"
#: Unfinished chunks per worker an `imap` keeps submitted ahead of the results.
_AHEAD = 4


class Pool:
    """A pool of worker processes, as `multiprocessing.Pool`, that are a Dista cluster's.

    ``Pool(processes)`` starts a local cluster of that many workers (default: one per
    core) unless this process has joined one already (``dista.init()``, or another pool or
    executor running), which it then uses, ignoring ``processes``; ``address=`` joins a
    running cluster and ``cluster=`` names the one joined. The cluster it started stops
    at `join` (after `close`) or `terminate`, once no other pool or executor uses it.

    ``initializer(*initargs)`` runs in each worker process before the first of this pool's
    tasks that it runs there: lazily, since no task can be aimed at a given worker
    (`dista_runtime._pools.remote`). ``maxtasksperchild`` is not supported (the workers are
    shared and long-lived): a value warns and is ignored. ``context`` is accepted and
    ignored: Dista starts its workers itself.
    """

    def __init__(
        self,
        processes: int | None = None,
        initializer: Callable[..., object] | None = None,
        initargs: Iterable[Any] = (),
        maxtasksperchild: int | None = None,
        context: object = None,
        *,
        address: str | None = None,
        cluster: Cluster | None = None,
    ) -> None:
        if processes is not None and processes < 1:
            raise ValueError("Number of processes must be at least 1")
        if maxtasksperchild is not None:
            warnings.warn(
                "dista.Pool does not support maxtasksperchild: its workers are shared and "
                "long-lived; the value is ignored",
                RuntimeWarning,
                stacklevel=2,
            )
        if address is not None and cluster is not None:
            raise TypeError("give an address or a cluster, not both")
        setup = make_setup(f"pool-{uuid.uuid4().hex}", initializer, initargs)
        self._runner = Runner(acquire(address, cluster, processes), setup)
        self._state = _RUN
        #: Held while submitting, so that `terminate` cancels every task submitted.
        self._lock = threading.Lock()
        self._feeders: list[threading.Thread] = []
        self._size: int | None = processes

    def __repr__(self) -> str:
        size = "" if self._size is None else f" pool_size={self._size}"
        return f"<dista.Pool state={self._state}{size}>"

    def __enter__(self) -> Self:
        self._check_running()
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate()

    def _check_running(self) -> None:
        if self._state != _RUN:
            raise ValueError("Pool not running")

    def _workers(self) -> int:
        """How many workers the cluster has, for the default chunk size (as `len(pool)`)."""
        if self._size is None:
            cluster = self._runner.lease.cluster
            local = cluster.local if cluster is not None else None
            self._size = local.expected if local is not None else stats().workers
        return max(1, self._size)

    # -- one call --------------------------------------------------------------------------

    def apply(
        self,
        func: Callable[..., T],
        args: Iterable[Any] = (),
        kwds: Mapping[str, Any] | None = None,
    ) -> T:
        """``func(*args, **kwds)`` on a worker; its value (or its error, raised)."""
        return self.apply_async(func, args, kwds).get()

    def apply_async(
        self,
        func: Callable[..., T],
        args: Iterable[Any] = (),
        kwds: Mapping[str, Any] | None = None,
        callback: Callable[[T], object] | None = None,
        error_callback: Callable[[BaseException], object] | None = None,
    ) -> AsyncResult[T]:
        """`apply` without waiting: its `AsyncResult`; ``callback`` gets the value, or
        ``error_callback`` the error, before the result is ready."""
        result: AsyncResult[T] = AsyncResult(callback, error_callback)
        with self._lock:
            self._check_running()
            future = self._runner.call(func, tuple(args), dict(kwds or {}))
        future.add_done_callback(result._settle)
        return result

    # -- many calls ------------------------------------------------------------------------

    def map(
        self, func: Callable[[S], T], iterable: Iterable[S], chunksize: int | None = None
    ) -> list[T]:
        """``[func(x) for x in iterable]``, run in chunks; the first error is raised."""
        return self._map(func, iterable, False, chunksize)

    def starmap(
        self,
        func: Callable[..., T],
        iterable: Iterable[Iterable[Any]],
        chunksize: int | None = None,
    ) -> list[T]:
        """``[func(*args) for args in iterable]``, run in chunks."""
        return self._map(func, iterable, True, chunksize)

    def map_async(
        self,
        func: Callable[[S], T],
        iterable: Iterable[S],
        chunksize: int | None = None,
        callback: Callable[[list[T]], object] | None = None,
        error_callback: Callable[[BaseException], object] | None = None,
    ) -> MapResult[T]:
        """`map` without waiting: ``callback`` gets the list, ``error_callback`` the first
        error to arrive."""
        return self._map_async(func, iterable, False, chunksize, callback, error_callback)

    def starmap_async(
        self,
        func: Callable[..., T],
        iterable: Iterable[Iterable[Any]],
        chunksize: int | None = None,
        callback: Callable[[list[T]], object] | None = None,
        error_callback: Callable[[BaseException], object] | None = None,
    ) -> MapResult[T]:
        return self._map_async(func, iterable, True, chunksize, callback, error_callback)

    def _map(
        self, func: Callable[..., T], iterable: Iterable[Any], star: bool, chunksize: int | None
    ) -> list[T]:
        """`map` and `starmap`: this thread, which waits anyway, reads the chunks itself (one
        thread hand-off per chunk less than through the settler), in order: the error
        raised is the first in the input's order (`multiprocessing`: the first to arrive)."""
        result, futures = self._submit_map(func, iterable, star, chunksize, None, None, False)
        try:
            for future in futures:
                if result.ready():
                    break
                future._settle_here()
        finally:
            for future in futures:
                future.arm()  # those not read (after an error): the settler releases them
        return result.get()

    def _map_async(
        self,
        func: Callable[..., T],
        iterable: Iterable[Any],
        star: bool,
        chunksize: int | None,
        callback: Callable[[list[T]], object] | None = None,
        error_callback: Callable[[BaseException], object] | None = None,
    ) -> MapResult[T]:
        return self._submit_map(func, iterable, star, chunksize, callback, error_callback)[0]

    def _submit_map(
        self,
        func: Callable[..., T],
        iterable: Iterable[Any],
        star: bool,
        chunksize: int | None,
        callback: Callable[[list[T]], object] | None,
        error_callback: Callable[[BaseException], object] | None,
        armed: bool = True,
    ) -> tuple[MapResult[T], list[DistaFuture[Any]]]:
        self._check_running()
        if chunksize is not None and chunksize < 1:
            raise ValueError(f"Chunksize must be 1+, not {chunksize:n}")
        items = list(iterable)
        if chunksize is None:  # as multiprocessing: about four chunks per worker
            chunksize, extra = divmod(len(items), self._workers() * 4)
            chunksize += 1 if extra else 0
        chunksize = max(chunksize, 1)
        result: MapResult[T] = MapResult(len(items), chunksize, callback, error_callback)
        task = chunk_task(func, self._runner.setup, star)
        futures: list[DistaFuture[Any]] = []
        with self._lock:
            self._check_running()
            try:
                futures.extend(
                    self._runner.chunk(task, c, armed) for c in batched(items, chunksize)
                )
            except BaseException:
                for future in futures:  # no half-submitted map keeps running
                    future.cancel()
                raise
        for index, future in enumerate(futures):
            future.add_done_callback(partial(result._chunk_done, index))
        return result, futures

    def imap(
        self, func: Callable[[S], T], iterable: Iterable[S], chunksize: int = 1
    ) -> IMapIterator[T]:
        """``func(x)`` for each ``x``, lazily: an iterator of the values, in order."""
        return self._imap(func, iterable, chunksize, ordered=True)

    def imap_unordered(
        self, func: Callable[[S], T], iterable: Iterable[S], chunksize: int = 1
    ) -> IMapIterator[T]:
        """As `imap`, but the values come as they are ready (a chunk's in its order)."""
        return self._imap(func, iterable, chunksize, ordered=False)

    def _imap(
        self, func: Callable[..., T], iterable: Iterable[Any], chunksize: int, ordered: bool
    ) -> IMapIterator[T]:
        self._check_running()
        if chunksize < 1:
            raise ValueError(f"Chunksize must be 1+, not {chunksize:n}")
        result: IMapIterator[T] = IMapIterator(ordered)
        feeder = threading.Thread(
            target=self._feed,
            args=(result, chunk_task(func, self._runner.setup, False), iterable, chunksize),
            name="dista-pool-feeder",
            daemon=True,
        )
        with self._lock:
            self._feeders = [f for f in self._feeders if f.is_alive()]
            self._feeders.append(feeder)
        feeder.start()
        return result

    def _feed(
        self,
        result: IMapIterator[Any],
        task: Callable[..., Any],
        iterable: Iterable[Any],
        chunksize: int,
    ) -> None:
        """The feeder thread of one `imap`: submit chunks as the input yields them.

        At most `_AHEAD` chunks per worker are unfinished at a time: every chunk still runs
        whether or not anyone iterates, as with `multiprocessing`, but an endless input
        does not flood the cluster with tasks (`multiprocessing` queues them all)."""
        room = threading.Semaphore(max(_AHEAD * self._workers(), 64))
        index = 0
        try:
            for chunk in batched(iterable, chunksize):
                room.acquire()
                with self._lock:
                    if self._state == _TERMINATE:
                        break
                    future = self._runner.chunk(task, chunk)
                future.add_done_callback(partial(self._chunk_done, result, room, index))
                index += 1
        except Exception as e:  # noqa: BLE001  (the input's error, or a chunk not sent)
            result._put(index, False, e)
            index += 1
        result._fed(index)

    @staticmethod
    def _chunk_done(
        result: IMapIterator[Any], room: threading.Semaphore, index: int, future: Any
    ) -> None:
        room.release()  # first: the feeder goes on even if the result is dropped
        result._chunk_done(index, future)

    # -- the end ---------------------------------------------------------------------------

    def close(self) -> None:
        """Take no more work; what was submitted still runs (`join` waits for it)."""
        with self._lock:
            if self._state == _RUN:
                self._state = _CLOSE

    def terminate(self) -> None:
        """Cancel every unfinished task (running ones are interrupted) and let go of the
        cluster (the one this pool started stops, with its workers)."""
        with self._lock:
            self._state = _TERMINATE
        self._runner.cancel_all()
        self._runner.lease.release()

    def join(self) -> None:
        """Wait for every task, after `close` or `terminate`; then let go of the cluster."""
        if self._state == _RUN:
            raise ValueError("Pool is still running")
        with self._lock:
            # After a terminate, a feeder may wait on its input for ever: not for it.
            feeders = list(self._feeders) if self._state == _CLOSE else []
        for feeder in feeders:
            feeder.join()
        self._runner.finish()
