"""Tasks the real-process tests run: an importable module, so workers know them by name."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

import dista_runtime as dista


class Custom:
    def __init__(self, value: Any) -> None:
        self.value = value


class Refusal(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"refused with code {code}")
        self.code = code


class Unpicklable(Exception):
    def __reduce__(self) -> Any:
        raise TypeError("no")


@dista.task
def add(a: int, b: int) -> int:
    return a + b


@dista.task
def noop() -> None:
    return None


@dista.task
def total(values: list[int], extra: dict[str, int] | None = None) -> int:
    return sum(values) + sum((extra or {}).values())


@dista.task
def unwrap(box: Custom) -> Any:
    return box.value


@dista.task(num_returns=2)
def divmod_task(a: int, b: int) -> tuple[int, int]:
    return a // b, a % b


@dista.task
def fail(code: int) -> int:
    raise Refusal(code)


@dista.task
def fail_unpicklable() -> int:
    raise Unpicklable("cannot travel")


@dista.task
def big(mib: int) -> np.ndarray:
    rng = np.random.default_rng(mib)
    return rng.integers(0, 255, size=mib << 20, dtype=np.uint8)


@dista.task
def checksum(array: np.ndarray) -> int:
    return int(array.sum(dtype=np.int64))


@dista.task
def pid() -> int:
    return os.getpid()


@dista.task
def wall_clock() -> float:
    """This worker's wall clock: the clock `test_clock` steps with libfaketime."""
    return time.time()


@dista.task
def sleep_then(seconds: float, value: int, marker: str = "") -> int:
    if marker:
        Path(marker).write_text(str(os.getpid()))
    time.sleep(seconds)
    return value


@dista.task
def nested_sum(n: int) -> int:
    """A task that submits tasks and reads their refs (the client role)."""
    refs = [add.remote(i, 1) for i in range(n)]
    return sum(dista.get(refs))


@dista.task
async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0.01)
    return a + b


@dista.task(max_retries=0)
def no_retry_sleep(seconds: float, marker: str) -> int:
    Path(marker).write_text(str(os.getpid()))
    time.sleep(seconds)
    return 1


@dista.task
def worker_store() -> tuple[str, int]:
    """What this worker's object server still holds (to check that frees arrive)."""
    from dista_runtime._hosts import worker as _worker

    current = _worker.CURRENT
    assert current is not None
    address = current.core.address
    return f"{address.host}:{address.port}", len(current.core.store)


@dista.task
def inline_runs() -> tuple[int, int]:
    """(this worker's pid, how many tasks it has run inline on its loop so far)."""
    from dista_runtime._hosts import worker as _worker

    current = _worker.CURRENT
    assert current is not None
    return os.getpid(), current.inline.inline_runs


@dista.task
def leaf_or_nested(n: int) -> int:
    """A leaf for n <= 1 (quick, submits nothing); otherwise it submits and reads two tasks:
    a function a worker may learn to run inline, that later reaches for the session."""
    if n <= 1:
        return n
    left, right = leaf_or_nested.remote(n - 1), leaf_or_nested.remote(n - 2)
    return int(left.get(timeout=60)) + int(right.get(timeout=60))


@dista.task
def quick_or_slow(seconds: float) -> float:
    """Quick until asked to sleep: a function that overruns the inline budget."""
    time.sleep(seconds)
    return seconds


@dista.task
def leaf_or_swallowing(n: int) -> int:
    """Like `leaf_or_nested`, but it swallows whatever its submit raises (even BaseException)."""
    if n <= 1:
        return n
    try:
        return int(add.remote(n, 1).get(timeout=60))
    except BaseException:
        return -1
