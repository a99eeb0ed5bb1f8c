"""The peers' side of the side-by-side benchmark: Ray, Dask distributed, ProcessPoolExecutor.

Each engine offers the small interface `benchmarks.runner.Engine` that the workloads in
runner.py are written against. The tasks are plain module-level functions so that every
system's workers import them by name; each engine imports its system only when it is built,
so this module imports without Ray or Dask installed.
"""

from __future__ import annotations

from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import Any

FILL = b"\xab"  # bytes(n) would be lazily zeroed pages: fill them for real


def noop() -> None:
    return None


def add(a: int, b: int) -> int:
    return a + b


def total(*values: int) -> int:
    return sum(values)


def make_bytes(size: int) -> bytes:
    return FILL * size


def make_array(size: int) -> Any:
    import numpy as np

    return np.full(size, 0xAB, dtype=np.uint8)


def bytes_len(size: int) -> int:
    return len(FILL * size)


def array_sum(array: Any) -> float:
    return float(array.sum())


class Counter:
    """The actor: one call, one increment."""

    def __init__(self) -> None:
        self.count = 0

    def incr(self) -> int:
        self.count += 1
        return self.count


# --------------------------------------------------------------------------- Ray


class RayActor:
    def __init__(self, ray: Any) -> None:
        self._ray: Any = ray
        self._handle = ray.remote(Counter).remote()

    def incr(self) -> Any:
        return self._handle.incr.remote()

    def get(self, call: Any) -> int:
        value: int = self._ray.get(call)
        return value

    def collect(self, calls: list[Any]) -> list[int]:
        values: list[int] = self._ray.get(calls)
        return values

    def close(self) -> None:
        self._ray.kill(self._handle)


class RayEngine:
    """``ray.init(num_cpus=2, include_dashboard=False)``: a local Ray instance."""

    can_wait = True

    def __init__(self, workers: int) -> None:
        import ray

        self._ray: Any = ray
        self._workers = workers
        self._tasks: dict[str, Any] = {}

    def start(self) -> None:
        self._ray.init(num_cpus=self._workers, include_dashboard=False)
        for fn in (noop, add, total, make_bytes, make_array, bytes_len, array_sum):
            self._tasks[fn.__name__] = self._ray.remote(fn)

    def stop(self) -> None:
        if self._ray.is_initialized():
            self._ray.shutdown()

    def pids(self) -> list[int]:
        return []  # every Ray process of a local instance descends from the driver

    def noop(self) -> Any:
        return self._tasks["noop"].remote()

    def add(self, a: Any, b: Any) -> Any:
        return self._tasks["add"].remote(a, b)

    def total(self, *values: Any) -> Any:
        return self._tasks["total"].remote(*values)

    def make_bytes(self, size: int) -> Any:
        return self._tasks["make_bytes"].remote(size)

    def make_array(self, size: int) -> Any:
        return self._tasks["make_array"].remote(size)

    def bytes_len(self, size: int) -> Any:
        return self._tasks["bytes_len"].remote(size)

    def array_sum(self, array: Any) -> Any:
        return self._tasks["array_sum"].remote(array)

    def wait(self, ref: Any) -> None:
        self._ray.wait([ref], num_returns=1)

    def get(self, ref: Any) -> Any:
        return self._ray.get(ref)

    def get_all(self, refs: list[Any]) -> list[Any]:
        values: list[Any] = self._ray.get(refs)
        return values

    def actor(self) -> RayActor:
        return RayActor(self._ray)

    def state_actor(self, size: int, kind: str) -> None:
        return None  # Ray has no actor checkpoints


# --------------------------------------------------------------------------- Dask


class DaskActor:
    def __init__(self, client: Any) -> None:
        self._client: Any = client
        self._future: Any = client.submit(Counter, actor=True)
        self._actor = self._future.result()

    def incr(self) -> Any:
        return self._actor.incr()

    def get(self, call: Any) -> int:
        value: int = call.result()
        return value

    def collect(self, calls: list[Any]) -> list[int]:
        return [call.result() for call in calls]

    def close(self) -> None:
        self._client.cancel(self._future)


class DaskEngine:
    """``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)`` and a Client.

    Every submit is ``pure=False``: Dask would otherwise give equal calls one key and run
    them once. The dashboard is off, as Ray's is.
    """

    can_wait = True

    def __init__(self, workers: int) -> None:
        import distributed

        self._distributed: Any = distributed
        self._workers = workers
        self._cluster: Any = None
        self._client: Any = None

    def start(self) -> None:
        self._cluster = self._distributed.LocalCluster(
            n_workers=self._workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        )
        self._client = self._distributed.Client(self._cluster)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()

    def pids(self) -> list[int]:
        return []  # the scheduler runs in the driver; nannies and workers descend from it

    def _submit(self, fn: Any, *args: Any) -> Any:
        return self._client.submit(fn, *args, pure=False)

    def noop(self) -> Any:
        return self._submit(noop)

    def add(self, a: Any, b: Any) -> Any:
        return self._submit(add, a, b)

    def total(self, *values: Any) -> Any:
        return self._submit(total, *values)

    def make_bytes(self, size: int) -> Any:
        return self._submit(make_bytes, size)

    def make_array(self, size: int) -> Any:
        return self._submit(make_array, size)

    def bytes_len(self, size: int) -> Any:
        return self._submit(bytes_len, size)

    def array_sum(self, array: Any) -> Any:
        return self._submit(array_sum, self._client.scatter(array, hash=False))

    def wait(self, ref: Any) -> None:
        self._distributed.wait(ref)

    def get(self, ref: Any) -> Any:
        return ref.result()

    def get_all(self, refs: list[Any]) -> list[Any]:
        values: list[Any] = self._client.gather(refs)
        return values

    def actor(self) -> DaskActor:
        return DaskActor(self._client)

    def state_actor(self, size: int, kind: str) -> None:
        return None  # Dask's actors have no checkpoints


# --------------------------------------------------------------------------- ProcessPoolExecutor


def _value(arg: Any) -> Any:
    """A future's result (waited for here, in the driver), or the argument itself."""
    return arg.result() if isinstance(arg, Future) else arg


class PoolEngine:
    """``ProcessPoolExecutor(2)``. It has no refs: dependent tasks go through the driver."""

    can_wait = False  # a result crosses the pipe as soon as its task ends

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._pool: ProcessPoolExecutor | None = None

    @property
    def pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            raise RuntimeError("the pool is not started")
        return self._pool

    def start(self) -> None:
        self._pool = ProcessPoolExecutor(self._workers)

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)

    def pids(self) -> list[int]:
        return []

    def noop(self) -> Future[None]:
        return self.pool.submit(noop)

    def add(self, a: Any, b: Any) -> Future[int]:
        return self.pool.submit(add, _value(a), _value(b))

    def total(self, *values: Any) -> Future[int]:
        return self.pool.submit(total, *(_value(v) for v in values))

    def make_bytes(self, size: int) -> Future[bytes]:
        return self.pool.submit(make_bytes, size)

    def make_array(self, size: int) -> Future[Any]:
        return self.pool.submit(make_array, size)

    def bytes_len(self, size: int) -> Future[int]:
        return self.pool.submit(bytes_len, size)

    def array_sum(self, array: Any) -> Future[float]:
        return self.pool.submit(array_sum, array)

    def wait(self, ref: Future[Any]) -> None:
        wait_futures([ref])

    def get(self, ref: Future[Any]) -> Any:
        return ref.result()

    def get_all(self, refs: list[Future[Any]]) -> list[Any]:
        return [ref.result() for ref in refs]

    def actor(self) -> None:
        return None  # no actors

    def state_actor(self, size: int, kind: str) -> None:
        return None  # no actors
