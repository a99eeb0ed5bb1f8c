"""Backpressure on submitting: a driver keeps at most a budget of argument bytes in flight.

Theory of operation
-------------------
The driver's core counts what it keeps (`dista_proto.Driver.inflight_bytes`): the argument
of every unfinished task (kept for a resume, and possibly not written yet) and of every
actor call not answered. A user thread that submits (``.remote()``, ``dista.put``, an actor
call) while that count is over the budget waits here, outside the session's lock, until
answers bring it back: `InflightBudget.room` says whether the new argument fits (under the
lock), and the session wakes the waiters whose arguments fit after each batch of answers
(`wake`). A single argument larger than the budget goes once nothing else is in flight, so
there is no deadlock: in flight stays within ``max(budget, largest argument)``.

Who never waits: the I/O thread (the answers that make room arrive on it: an ``async``
driver on the loop that runs Dista, or an ``async def`` task, goes over the budget rather
than block its loop), and everyone when the budget is 0. A task in a worker that waits
here lends its slot (the session's ``on_block`` hook), as it does blocked in ``ref.get()``,
so the tasks it submitted can run and settle. A wait has no deadline: a lost head keeps it
waiting through the resume (the kept frames go again; their answers make room), and a
closed session wakes it to raise. It waits in slices, so Ctrl-C (or a task's cancel) is
seen within one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from .._net.limits import env_size

__all__ = ["DEFAULT_INFLIGHT_BYTES", "INFLIGHT_BYTES_ENV", "InflightBudget", "inflight_budget"]

#: The environment variable for the budget (a size: ``256MiB``, ``1GB``; 0 turns it off).
INFLIGHT_BYTES_ENV: Final = "DISTA_DRIVER_INFLIGHT_BYTES"
#: 256 MiB: 2,000 tasks of 10 MB each submitted in a loop stay under 1 GiB of driver memory
#: (measured in ``benchmarks/driver_memory.py``), while any one argument up to it does not
#: wait for the one before.
DEFAULT_INFLIGHT_BYTES: Final = 256 << 20


def inflight_budget() -> int:
    """The budget from ``DISTA_DRIVER_INFLIGHT_BYTES`` (default 256 MiB; 0: none);
    ValueError naming the variable for a bad value."""
    return env_size(INFLIGHT_BYTES_ENV, DEFAULT_INFLIGHT_BYTES)


class InflightBudget:
    """The waiters for room under a budget of in-flight argument bytes (guarded by the
    session's lock, except `wait`)."""

    __slots__ = ("_waiters", "limit", "waits")

    def __init__(self, limit: int = DEFAULT_INFLIGHT_BYTES) -> None:
        #: The budget in bytes; 0: no backpressure.
        self.limit: int = limit
        #: How many times a submitter had to wait (shown to tests and benchmarks).
        self.waits: int = 0
        self._waiters: list[tuple[int, Callable[[], None]]] = []

    def room(self, in_flight: int, nbytes: int, in_io_thread: bool) -> threading.Event | None:
        """None if an argument of ``nbytes`` may go now (``in_flight`` bytes are out);
        else an event set once it may be worth trying again (`wait` for it)."""
        limit = self.limit
        if not limit or not in_flight or in_flight + nbytes <= limit or in_io_thread:
            return None
        event = threading.Event()
        self._waiters.append((nbytes, event.set))
        self.waits += 1
        return event

    def wake(self, in_flight: int) -> list[Callable[[], None]]:
        """The waiters to wake now that ``in_flight`` bytes are out (they try again)."""
        waiters = self._waiters
        if not waiters:
            return []
        limit = self.limit
        fits = [w for w in waiters if not in_flight or in_flight + w[0] <= limit]
        if not fits:
            return []
        self._waiters = [w for w in waiters if w not in fits]
        return [wake for _, wake in fits]

    def close(self) -> list[Callable[[], None]]:
        """Every waiter (the session closed: they raise)."""
        out = [wake for _, wake in self._waiters]
        self._waiters = []
        return out


#: A wait wakes at least this often: Ctrl-C, or a cancel raised into a task's thread (which
#: a wait inside C code cannot see), is taken within one slice.
_SLICE_S: Final = 0.2


def wait(event: threading.Event) -> None:
    """Until ``event`` is set, in slices."""
    while not event.wait(_SLICE_S):
        pass
