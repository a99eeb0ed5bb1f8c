"""Tasks for the fault tests: importable, so workers know them by name."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import dista_runtime as dista


@dista.task
def exits(code: int) -> int:
    sys.exit(code)


@dista.task
def interrupts_itself() -> int:
    raise KeyboardInterrupt


@dista.task
def pid() -> int:
    return os.getpid()


@dista.task
def fib(n: int) -> int:
    """Every call a task, reading both children: a nested get per level."""
    if n < 2:
        return n
    a, b = fib.remote(n - 1), fib.remote(n - 2)
    return dista.get(a) + dista.get(b)


@dista.task
def nap(seconds: float, marker: str = "") -> int:
    """Sleep, leaving a file named ``marker`` when it starts (a trace that it ran)."""
    if marker:
        Path(marker).write_text(str(os.getpid()))
    time.sleep(seconds)
    return os.getpid()


@dista.task
def spin(seconds: float, marker: str = "") -> int:
    """Busy Python code (interruptible at any instruction)."""
    if marker:
        Path(marker).write_text(str(os.getpid()))
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return os.getpid()


@dista.task
def quick() -> int:
    return os.getpid()


@dista.task
def big_argument(data: bytes) -> int:
    return len(data)


@dista.task
def rss() -> int:
    """This worker's resident memory, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@dista.task
def stuck_in_c(seconds: int, marker: str = "") -> int:
    """Blocked in C code, where no interrupt reaches it."""
    import ctypes

    if marker:
        Path(marker).write_text(str(os.getpid()))
    ctypes.CDLL(None).sleep(seconds)
    return os.getpid()


@dista.task
def blob(megabytes: int) -> bytes:
    return b"x" * (megabytes << 20)


class Odd(ValueError):
    def __init__(self, value: int) -> None:
        super().__init__(f"{value} is odd")
        self.value = value


@dista.task
def check_even(value: int) -> int:
    if value % 2:
        raise Odd(value)
    return value


@dista.task
def outer_check(value: int) -> int:
    return check_even.remote(value).get() + 1


@dista.task
def step(i: int, nested: bool, log: str) -> int:
    """Short and self-contained, until the one call that submits and reads a task."""
    with open(log, "a") as f:
        f.write(f"{i}\n")
    if nested:
        return dista.get(quick.remote()) and i
    return i


@dista.task
async def afib(n: int) -> int:
    """fib with every call an ``async def`` task awaiting its children."""
    if n < 2:
        return n
    a, b = afib.remote(n - 1), afib.remote(n - 2)
    return await a + await b
