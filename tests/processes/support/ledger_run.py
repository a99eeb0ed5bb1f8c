"""Driver processes (tests/processes/support/ledger_driver.py) calling one ledger actor, and
what their reports show: for the tests of actor calls through head (and worker) losses by
real signals (test_actor_exactly_once.py, test_actor_host_and_head_lost.py).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from typing import IO, Any

from tests.processes.support.restartable_cluster import ROOT, Processes


class Driver:
    """A ledger_driver process; a thread reads what it prints (its handle, its progress)
    and wakes whoever waits on ``changed``."""

    def __init__(
        self,
        procs: Processes,
        changed: threading.Condition,
        role: str,
        name: str,
        cadence: int,
        calls: int,
        pause_at: int = 0,
        *,
        batch: int = 100,
        batch_timeout: float = 12.0,
        deadline: float = 45.0,
        options: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.out = procs.logs / f"driver-{name}.json"
        self.log = procs.logs / f"driver-{name}.log"
        self.changed = changed
        self.handle = ""
        self.host = 0  # (the owner's) the process ID of the worker its ledger started on
        self.ready = False
        self.paused = False
        self.progress = 0
        self.called = False
        self.done = False
        argv = [sys.executable, "-m", "tests.processes.support.ledger_driver"]
        argv += [procs.address, role, name, "--out", str(self.out), "--cadence", str(cadence)]
        argv += ["--calls", str(calls), "--batch", str(batch)]
        argv += ["--batch-timeout", str(batch_timeout), "--deadline", str(deadline)]
        argv += ["--pause-at", str(pause_at), *options]
        with open(self.log, "ab") as err:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=procs.env,
                cwd=ROOT,
                text=True,
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        for line in stdout:
            word, _, rest = line.strip().partition(" ")
            with self.changed:
                if word == "HANDLE":
                    self.handle = line.strip()
                elif word == "HOST":
                    self.host = int(rest)
                elif word == "PAUSED":
                    self.paused = True
                elif word == "READY":
                    self.ready = True
                elif word == "PROGRESS":
                    self.progress = int(rest)
                elif word == "CALLED":
                    self.called = True
                elif word == "DONE":
                    self.done = True
                self.changed.notify_all()
        with self.changed:
            self.done = True
            self.changed.notify_all()

    def tell(self, line: str) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(line + "\n")
        stdin.flush()

    def report(self) -> dict[str, Any]:
        assert self.out.exists(), f"driver {self.name} wrote no report: {self.tail()}"
        report: dict[str, Any] = json.loads(self.out.read_text())
        return report

    def tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace").splitlines()[-lines:]
        return f"--- driver {self.name} ({self.process.poll()}):\n" + "\n".join(text)

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


class Waits:
    """Waits for what the drivers print: a step that takes longer than ``step`` seconds
    fails with every driver's last lines and the cluster's state."""

    def __init__(self, procs: Processes, step: float) -> None:
        self.changed = threading.Condition()
        self.drivers: list[Driver] = []
        self._procs = procs
        self._step = step

    def __call__(self, what: str, ready: Callable[[], bool]) -> None:
        with self.changed:
            if not self.changed.wait_for(ready, timeout=self._step):
                tails = "\n".join(d.tail() for d in self.drivers)
                raise AssertionError(self._procs.why(f"waited {self._step} s for {what}\n{tails}"))


def figures(owner: dict[str, Any], reports: list[dict[str, Any]]) -> dict[str, Any]:
    """What the run shows: answers that contradict the final list's order, calls with no
    answer, and what the list holds twice, lacks or holds unasked."""
    entries: list[str] = owner.get("entries") or []
    first: dict[str, int] = {}
    for index, item in enumerate(entries):
        first.setdefault(item, index)
    made = {item for r in reports for item in (*r["answers"], *r["errors"])}
    answers = {item: n for r in reports for item, n in r["answers"].items()}
    # Two more views of the order, which a single lost entry does not inflate: lengths
    # answered to more than one call (no serial order gives two calls the same place), and
    # calls answered in one order but listed in the other (by neighbouring answers).
    by_answer = sorted(answers, key=answers.__getitem__)
    places = [first.get(item, -1) for item in by_answer]
    return {
        "calls": len(made) + sum(r["unmade"] for r in reports),
        "answered": len(answers),
        "contradicting": sum(first.get(item, -2) + 1 != n for item, n in answers.items()),
        "shared_answers": len(answers) - len(set(answers.values())),
        "swapped": sum(a > b for a, b in pairwise(places)),
        "failed": sum(len(r["errors"]) for r in reports),
        "unmade": sum(r["unmade"] for r in reports),
        "why": Counter(
            re.sub(r"0x[0-9a-f]+", "0x…", e)[:120] for r in reports for e in r["errors"].values()
        ).most_common(3),
        "entries": len(entries)
        if owner.get("entries") is not None
        else owner.get("entries_error"),
        "duplicates": len(entries) - len(first),
        "missing": len(made - set(first)),
        "unasked": len(set(first) - made),
        # (what a failure shows: a few answers that contradict the list, and their places)
        "examples": [
            (item, n, first.get(item, -2) + 1)
            for item, n in sorted(answers.items(), key=lambda x: x[1])
            if first.get(item, -2) + 1 != n
        ][:4],
    }
