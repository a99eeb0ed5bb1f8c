"""Receive buffers kept for the next large object (`dista_runtime._values.buffer_cache`): a map is
reused only once nothing uses it, for an object of a close size, and given back after a
few idle seconds; a value a user holds is never written over."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import dista_runtime as dista
from dista_runtime._session import context as _context
from dista_runtime._values import buffer_cache as bc
from dista_runtime._values.buffer_cache import CACHE_FROM, BufferCache
from dista_runtime._values.memory import write_into
from dista_runtime._values.shared import SHARED_MEMORY_ENV
from tests.processes.support import buffer_cache_tasks as bt
from tests.support.cluster import assert_gone, wait_for_workers

N = CACHE_FROM


class FakeTimer:
    def __init__(self, loop: FakeLoop) -> None:
        self.loop = loop

    def cancel(self) -> None:
        self.loop.due = None


class FakeLoop:
    def __init__(self) -> None:
        self.due: Callable[[], object] | None = None

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        assert self.due is None, "one sweep timer at a time"
        self.due = callback
        return FakeTimer(self)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr("dista_runtime._values.buffer_cache.time.monotonic", lambda: now[0])
    return now


def _sweep(loop: FakeLoop, clock: list[float], seconds: float) -> None:
    clock[0] += seconds
    due, loop.due = loop.due, None
    assert due is not None
    due()


def test_a_freed_buffer_is_reused_and_one_in_use_is_not() -> None:
    cache = BufferCache(FakeLoop())  # type: ignore[arg-type]
    first = cache.allocate(N)
    first[:4] = b"abcd"
    second = cache.allocate(N)  # the first is in use: a new map
    assert cache.reused == 0 and cache.kept_bytes == 2 * N
    second_obj = second.obj if isinstance(second, memoryview) else None
    del first
    third = cache.allocate(N)
    assert cache.reused == 1
    assert isinstance(third, memoryview) and third.obj is not second_obj
    assert bytes(third[:4]) == b"abcd"  # not zeroed: a receive fills it whole
    array = np.frombuffer(third, dtype=np.uint8)  # what a decoded value holds
    del third
    fourth = cache.allocate(N)  # the array still uses the map
    assert cache.reused == 1 and isinstance(fourth, memoryview)
    assert fourth.obj is not array.base.obj  # type: ignore[union-attr]


def test_sizes_fit_within_a_quarter_and_small_ones_are_not_cached() -> None:
    cache = BufferCache(FakeLoop())  # type: ignore[arg-type]
    del_me = cache.allocate(2 * N)
    del del_me
    smaller = cache.allocate(int(2 * N * 0.8))
    assert cache.reused == 1 and len(smaller) == int(2 * N * 0.8)
    del smaller
    much_smaller = cache.allocate(N)  # half the kept map: a map of its own
    assert cache.reused == 1 and len(much_smaller) == N
    small = cache.allocate(N // 2)
    assert isinstance(small, (bytearray, memoryview)) and cache.kept_bytes == 3 * N


def _received(cache: BufferCache, n: int) -> memoryview:
    """A buffer from ``cache`` filled whole, as a receive fills it."""
    view = cache.allocate(n)
    assert isinstance(view, memoryview)
    write_into(view, bytes(n))
    return view


def test_maps_idle_for_a_while_are_given_back(clock: list[float]) -> None:
    loop = FakeLoop()
    cache = BufferCache(loop, idle_s=5.0)  # type: ignore[arg-type]
    held = _received(cache, N)
    dropped = _received(cache, N)
    assert isinstance(dropped, memoryview)
    region = weakref.ref(dropped.obj)
    del dropped
    _sweep(loop, clock, 1.0)  # seen free from now
    _sweep(loop, clock, 4.0)
    assert cache.kept_bytes == 2 * N
    _sweep(loop, clock, 1.0)
    assert cache.kept_bytes == N and region() is None  # unmapped
    del held
    for _ in range(6):
        _sweep(loop, clock, 1.0)
    assert cache.kept_bytes == 0 and loop.due is None  # nothing kept: no timer


def test_a_map_never_filled_is_given_back_at_the_first_sweep(clock: list[float]) -> None:
    loop = FakeLoop()
    cache = BufferCache(loop)  # type: ignore[arg-type]
    announced = cache.allocate(4 * N)  # a peer announced a large frame, sent 1 MiB, left
    assert isinstance(announced, memoryview)
    write_into(announced[: 1 << 20], bytes(1 << 20))
    filled = _received(cache, N)
    del announced, filled
    _sweep(loop, clock, 1.0)
    assert cache.kept_bytes == N  # the filled one is kept for its idle time


def test_the_cap_drops_free_maps_first_and_never_one_in_use() -> None:
    cache = BufferCache(FakeLoop(), limit=2 * N)  # type: ignore[arg-type]
    a = cache.allocate(N)
    b = cache.allocate(N)
    c = cache.allocate(N)  # over the cap, both others in use: not kept
    assert cache.kept_bytes == 2 * N
    del a
    d = cache.allocate(2 * N)  # the free one unmapped for room; not enough: d not kept
    assert cache.kept_bytes == N and len(d) == 2 * N
    del b
    e = cache.allocate(N)  # b is free now: reused
    assert cache.reused == 1 and len(e) == N
    assert bytes(c[:1]) == b"\0"


def test_close_gives_free_maps_back_and_keeps_none_after() -> None:
    cache = BufferCache(FakeLoop())  # type: ignore[arg-type]
    kept = cache.allocate(N)
    cache.close()
    assert cache.kept_bytes == 0
    kept[:1] = b"x"  # still the caller's to use
    again = cache.allocate(N)
    assert cache.kept_bytes == 0 and len(again) == N


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[dista.Cluster]:
    # Over the links, as across hosts: on one host the driver maps what workers store.
    monkeypatch.setenv(SHARED_MEMORY_ENV, "0")
    with dista.init(workers=1) as c:
        wait_for_workers(1)
        yield c
    assert_gone(c.pids())


def test_values_held_are_never_written_over_by_later_gets(cluster: dista.Cluster) -> None:
    cache = _context.session().session.io.buffers  # type: ignore[attr-defined]
    size = 3 * N
    held = [bt.filled.remote(size, k).get(timeout=60) for k in range(3)]
    for k in range(3, 9):
        value = bt.filled.remote(size, k).get(timeout=60)
        assert value.nbytes == size and int(value[0]) == k and int(value[-1]) == k
        del value
    assert cache.reused >= 5, "later gets land in the map the one before dropped"
    for k, value in enumerate(held):
        assert int(value[0]) == k and int(value[size // 2]) == k and int(value[-1]) == k
    assert bc.IDLE_S < 30
