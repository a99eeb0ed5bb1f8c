"""Tasks for tests/processes/test_shared_memory.py: large results kept on their worker in
memory files, and tasks that read them."""

from __future__ import annotations

import os

import numpy as np
import numpy.typing as npt

import dista_runtime as dista


@dista.task
def filled(size: int, k: int) -> npt.NDArray[np.uint8]:
    return np.full(size, k, dtype=np.uint8)


@dista.task
def payload(size: int) -> bytes:
    return bytes(range(256)) * (size // 256)


@dista.task
def total(array: npt.NDArray[np.uint8]) -> tuple[int, bool, int]:
    """The sum of ``array``, whether it is writable, and this worker's pid."""
    return int(array.sum(dtype=np.uint64)), bool(array.flags.writeable), os.getpid()


@dista.task
def where() -> int:
    return os.getpid()
