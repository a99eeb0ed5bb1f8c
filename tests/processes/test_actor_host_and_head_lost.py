"""A call's answer reaches its caller when the actor comes back on another worker: the head
and the actor's worker are SIGKILLed together, while calls are in flight.

A head (restarted on the same port, with a short recovery grace), 2 `dista worker`
processes sharing a checkpoint store in the test's directory, and two driver processes
(tests/processes/support/ledger_driver.py): an owner that creates a ledger actor
checkpointed every 5 calls (`append` adds its argument to a list and answers the list's
length: not commutative), and a caller given its handle; both make CALLS calls in
batches, at once. Once KILL_AT calls are answered, the test SIGKILLs the head and the
worker hosting the ledger at once and starts a new head: the drivers resume (in whatever
order), the ledger waits for its worker (the grace at most: it never comes back) and is
restored on the other worker from its newest checkpoint, the calls past it replayed in
the order the first head ran them (their answers said where: one order).

What the user sees: every call answered, none failed; the final list holds every argument
once and nothing else; the call whose argument sits at index i answered i + 1, whichever
driver made it; the ledger now lives on the other worker. And the owner's log says, once,
why its calls wait.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from tests.processes.support import ledger_actors as la
from tests.processes.support.ledger_run import Driver, Waits, figures
from tests.processes.support.restartable_cluster import processes

CALLS = 600
BATCH = 50
KILL_AT = 200
#: The new head waits this long for the lost worker to rejoin with the live ledger before
#: restoring it from its checkpoint elsewhere (the default, 30 s, is a user's).
GRACE = "1.5"
#: How long a test step may take: a handle, the progress, the end.
STEP = 30.0


@pytest.mark.timeout(90)
def test_answers_reach_the_caller_when_head_and_host_are_killed_together(tmp_path: Path) -> None:
    store = tmp_path / "checkpoints"
    with processes(tmp_path, DISTA_CHECKPOINT_URI=store.as_uri()) as procs:
        wait = Waits(procs, STEP)
        changed, drivers = wait.changed, wait.drivers
        procs.imports = la.__name__  # what the driver registers, nothing else
        head_args = ("--recovery-grace", GRACE)
        try:
            procs.start_head(args=head_args)
            workers = [procs.start_worker() for _ in range(2)]
            # Both joined before the ledger is made (a worker's first dial that finds no
            # head ends it: one still starting when the head is killed would be gone).
            deadline = time.monotonic() + STEP
            while "workers: 2 " not in procs.status():
                assert time.monotonic() < deadline, procs.why("the workers did not join")
                time.sleep(0.1)
            owner = Driver(
                procs,
                changed,
                "owner",
                "a",
                5,
                CALLS,
                batch=BATCH,
                batch_timeout=20.0,
                options=("--log-info",),
            )
            drivers.append(owner)
            wait("the ledger", lambda: bool(owner.handle) or owner.done)
            assert owner.host in {w.pid for w in workers}, owner.tail()
            host = next(w for w in workers if w.pid == owner.host)
            other = next(w for w in workers if w is not host)
            caller = Driver(
                procs, changed, "caller", "b", 5, CALLS, batch=BATCH, batch_timeout=20.0
            )
            drivers.append(caller)
            caller.tell(owner.handle)
            wait("the caller", lambda: caller.ready or caller.done)
            for d in (owner, caller):
                d.tell("GO")

            def settled() -> int:
                return owner.progress + caller.progress

            wait(f"{KILL_AT} answers", lambda: settled() >= KILL_AT or owner.done)
            killed_at = settled()  # (the next batches are on their way)
            assert procs.head is not None
            for p in (procs.head, host):
                p.send_signal(signal.SIGKILL)
            for p in (procs.head, host):
                p.wait(10)
            procs.start_head(args=head_args)
            wait("the calls", lambda: (owner.called and caller.called) or owner.done)
            owner.tell("FINAL")
            wait("the drivers' end", lambda: owner.done and caller.done)
            report = owner.report()
            result = figures(report, [report, caller.report()])
            result["killed_at"] = killed_at
            # What the driver's log says it resumed with: the refs of the batch on its way.
            resumed = re.findall(r"resumed as driver \d+ \((\d+) objects\)", owner.log.read_text())
            result["resent"] = [int(n) for n in resumed]
            print(json.dumps(result))
            for d in (owner, caller):
                assert d.process.wait(STEP) == 0, d.tail()
            want = {
                "entries": 2 * CALLS,
                "answered": 2 * CALLS,
                "contradicting": 0,
                "shared_answers": 0,
                "swapped": 0,
                "failed": 0,
                "unmade": 0,
                "duplicates": 0,
                "missing": 0,
                "unasked": 0,
            }
            wrong = {k: result[k] for k, v in want.items() if result[k] != v}
            assert not wrong, procs.why(f"{wrong} (every figure: {json.dumps(result)})")
            assert report["host"] == other.pid, report.get("host")
            assert resumed and int(resumed[0]) > 0, f"no call was on its way: {result}"
            # The driver's log said why its calls stalled, once, and when they went on.
            log = owner.log.read_text()
            waits = re.findall(r"WARNING dista.driver: .*waits for its worker.*", log)
            assert len(waits) == 1, owner.tail(30)
            at_most = re.search(r"([0-9.]+) s at most", waits[0])
            assert at_most and 0 < float(at_most[1]) <= float(GRACE), waits
            assert "`dista status` shows it" in waits[0], waits
            goes_on = re.findall(r"INFO dista.driver: .*actor 0x[0-9a-f]+ runs on .* again", log)
            assert len(goes_on) == 1, owner.tail(30)
        finally:
            for d in drivers:
                d.close()
