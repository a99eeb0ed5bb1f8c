"""Dista's side of the side-by-side benchmark, written against the ``dista_runtime`` API.

The tasks are module-level ``@dista.task`` functions so that Dista's workers import them by
name (``benchmarks.workloads_dista.noop`` ...). This module imports whether or not that API
is there yet: without ``dista_runtime.task`` the functions stay plain, and `DistaEngine.start`
raises `Unavailable` when ``dista_runtime.init`` is missing or not implemented, which the
runner reports as "unavailable" instead of a failure. Dista has no actors yet: the actor
workload reports "n/a".
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from benchmarks.runner import Unavailable

dista: Any
try:
    import dista_runtime as dista
except ImportError:  # a checkout without the runtime package at all
    dista = None

F = TypeVar("F", bound=Callable[..., Any])
FILL = b"\xab"  # bytes(n) would be lazily zeroed pages: fill them for real
GET_TIMEOUT_S = 600.0


def _task(fn: F) -> F:
    """``@dista.task`` where the runtime has it; the plain function otherwise."""
    decorate = getattr(dista, "task", None)
    return fn if decorate is None else decorate(fn)


@_task
def noop() -> None:
    return None


@_task
def add(a: int, b: int) -> int:
    return a + b


@_task
def total(*values: int) -> int:
    return sum(values)


@_task
def make_bytes(size: int) -> bytes:
    return FILL * size


@_task
def bytes_len(size: int) -> int:
    return len(FILL * size)


@_task
def array_sum(array: Any) -> float:
    return float(array.sum())


class DistaEngine:
    """``dista.init(workers=2)``: an embedded head and 2 worker processes on loopback."""

    can_wait = True  # dista.wait: done once stored on a worker, before any fetch

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._stack = contextlib.ExitStack()

    def start(self) -> None:
        init = getattr(dista, "init", None)
        if init is None or getattr(dista, "task", None) is None:
            raise Unavailable("dista_runtime has no init/task yet")
        try:
            self._stack.enter_context(init(workers=self._workers))
        except NotImplementedError as exc:
            raise Unavailable(f"dista_runtime.init: {exc or 'not implemented'}") from exc

    def stop(self) -> None:
        self._stack.close()

    def pids(self) -> list[int]:
        local_pids = getattr(dista, "local_pids", None)
        # without it, the runner counts every process descended from the driver
        return [] if local_pids is None else list(local_pids())

    def noop(self) -> Any:
        return noop.remote()  # type: ignore[attr-defined]

    def add(self, a: Any, b: Any) -> Any:
        return add.remote(a, b)  # type: ignore[attr-defined]

    def total(self, *values: Any) -> Any:
        return total.remote(*values)  # type: ignore[attr-defined]

    def make_bytes(self, size: int) -> Any:
        return make_bytes.remote(size)  # type: ignore[attr-defined]

    def bytes_len(self, size: int) -> Any:
        return bytes_len.remote(size)  # type: ignore[attr-defined]

    def array_sum(self, array: Any) -> Any:
        return array_sum.remote(array)  # type: ignore[attr-defined]

    def wait(self, ref: Any) -> None:
        dista.wait([ref], num_returns=1, timeout=GET_TIMEOUT_S)

    def get(self, ref: Any) -> Any:
        return ref.get(timeout=GET_TIMEOUT_S)

    def get_all(self, refs: list[Any]) -> list[Any]:
        values: list[Any] = dista.get(refs)
        return values

    def actor(self) -> None:
        return None  # no actors yet: the actor workload reports n/a
