"""Memory files made ahead for a worker's next large value (`dista_runtime._values.spare_files`):
made at the size just stored, with their pages allocated; taken only by a value that fits;
closed when nobody takes them; never more than the limit."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import numpy as np
import pytest

from dista_runtime._values import spare_files
from dista_runtime._values.codec import decode as decode_
from dista_runtime._values.codec import encode
from dista_runtime._values.shared import is_shared, keep_values_shared
from dista_runtime._values.spare_files import SPARE_FROM, SpareFiles

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd: Linux")

N = SPARE_FROM


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.01)


def test_a_spare_of_the_size_stored_is_made_with_its_pages_and_taken_by_a_fit() -> None:
    spares = SpareFiles()
    spares.want(N)
    eventually(lambda: spares.made == 1)
    assert spares.take(N // 2) is None  # far smaller: a file of its own
    assert spares.take(N + 1) is None  # larger: does not fit
    fd = spares.take(N - 4096)
    assert fd is not None and spares.take(N) is None  # taken once
    stat = os.fstat(fd)
    assert stat.st_size == N and stat.st_blocks * 512 >= N  # allocated, not a hole
    os.close(fd)


def test_small_values_leave_no_spare_and_the_limit_holds() -> None:
    spares = SpareFiles(limit=3 * N)
    spares.want(N - 1)
    spares.want(2 * N)
    spares.want(2 * N)  # one of each size
    spares.want(int(1.5 * N))  # over the limit with the first
    eventually(lambda: spares.made == 1)
    time.sleep(0.2)
    assert spares.made == 1
    fd = spares.take(2 * N)
    assert fd is not None
    os.close(fd)


def test_spares_nobody_takes_are_closed() -> None:
    spares = SpareFiles(idle_s=0.1)
    spares.want(N)
    eventually(lambda: spares.made == 1)
    eventually(lambda: not spares._spares, timeout=5.0)
    assert spares.take(N) is None


def test_a_series_of_large_values_lands_in_spares(monkeypatch: pytest.MonkeyPatch) -> None:
    spares = SpareFiles()
    monkeypatch.setattr(spare_files, "SPARES", spares)
    monkeypatch.setattr("dista_runtime._values.shared.SPARES", spares)
    keep_values_shared()
    try:
        first = encode(np.full(N, 1, dtype=np.uint8))
        eventually(lambda: spares.made == 1)
        second = encode(np.full(N - 100, 2, dtype=np.uint8))
        assert spares.taken == 1 and is_shared(first) and is_shared(second)
        assert bytes(first[-1:]) == b"\x01" and bytes(second[-1:]) == b"\x02"
        assert len(second) < N + 200  # trimmed to the value's size
    finally:
        keep_values_shared(False)


def test_a_large_value_written_by_several_threads_is_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dista_runtime._values import file_writes

    monkeypatch.setattr(file_writes, "PARALLEL_FROM", 1 << 20)
    monkeypatch.setattr(file_writes, "CHUNK", 1 << 16)
    keep_values_shared()
    try:
        data = np.random.default_rng(3).integers(0, 255, 3 << 20, dtype=np.uint8)
        value = encode(data)
        assert is_shared(value) and np.array_equal(np.asarray(decode_(value)), data)
    finally:
        keep_values_shared(False)
