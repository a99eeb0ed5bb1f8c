"""Dista's side of the side-by-side benchmark, written against the ``dista_runtime`` API.

The tasks and actor classes are module-level (``@dista.task``, ``@dista.actor``) so that
Dista's workers import them by name (``benchmarks.workloads_dista.noop`` ...). Workers
import this module, so it imports nothing but Dista (and the standard library's modules
Dista loads anyway): what it imports counts in the idle-memory figure. NumPy is imported by
the checkpoint workload's actor, on its worker, when it is built.
"""

from __future__ import annotations

import contextlib
import os
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
def make_array(size: int) -> Any:
    import numpy as np

    return np.full(size, 0xAB, dtype=np.uint8)


@dista.task
def bytes_len(size: int) -> int:
    return len(FILL * size)


@dista.task
def array_sum(array: Any) -> float:
    return float(array.sum())


@dista.actor
class Counter:
    """The actor of the actor workloads: one call, one increment (as the peers' Counter)."""

    def __init__(self) -> None:
        self.count = 0

    def incr(self) -> int:
        self.count += 1
        return self.count


@dista.actor
class State:
    """The checkpoint workload's actor: ``size`` bytes of state and a counter. ``kind``
    "numpy": a NumPy array (pickled out of band: a checkpoint writes it from where it
    lies); "bytes": a ``bytes`` object (pickled in band, into the pickle's own bytes)."""

    def __init__(self, size: int, kind: str) -> None:
        self.data: Any
        if kind == "numpy":
            import numpy as np

            self.data = np.full(size, FILL[0], dtype=np.uint8)
        elif kind == "bytes":
            self.data = FILL * size
        else:
            raise ValueError(f"kind is numpy or bytes, not {kind!r}")
        self.count = 0

    def incr(self) -> int:
        self.count += 1
        return self.count

    def pid(self) -> int:
        """The worker's PID, for the restore workload to kill it."""
        return os.getpid()

    def check(self) -> tuple[int, int, int]:
        """The state's size, first and last byte: checks a restore brought it back."""
        return len(self.data), int(self.data[0]), int(self.data[-1])


class DistaActor:
    """`benchmarks.runner.ActorProxy` for a Dista `Counter`."""

    def __init__(self) -> None:
        self._handle = Counter.remote()

    def incr(self) -> Any:
        return self._handle.incr.remote()

    def get(self, call: Any) -> int:
        value: int = call.get(timeout=GET_TIMEOUT_S)
        return value

    def collect(self, calls: list[Any]) -> list[int]:
        values: list[int] = dista.get(calls, timeout=GET_TIMEOUT_S)
        return values

    def close(self) -> None:
        self._handle.kill()


class DistaStateActor:
    """`benchmarks.runner.StateActorProxy` for a Dista `State`; `DISTA_CHECKPOINT_URI`
    names the store (set before the cluster starts, so that the workers have it)."""

    def __init__(self, size: int, kind: str) -> None:
        self._handle = State.remote(size, kind)

    def incr(self, timeout: float) -> int:
        return self._handle.incr.remote().get(timeout=timeout)

    def pid(self, timeout: float) -> int:
        return self._handle.pid.remote().get(timeout=timeout)

    def check(self, timeout: float) -> tuple[int, int, int]:
        return self._handle.check.remote().get(timeout=timeout)

    def checkpoint(self, timeout: float) -> None:
        self._handle.checkpoint(timeout=timeout)

    def workers(self) -> int:
        return dista.stats().workers

    def close(self) -> None:
        self._handle.kill()


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

    def make_array(self, size: int) -> Any:
        return make_array.remote(size)

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

    def actor(self) -> DistaActor:
        return DistaActor()

    def state_actor(self, size: int, kind: str) -> DistaStateActor:
        return DistaStateActor(size, kind)


class DistaAnyioEngine(DistaEngine):
    """Dista on anyio's asyncio backend."""

    loop = "anyio"


class DistaTrioEngine(DistaEngine):
    """Dista on anyio's trio backend."""

    loop = "trio"


class DistaGeventEngine(DistaEngine):
    """Dista on gevent (this driver unpatched: its hub runs on a thread of its own)."""

    loop = "gevent"
