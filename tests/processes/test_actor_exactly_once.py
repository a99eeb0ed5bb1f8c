"""Issue 25's real-process target: actor calls applied once, in one order, and answered
once, through head restarts by SIGKILL.

A head (restarted on the same port), 2 `dista worker` processes and a checkpoint store in
the test's directory; three driver processes (tests/processes/support/ledger_driver.py),
each its own `dista.init(address)`. The owner creates a ledger actor (`append` adds its
argument to a list and answers the list's length: not commutative) and hands its pickled
handle to a second driver; both make CALLS calls with distinct arguments, in batches, while
the test SIGKILLs the head and starts a new one RESTARTS times, at spaced points of their
progress. Before the first restart, while both wait at PAUSE_AT calls each, a third driver
(the leaver) makes LEAVER_CALLS calls, reads their answers and exits cleanly. Run with no periodic checkpoint, one every 1,000
calls and one every 5.

Then: every call has its answer (none failed, none left unanswered); the final list holds
every argument exactly once, nothing else; the call whose argument sits at index i
answered i + 1 (each answer agrees with the one serial order the list records); the
leaver's calls are in the list. The test prints these figures in one line either way.

The test process is no driver: the drivers' registries and the workers' imports are the
ledger module alone, so their registry hashes match.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.processes.support import ledger_actors as la
from tests.processes.support.ledger_run import Driver, Waits, figures
from tests.processes.support.restartable_cluster import processes

CALLS = 3000  # per calling driver
BATCH = 100
LEAVER_CALLS = 5
#: Where the two callers wait while the leaver calls: after 2 x 600 calls, so that the
#: first restart (at a quarter of the calls, 1,500) comes before the next checkpoint of
#: the actor that writes one every 1,000 calls.
PAUSE_AT = 600
RESTARTS = 3
#: How long a driver waits for one batch's answers, and for everything (its settings).
BATCH_TIMEOUT = 12.0
DEADLINE = 45.0
TIMING = {"batch": BATCH, "batch_timeout": BATCH_TIMEOUT, "deadline": DEADLINE}
#: How long the test waits for a step: a driver's handle, its progress, its exit.
STEP = 30.0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cadence", [0, 1000, 5], ids=lambda c: f"checkpoint_every={c}")
def test_two_drivers_calls_applied_and_answered_once_through_three_head_restarts(
    tmp_path: Path, cadence: int
) -> None:
    store = tmp_path / "checkpoints"
    with processes(tmp_path, DISTA_CHECKPOINT_URI=store.as_uri()) as procs:
        wait = Waits(procs, STEP)
        changed, drivers = wait.changed, wait.drivers
        procs.imports = la.__name__  # what the drivers register, nothing else
        try:
            procs.start_head()
            for _ in range(2):
                procs.start_worker()
            owner = Driver(procs, changed, "owner", "a", cadence, CALLS, PAUSE_AT, **TIMING)
            drivers.append(owner)
            wait("the owner's handle", lambda: bool(owner.handle) or owner.done)
            assert owner.handle, "\n".join(d.tail() for d in drivers)
            caller = Driver(procs, changed, "caller", "b", cadence, CALLS, PAUSE_AT, **TIMING)
            leaver = Driver(procs, changed, "leaver", "c", cadence, LEAVER_CALLS, **TIMING)
            drivers += [caller, leaver]
            for d in (caller, leaver):
                d.tell(owner.handle)
            wait("the drivers", lambda: all(d.ready or d.done for d in drivers))
            for d in (owner, caller):
                d.tell("GO")

            def settled() -> int:
                return owner.progress + caller.progress

            # The leaver's calls come after PAUSE_AT of each caller's (past the checkpoint
            # after 1,000 calls, not yet at the next); it reads their answers and exits
            # cleanly before any restart.
            wait("the pause", lambda: owner.paused and caller.paused)
            leaver.tell("GO")
            assert leaver.process.wait(STEP) == 0, leaver.tail()
            for d in (owner, caller):
                d.tell("GO")
            left = leaver.report()
            assert len(left["answers"]) == LEAVER_CALLS, left
            restarts, killed_at = [], []
            for k in range(1, RESTARTS + 1):
                wait(f"restart {k}'s point", lambda k=k: settled() >= 2 * CALLS * k // 4)
                began = time.monotonic()
                killed_at.append(settled())
                procs.kill_head()
                procs.start_head()
                restarts.append(time.monotonic() - began)
            wait("the calls", lambda: owner.called and caller.called)
            owner.tell("FINAL")
            wait("the owner's end", lambda: owner.done and caller.done)
            result = figures(owner.report(), [owner.report(), caller.report(), left])
            result["left_kept"] = sum(
                1 for item in left["answers"] if item in (owner.report().get("entries") or [])
            )
            result["killed_at"] = killed_at
            result["restart_s"] = [round(r, 2) for r in restarts]
            print(f"checkpoint_every={cadence}: {json.dumps(result)}")
            for d in (owner, caller):
                assert d.process.wait(STEP) == 0, d.tail()
            want = {
                "entries": 2 * CALLS + LEAVER_CALLS,
                "answered": 2 * CALLS + LEAVER_CALLS,
                "contradicting": 0,
                "shared_answers": 0,
                "swapped": 0,
                "failed": 0,
                "unmade": 0,
                "duplicates": 0,
                "missing": 0,
                "unasked": 0,
                "left_kept": LEAVER_CALLS,
            }
            wrong = {k: result[k] for k, v in want.items() if result[k] != v}
            assert not wrong, f"{wrong} (every figure: {json.dumps(result)})"
        finally:
            for d in drivers:
                d.close()
