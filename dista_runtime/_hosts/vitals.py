"""Now and then, a driver or worker tells its head how its process is (kind 43, vitals):
its pid and resident memory, and a worker's checkpoints written (count, bytes, seconds), so
that status and a dashboard name processes by pid and show where memory goes."""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable
from typing import Any, Final

import dista_proto as dp

from .._execution.checkpoints import written
from .engine import Engine

__all__ = ["EVERY_S", "Vitals", "read_vitals", "resident_bytes"]

#: How often; the first goes soon after start, once the head has our hello.
EVERY_S: Final = 2.0
FIRST_S: Final = 0.3
_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """This process's resident memory now (Linux), else its peak (getrusage)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024  # (bytes there, KiB here)


def read_vitals() -> dp.Vitals:
    count, size, ns = written()
    return dp.Vitals(os.getpid(), resident_bytes(), count, size, ns)


class Vitals:
    """Sends ``read_vitals()`` through ``tell`` every `EVERY_S` while ``engine`` lives."""

    def __init__(self, engine: Engine, tell: Callable[[dp.Vitals], None]) -> None:
        self._engine = engine
        self._tell = tell
        self._timer: Any = engine.loop.call_later(FIRST_S, self._tick)
        engine.exited.add_callback(lambda _: self._timer.cancel())

    def _tick(self) -> None:
        if self._engine.exited.done():
            return
        self._tell(read_vitals())
        self._engine.transmit()
        self._timer = self._engine.loop.call_later(EVERY_S, self._tick)
