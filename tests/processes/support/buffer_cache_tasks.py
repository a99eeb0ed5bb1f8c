"""A task for tests/processes/test_buffer_cache.py: a large result, stored on its worker and
fetched by the driver, every byte ``k``."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

import dista_runtime as dista


@dista.task
def filled(size: int, k: int) -> npt.NDArray[np.uint8]:
    return np.full(size, k, dtype=np.uint8)
