"""Dista's side of the side-by-side benchmark, written against the ``dista_runtime`` API.

The tasks are module-level ``@dista.task`` functions so that Dista's workers import them by
name (``benchmarks.workloads_dista.noop`` ...). Workers import this module, so it imports
nothing but Dista: what it imports counts in the idle-memory figure. Dista has no actors
yet: the actor workload reports "n/a".
"""

from __future__ import annotations

import contextlib
from typing import Any

import dista_runtime as dista

FILL = b"\xab"  # bytes(n) would be lazily zeroed pages: fill them for real
GET_TIMEOUT_S = 600.0


@dista.task
def noop() -> None:
    return None


@dista.task
def add(a: int, b: int) -> int:
    return a + b


@dista.task
def total(*values: int) -> int:
    return sum(values)


@dista.task
def make_bytes(size: int) -> bytes:
    return FILL * size


@dista.task
def bytes_len(size: int) -> int:
    return len(FILL * size)


@dista.task
def array_sum(array: Any) -> float:
    return float(array.sum())


class DistaEngine:
    """``dista.init(workers=2)``: an embedded head and 2 worker processes on loopback."""

    can_wait = True  # dista.wait: done once stored on a worker, before any fetch

    #: The binding (`dista.init(loop=...)`): the driver's, the head's and the workers'.
    loop = "asyncio"

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._stack = contextlib.ExitStack()

    def start(self) -> None:
        self._stack.enter_context(dista.init(workers=self._workers, loop=self.loop))

    def stop(self) -> None:
        self._stack.close()

    def pids(self) -> list[int]:
        return dista.local_pids()  # the workers; the head runs in this (the driver's) process

    def noop(self) -> Any:
        return noop.remote()

    def add(self, a: Any, b: Any) -> Any:
        return add.remote(a, b)

    def total(self, *values: Any) -> Any:
        return total.remote(*values)

    def make_bytes(self, size: int) -> Any:
        return make_bytes.remote(size)

    def bytes_len(self, size: int) -> Any:
        return bytes_len.remote(size)

    def array_sum(self, array: Any) -> Any:
        return array_sum.remote(array)

    def wait(self, ref: Any) -> None:
        dista.wait([ref], num_returns=1, timeout=GET_TIMEOUT_S)

    def get(self, ref: Any) -> Any:
        return ref.get(timeout=GET_TIMEOUT_S)

    def get_all(self, refs: list[Any]) -> list[Any]:
        values: list[Any] = dista.get(refs)
        return values

    def actor(self) -> None:
        return None  # no actors yet: the actor workload reports n/a


class DistaAnyioEngine(DistaEngine):
    """Dista on anyio's asyncio backend."""

    loop = "anyio"


class DistaTrioEngine(DistaEngine):
    """Dista on anyio's trio backend."""

    loop = "trio"


class DistaGeventEngine(DistaEngine):
    """Dista on gevent (this driver unpatched: its hub runs on a thread of its own)."""

    loop = "gevent"
