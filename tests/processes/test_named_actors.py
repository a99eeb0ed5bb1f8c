"""Named actors with real processes: a creator process names an actor, this process (a
second driver) looks it up and calls it; a taken name is an error; a head SIGKILLed and
started again still finds it; the creator leaving does not end it while we hold it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import dista_runtime as dista
from tests.processes.support import recovery_tasks as rt
from tests.processes.support.restartable_cluster import ROOT, processes, wait_for_workers


def _line(creator: subprocess.Popen[str], want: str) -> None:
    assert creator.stdout is not None
    while True:
        line = creator.stdout.readline()
        assert line, f"the creator exited ({creator.poll()}) before {want!r}"
        if line.startswith(want):
            return


def test_a_named_actor_is_shared_survives_a_head_restart_and_outlives_its_creator(
    tmp_path: Path,
) -> None:
    with processes(tmp_path, DISTA_RECOVERY_GRACE="10") as procs:
        procs.start_head()
        procs.start_worker()
        creator = subprocess.Popen(
            [sys.executable, "-m", "tests.processes.support.named_creator", procs.address,
             procs.imports],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=procs.env, cwd=ROOT,
        )  # fmt: skip
        try:
            _line(creator, "ready")
            with dista.init(procs.address):
                wait_for_workers(1)
                ledger = dista.get_actor("ledger", rt.Recorder)
                assert ledger.record.remote("b").get(timeout=30) == 2
                # The name is taken: a clear error, and the actor is untouched.
                with pytest.raises(ValueError, match="'ledger' is taken"):
                    rt.Recorder.options(name="ledger").remote("again")
                with pytest.raises(ValueError, match="no actor named 'nobody'"):
                    dista.get_actor("nobody")
                # The head dies and comes back: the creator names it again on its resume.
                procs.kill_head()
                procs.start_head()
                again = dista.get_actor("ledger", rt.Recorder, timeout=30)
                assert again == ledger
                assert again.record.remote("c").get(timeout=30) >= 3
                # The creator leaves: we hold it, so it lives on.
                assert creator.stdin is not None
                creator.stdin.write("go\n")
                creator.stdin.flush()
                _line(creator, "left")
                assert creator.wait(30) == 0
                time.sleep(0.2)  # (its leave reaches the head)
                name, _, items = ledger.state.remote().get(timeout=30)
                assert name == "ledger" and items[-1] == "c"
                assert ledger.record.remote("d").get(timeout=30) == len(items) + 1
            # We were its last holder: leaving lets go of it, and it ends now, not after the
            # recovery grace (10 s here).
            with dista.init(procs.address):
                deadline = time.monotonic() + 5
                while True:
                    try:
                        dista.get_actor("ledger")
                    except ValueError:
                        break
                    assert time.monotonic() < deadline, "it outlived its last holder"
                    time.sleep(0.1)
        finally:
            if creator.poll() is None:
                creator.kill()
            creator.wait()
            for pipe in (creator.stdin, creator.stdout):
                if pipe is not None:
                    pipe.close()
