"""The task `benchmarks.across_hosts` runs on host A (its worker imports this module)."""

from __future__ import annotations

import numpy as np

import dista_runtime as dista


@dista.task
def make(kind: str, size: int) -> object:
    """A fresh result of ``size`` bytes, all ones: ``bytes`` or a NumPy ``uint8`` array."""
    if kind == "bytes":
        return b"\x01" * size
    return np.ones(size, dtype=np.uint8)
