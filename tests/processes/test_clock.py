"""Deadlines follow the monotonic clock: a wall clock stepped by hours changes nothing.

A real head and two `dista worker` processes run under libfaketime (Debian's ``faketime``
package) with their monotonic clock left alone (``FAKETIME_DONT_FAKE_MONOTONIC=1``); the
test steps their wall clock through a control file (``FAKETIME_TIMESTAMP_FILE``, re-read on
every call with ``FAKETIME_NO_CACHE=1``) two hours forward, then two hours behind, while
this process (a driver, on the real clock) keeps tasks running. With a short liveness
timeout (``DISTA_LIVENESS_TIMEOUT=2``):

- no healthy worker is dropped: the head still counts both, and tasks keep coming back;
- a worker SIGSTOPped after the clock stepped back is still noticed as lost within the
  liveness timeout plus one of the head's ticks (and a margin for polling on a busy
  machine). Before deadlines left the wall clock, the step forward dropped every worker at
  once, and after the step back a stopped worker was never noticed.

Python 3.11's ``time.sleep`` fails under libfaketime 0.9.10 when the monotonic clock is not
faked (libfaketime issue 426: ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)``), so the
processes under it must not sleep that way: the head and worker do not, nor do these tasks.
"""

from __future__ import annotations

import contextlib
import glob
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

import dista_runtime as dista
from tests.processes.support.restartable_cluster import Processes, processes, wait_for_workers
from tests.support import tasks

#: Where Debian (and Ubuntu) install libfaketime, per architecture.
_LIBFAKETIME: Final = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
pytestmark = pytest.mark.skipif(
    not _LIBFAKETIME,
    reason="libfaketime is not installed (Debian's faketime package: apt-get install faketime)",
)

LIVENESS_S: Final = 2.0
#: How often the head checks for silent workers with that timeout (a quarter of it).
TICK_S: Final = LIVENESS_S / 4
#: Polling the head's stats from here, on a small shared machine.
MARGIN_S: Final = 1.0
#: How long a worker pauses (SIGSTOP) across each step: well within the liveness timeout.
PAUSE_S: Final = 0.7
HOURS_2: Final = 2 * 3600


class WallClock:
    """The faked wall clock of every process started with `env`: an offset in seconds
    from the real one, written to libfaketime's control file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.step(0)

    def step(self, seconds: int) -> None:
        # Written whole and renamed: a process reading it midway would see no offset.
        part = self.path.with_suffix(".part")
        part.write_text(f"{seconds:+d}\n")
        part.replace(self.path)

    def env(self) -> dict[str, str]:
        return {
            "LD_PRELOAD": _LIBFAKETIME[0],
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }


@contextlib.contextmanager
def cluster(tmp_path: Path) -> Iterator[tuple[Processes, WallClock]]:
    """A head and two workers under a faked wall clock, and a driver (this process)."""
    clock = WallClock(tmp_path / "faketime")
    with processes(tmp_path, DISTA_LIVENESS_TIMEOUT=str(LIVENESS_S), **clock.env()) as procs:
        procs.start_head()
        for _ in range(2):
            procs.start_worker()
        try:
            with dista.init(procs.address):
                wait_for_workers(2)
                yield procs, clock
        finally:
            for worker in procs.workers:  # a stopped worker must not outlive the test
                with contextlib.suppress(ProcessLookupError):
                    worker.send_signal(signal.SIGCONT)


def _offset() -> float:
    """How far a worker's wall clock is from ours, in seconds (to check the step took)."""
    return float(dista.get(tasks.wall_clock.remote(), timeout=10)) - time.time()


def _hold(procs: Processes, what: str) -> set[int]:
    """Leave the workers idle past the liveness timeout (only their heartbeats tell the
    head they live), then run tasks for a second, checking all along that the head counts
    both workers, and at the end that neither lost the head meanwhile (it would rejoin at
    once: a count polled from here may miss that); the pids of the workers that ran them."""
    pids: set[int] = set()
    began = time.monotonic()
    idle = LIVENESS_S + TICK_S + MARGIN_S
    n = 0
    while (elapsed := time.monotonic() - began) < idle + 1.0:
        counted = dista.stats().workers
        assert counted == 2, procs.why(
            f"{what}: the head counts {counted} workers, not 2, after {elapsed:.1f} s"
        )
        if elapsed >= idle:
            refs = [tasks.add.remote(n, i) for i in range(20)]
            assert dista.get(refs, timeout=10) == [n + i for i in range(20)], what
            pids.update(dista.get([tasks.pid.remote() for _ in range(4)], timeout=10))
            n += 1
        time.sleep(0.05)
    for worker in procs.workers:
        assert "lost the head" not in procs.output(worker), procs.why(f"{what}: dropped")
    return pids


@pytest.mark.timeout(120)
def test_healthy_workers_stay_while_the_wall_clock_steps_forward_and_back(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path) as (procs, clock):
        workers = {w.pid for w in procs.workers}
        # Both serve before any step (each step's hold below idles past the liveness
        # timeout; a hold here too, as a control, cost 4.5 s and showed nothing new).
        ran = set(dista.get([tasks.pid.remote() for _ in range(8)], timeout=10))
        paused = procs.workers[0]
        for offset, what in [
            (HOURS_2, "the wall clock stepped 2 h forward"),
            (-HOURS_2, "the wall clock stepped 4 h back"),
            (0, "the wall clock stepped 2 h forward again"),
        ]:
            # A pause well within the liveness timeout (a GC pause, a busy host) across
            # the step: its silence must not look hours long.
            paused.send_signal(signal.SIGSTOP)
            clock.step(offset)
            time.sleep(PAUSE_S)
            paused.send_signal(signal.SIGCONT)
            ran |= _hold(procs, what)
            assert abs(_offset() - offset) < 60, "libfaketime did not step the clock"
        assert ran == workers, procs.why(f"tasks ran on {ran}, not on both workers {workers}")


@pytest.mark.timeout(90)
def test_a_stopped_worker_is_noticed_after_the_wall_clock_stepped_back(tmp_path: Path) -> None:
    with cluster(tmp_path) as (procs, clock):
        clock.step(-HOURS_2)
        assert abs(_offset() + HOURS_2) < 60, "libfaketime did not step the clock"
        _hold(procs, "the wall clock stepped 2 h back")
        victim = procs.workers[0]
        victim.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        limit = LIVENESS_S + TICK_S + MARGIN_S
        while dista.stats().workers != 1:
            waited = time.monotonic() - stopped
            assert waited < 4 * limit, procs.why(
                f"the stopped worker was not noticed as lost in {waited:.1f} s"
            )
            time.sleep(0.05)
        noticed = time.monotonic() - stopped
        assert 1.0 <= noticed <= limit, procs.why(
            f"the stopped worker was noticed after {noticed:.1f} s, not within {limit:g} s"
        )
        # The other worker still serves, and nothing waits for the stopped one.
        assert dista.get([tasks.add.remote(i, 1) for i in range(10)], timeout=10) == [
            i + 1 for i in range(10)
        ]
