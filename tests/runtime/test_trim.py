"""When a head or worker gives its heap back (`dista_runtime._values.trim`): after a large free at
once, and after smaller ones once the load has settled, never in a busy steady state.
glibc is replaced by a fake whose figures the test sets; one real trim checks the call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from dista_runtime._values import trim as _trim
from dista_runtime._values.trim import MemoryWatch

MIB = 1 << 20


class FakeInfo:
    def __init__(self, free: int, used: int) -> None:
        self.fordblks = free
        self.uordblks = used


class FakeLibc:
    def __init__(self) -> None:
        self.free = 10 * MIB
        self.used = 30 * MIB
        self.trims = 0

    def mallinfo2(self) -> FakeInfo:
        return FakeInfo(self.free, self.used)

    def malloc_trim(self, pad: int) -> int:
        self.trims += 1
        return 1


class FakeTimer:
    def cancel(self) -> None:
        pass


class FakeLoop:
    def __init__(self) -> None:
        self.due: list[Callable[[], object]] = []

    def call_later(self, delay: float, callback: Callable[..., object], *args: Any) -> FakeTimer:
        self.due.append(callback)
        return FakeTimer()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeLibc, Callable[[int], None]]:
    clock = Clock()
    monkeypatch.setattr("dista_runtime._values.trim.time.monotonic", lambda: clock.now)
    libc, loop = FakeLibc(), FakeLoop()
    MemoryWatch(loop, libc)  # type: ignore[arg-type]

    def seconds(n: int) -> None:
        for _ in range(n):
            clock.now += _trim.CHECK_S
            loop.due.pop(0)()

    return libc, seconds


def test_a_large_free_is_given_back_at_the_next_check(setup: Any) -> None:
    libc, seconds = setup
    seconds(1)
    libc.free += _trim.TRIM_AFTER
    libc.used -= _trim.TRIM_AFTER
    seconds(1)
    assert libc.trims == 1
    seconds(60)  # nothing more freed: no more trims
    assert libc.trims == 1


def test_smaller_frees_are_given_back_once_the_load_settles(setup: Any) -> None:
    libc, seconds = setup
    # Busy: the bytes in use move every second, free memory comes and goes.
    for i in range(20):
        libc.used += (-1) ** i * 3 * MIB
        libc.free += (-1) ** (i + 1) * 3 * MIB
        seconds(1)
    assert libc.trims == 0
    # The load ends: 6 MiB more free than the lowest seen, the rest unchanged.
    libc.free, libc.used = 13 * MIB, 27 * MIB
    seconds(_trim.SETTLED_CHECKS - 1)
    assert libc.trims == 0
    seconds(2)
    assert libc.trims == 1
    seconds(120)  # settled, nothing more freed: it stays trimmed
    assert libc.trims == 1


def test_settled_trims_come_at_most_once_every_gap(setup: Any) -> None:
    libc, seconds = setup
    for _ in range(4):  # each round frees 5 MiB more, then settles
        libc.free += 5 * MIB
        seconds(_trim.SETTLED_CHECKS + 2)
    assert libc.trims == 1
    seconds(int(_trim.SETTLED_GAP_S))
    assert libc.trims == 2


def test_a_free_under_the_bar_is_left_alone(setup: Any) -> None:
    libc, seconds = setup
    libc.free += _trim.TRIM_SETTLED - MIB
    seconds(120)
    assert libc.trims == 0


def test_glibc_is_found_and_trims() -> None:
    libc = _trim._libc()
    if libc is None:
        pytest.skip("no glibc with mallinfo2 here")
    assert libc.mallinfo2().uordblks > 0
    assert libc.malloc_trim(0) in (0, 1)
