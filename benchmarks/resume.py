"""A driver holding 10,000 objects through a head restart: how soon it has resumed.

Run it from a checkout after ``python -m pip install -e .``::

    python benchmarks/resume.py                # median of 5 runs
    python benchmarks/resume.py --runs 9 --small 8000 --stored 1000 --unfinished 1000
    python benchmarks/resume.py --down 5       # the new head starts 5 s after the kill

Each run starts a cluster of its own, as separate processes on loopback TCP: a head
(``python -m dista_runtime.cli head --port P``) and two workers (``... worker --head
127.0.0.1:P --import benchmarks.resume``); this process is the driver
(``dista.init("127.0.0.1:P")``). The driver submits and keeps the refs of:

- ``--small`` tasks returning an ``int``: inline results, which the driver keeps;
- ``--stored`` tasks returning 100 KiB of ``bytes``: stored on the workers, not fetched;
- one gate task that waits for a file, and ``--unfinished`` tasks that take its result:
  queued behind it (awaiting their input) when the head dies.

Once every small and stored result is done and the head's status counts them all (10,001
objects by default: the gate is one), the head is killed with SIGKILL, the gate's file is
made (so that the gate, run again after the restart, ends at once), and after ``--down``
seconds (default 0) a new head is started on the same port. Timed from the moment the new
head listens (its first stderr line as read here, or the poller's first answer from it if
that came first: this process is busy then, and reads the line late at times):

- **reconnect**: when the driver connected to the new head: its WARNING ``dista driver:
  reached the head at ... again after X s; resumed as driver N (M objects)`` on the logger
  ``dista.driver`` (said once the link has lasted 0.5 s), X after the driver's own "lost"
  line, both stamped by a handler in this process;
- **objects** and **holding**: the new head's status (what ``dista status --head
  127.0.0.1:P`` asks, sent every 10 ms by a poller process started before the kill) counts
  as many objects as the old head did, and its worker lines as many held objects (the
  workers have rejoined, and their holdings met the driver's claims);
- **unfinished get**: a ``get`` of the last unfinished task's result, called in a thread the
  moment the head was killed, returns (the head has re-run the gate and its dependents);
- **resumed**: the latest of those three: the new head has everything, and works.

Also printed: SIGKILL to listening (this machine's cost of starting a Python process, not
Dista's), and from SIGKILL, a ``get`` of a stored result never fetched before (called at
the kill: the driver knows where it is, and reads it from its worker with no head). A
run ends by checking every value it kept. The driver's and workers' WARNING lines are
kept. A run that does not
resume within 30 s is reported as FAILED with the new head's status and what every process
logged, and the next run starts. Printed per measure: the median over the runs that
resumed, the spread (min and max), and the median resume against the 2 s target.
CLOCK_MONOTONIC is shared by the processes, so the poller's stamps and this process's
compare.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
try:
    import dista_runtime as dista
except ImportError:  # not installed: use the checkout this script lives in
    sys.path[:0] = [str(ROOT), str(ROOT / "bindings")]
    import dista_runtime as dista

KiB = 1 << 10
STORED_SIZE = 100 * KiB
TARGET_S = 2.0
#: The module workers import: this one, by its importable name.
TASKS = "benchmarks.resume"
POLL_S = 0.010
#: How long the poller waits for the new head's counts, and the gets for their values.
WAIT_S = 30.0


class Failed(Exception):
    """A run that did not resume: what went wrong, and what the processes said."""


@dista.task
def small(i: int) -> int:
    return i


@dista.task
def stored(i: int) -> bytes:
    return i.to_bytes(4, "little") * (STORED_SIZE // 4)


@dista.task
def gate(path: str, timeout: float) -> int:
    """Waits until ``path`` exists (the slow task the unfinished ones queue behind)."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear in {timeout} s")
        time.sleep(0.005)
    return 1


@dista.task
def after(opened: int, i: int) -> int:
    return opened + i


# -- processes ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_head(port: int, extra: list[str] | None = None) -> tuple[subprocess.Popen[str], float]:
    """A head on ``port``, and the monotonic time its "listening" line was read."""
    command = [sys.executable, "-m", "dista_runtime.cli", "head", "--port", str(port)]
    head = subprocess.Popen(
        command + (extra or []),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert head.stderr is not None
    line = head.stderr.readline()
    listening = time.monotonic()
    if "listening" not in line:
        head.kill()
        raise SystemExit(f"the head did not start: {line!r}{head.stderr.read()}")
    # Keep reading its stderr, so that it never blocks on a full pipe.
    threading.Thread(target=head.stderr.read, daemon=True).start()
    return head, listening


#: What each worker printed, by PID.
WORKER_LINES: dict[int, list[str]] = {}


def _keep(stream: Any, lines: list[str]) -> None:
    lines.extend(str(line.rstrip(), "utf-8", "replace") for line in stream)


def start_worker(
    port: int, tasks: str = TASKS, env: dict[str, str] | None = None, stderr: Any = None
) -> subprocess.Popen[bytes]:
    """A worker (``dista worker``) for the head on ``port``, importing module ``tasks``."""
    command = [sys.executable, "-m", "dista_runtime.cli", "worker"]
    command += ["--head", f"127.0.0.1:{port}", "--import", tasks]
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr or subprocess.DEVNULL,
    )


def status(port: int, timeout: float = 2.0) -> str:
    """The head's status text, as ``dista status`` prints it."""
    import dista_proto as dp
    from dista_runtime._hosts.observer import ask
    from dista_runtime.loops import run

    answer = run(lambda loop: ask(loop, "127.0.0.1", port, dp.Status(), timeout))
    assert isinstance(answer, dp.Status)
    return answer.text or ""


def count(text: str, name: str) -> int:
    match = re.search(rf"\b{name}: (\d+)", text)
    assert match is not None, text
    return int(match.group(1))


def held(text: str) -> int:
    """Objects the head knows workers hold (the sum of its workers' lines)."""
    return sum(int(n) for n in re.findall(r"holding (\d+)", text))


def wait_for(port: int, what: str, predicate: Any, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            text = status(port)
            if predicate(text):
                return text
        except ConnectionError:
            text = "(no answer)"
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} did not happen in {timeout} s; status: {text}")
        time.sleep(0.02)


def stop(*procs: subprocess.Popen[Any] | None) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.kill()
    for proc in procs:
        if proc is not None:
            proc.wait()


# -- the poller (a process of its own, so that its polling costs the driver no GIL) --------


def poll(port: int, objects: int, holding: int, timeout: float) -> None:
    """After a line on stdin: poll the head's status every `POLL_S`; print ``first T`` at
    its first answer and ``counts T OBJECTS HOLDING`` whenever they change, until they
    reach ``objects`` and ``holding`` or ``timeout`` passes."""
    sys.stdin.readline()
    deadline = time.monotonic() + timeout
    last = (-1, -1)
    while time.monotonic() < deadline:
        try:
            text = status(port, 1.0)
        except ConnectionError:
            time.sleep(POLL_S)
            continue
        now = time.monotonic()
        if last[0] < 0:
            print(f"first {now}", flush=True)
        seen = (count(text, "objects"), held(text))
        if seen != last:
            last = seen
            print(f"counts {now} {seen[0]} {seen[1]}", flush=True)
        if seen[0] >= objects and seen[1] >= holding:
            return
        time.sleep(POLL_S)
    print(f"timeout {time.monotonic()} {last[0]} {last[1]}", flush=True)


# -- one run -----------------------------------------------------------------------------


class Stamps(logging.Handler):
    """Stamps every record of ``dista.driver`` with the monotonic clock."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((time.monotonic(), record.getMessage()))


@dataclass
class Run:
    objects_before: int = 0  # objects the old head counted
    holding_before: int = 0  # objects the old head knew workers hold
    kill_to_listen: float = 0.0
    reconnect: float = 0.0
    first_status: float = 0.0
    objects: float = 0.0
    holding: float = 0.0
    unfinished_get: float = 0.0
    stored_get: float = 0.0  # from the kill, not from listening
    warnings: list[str] = field(default_factory=list)
    counts: list[tuple[float, int, int]] = field(default_factory=list)


def failed(why: str, port: int, run: Run, workers: list[subprocess.Popen[bytes]]) -> None:
    """Raise `Failed` with ``why``, the new head's status, and what the processes said."""
    try:
        text = status(port)
    except ConnectionError as e:
        text = f"(no status: {e})\n"
    said = [f"the new head's status:\n{text}this driver logged:", *run.warnings]
    for proc in workers:
        state = "running" if proc.poll() is None else f"exited with {proc.returncode}"
        said.append(f"worker (PID {proc.pid}, {state}) said:")
        said += WORKER_LINES.get(proc.pid, [])
    raise Failed("\n".join([why, *said]))


def timed_get(ref: dista.ObjectRef[Any], out: dict[str, Any], key: str) -> None:
    try:
        out[key + "_value"] = ref.get(timeout=WAIT_S)
        out[key] = time.monotonic()
    except (dista.DistaError, ConnectionError) as e:
        out[key + "_error"] = e


def one_run(args: argparse.Namespace, stamps: Stamps) -> Run:
    port = free_port()
    run = Run()
    head, _ = start_head(port)
    workers = [start_worker(port, stderr=subprocess.PIPE) for _ in range(2)]
    for proc in workers:  # their WARNING lines, for `failed`
        lines = WORKER_LINES[proc.pid] = []
        threading.Thread(target=_keep, args=(proc.stderr, lines), daemon=True).start()
    new_head: subprocess.Popen[str] | None = None
    poller: subprocess.Popen[str] | None = None
    gate_dir = tempfile.mkdtemp(prefix="dista-resume-")
    gate_path = os.path.join(gate_dir, "open")
    try:
        wait_for(port, "two workers joining", lambda t: count(t, "workers") == 2)
        dista.init(f"127.0.0.1:{port}")
        try:
            smalls = [small.remote(i) for i in range(args.small)]
            storeds = [stored.remote(i) for i in range(args.stored)]
            opened = gate.remote(gate_path, 300.0)
            unfinished = [after.remote(opened, i) for i in range(args.unfinished)]
            deadline = time.monotonic() + 120.0
            while not all(r.done() for r in smalls) or not all(r.done() for r in storeds):
                if time.monotonic() > deadline:
                    raise SystemExit("the small and stored tasks did not finish in 120 s")
                time.sleep(0.01)
            total = args.small + args.stored + 1 + args.unfinished
            text = wait_for(
                port,
                f"{total} objects, {args.stored} held by workers",
                lambda t: count(t, "objects") >= total and held(t) >= args.stored,
            )
            run.objects_before, run.holding_before = count(text, "objects"), held(text)
            assert not opened.done() and not any(r.done() for r in unfinished)

            poller = subprocess.Popen(
                [
                    *(sys.executable, __file__, "--poll", str(port)),
                    *(str(run.objects_before), str(run.holding_before)),
                ],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(0.5)  # the poller has imported Dista and waits for its line
            del stamps.records[:]
            gets: dict[str, Any] = {}

            killed = time.monotonic()
            head.send_signal(signal.SIGKILL)
            head.wait()
            Path(gate_path).touch()
            assert poller.stdin is not None and poller.stdout is not None
            poller.stdin.write("go\n")
            poller.stdin.flush()
            threads = [
                threading.Thread(
                    target=timed_get, args=(unfinished[-1], gets, "unfinished"), daemon=True
                ),
                # The last stored result: never fetched by this driver.
                threading.Thread(
                    target=timed_get, args=(storeds[-1], gets, "stored"), daemon=True
                ),
            ]
            for t in threads:
                t.start()
            time.sleep(args.down)
            new_head, listening = start_head(port)

            lines = poller.stdout.read().split("\n")
            poller.wait()
            for t in threads:
                t.join(WAIT_S + 5.0)
            run.warnings = [f"{t - killed:+.3f} s after SIGKILL: {m}" for t, m in stamps.records]
            first = listening
            for line in filter(None, lines):
                kind, *rest = line.split()
                if kind == "first":
                    first = float(rest[0])
                elif kind == "counts":
                    run.counts.append((float(rest[0]), int(rest[1]), int(rest[2])))
                else:
                    failed(f"the new head's counts stayed short: {line}", port, run, workers)
            # The head's line reaches this busy process late at times: the poller's first
            # answer (within POLL_S of listening) then says when it listened.
            listening = min(listening, first)
            run.first_status = first - listening
            run.kill_to_listen = listening - killed
            run.counts = [(t - listening, n, h) for t, n, h in run.counts]
            run.objects = min(t for t, n, _ in run.counts if n >= run.objects_before)
            run.holding = min(t for t, _, h in run.counts if h >= run.holding_before)
            for key in ("unfinished", "stored"):
                if key + "_error" in gets:
                    failed(f"the {key} get failed: {gets[key + '_error']!r}", port, run, workers)
            run.unfinished_get = gets["unfinished"] - listening
            run.stored_get = gets["stored"] - killed
            said_by = time.monotonic() + 3.0  # the line comes once the link lasted 0.5 s
            while time.monotonic() < said_by and not any(
                "resumed as driver" in m for _, m in stamps.records
            ):
                time.sleep(0.05)
            reached = [m for _, m in stamps.records if "resumed as driver" in m]
            lost = [t for t, m in stamps.records if "lost the head" in m]
            if not reached or not lost:
                failed("no resume WARNING from the driver", port, run, workers)
            down = float(reached[-1].split(" again after ", 1)[1].split(" s", 1)[0])
            run.reconnect = lost[0] + down - listening

            check(smalls, storeds, unfinished)
        finally:
            dista.shutdown()
    finally:
        stop(poller, head, new_head, *workers)
        with contextlib.suppress(OSError):
            os.unlink(gate_path)
        os.rmdir(gate_dir)
    return run


def check(
    smalls: list[dista.ObjectRef[int]],
    storeds: list[dista.ObjectRef[bytes]],
    unfinished: list[dista.ObjectRef[int]],
) -> None:
    """Every value kept through the restart is the right one."""
    for i, ref in enumerate(smalls):
        assert ref.get(timeout=60.0) == i
    for i in (0, len(storeds) // 2, len(storeds) - 1):
        value = storeds[i].get(timeout=60.0)
        assert len(value) == STORED_SIZE and value[:4] == i.to_bytes(4, "little"), i
    for i, ref in enumerate(unfinished):
        assert ref.get(timeout=60.0) == 1 + i


# -- main --------------------------------------------------------------------------------

#: (field, label): seconds from the new head listening, but for the first and the last.
COLUMNS = [
    ("kill_to_listen", "SIGKILL to the new head listening"),
    ("reconnect", "driver reconnected (its WARNING)"),
    ("first_status", "the new head's first status answer"),
    ("objects", "head counts every object again"),
    ("holding", "head knows every stored result's worker"),
    ("unfinished_get", "get of an unfinished task's result"),
    ("resumed", "resumed: the latest of the three above"),
    ("stored_get", "get of a stored result, from SIGKILL"),
]


def resumed(run: Run) -> float:
    return max(run.objects, run.holding, run.unfinished_get)


def value(run: Run, key: str) -> float:
    return resumed(run) if key == "resumed" else float(getattr(run, key))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--small", type=int, default=8000, help="inline results")
    parser.add_argument("--stored", type=int, default=1000, help="100 KiB results")
    parser.add_argument("--unfinished", type=int, default=1000, help="tasks behind the gate")
    parser.add_argument(
        "--down",
        type=float,
        default=0.0,
        help="seconds between the old head's death and starting the new one (default 0)",
    )
    parser.add_argument("--poll", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.poll:
        port, objects, holding = args.poll
        poll(port, objects, holding, timeout=WAIT_S)
        return
    stamps = Stamps()
    logging.getLogger("dista").addHandler(stamps)  # the driver's lines, and any other
    total = args.small + args.stored + args.unfinished
    print(
        f"Dista resume after a head restart, CPython {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs; {total:,} objects ({args.small:,} inline, {args.stored:,} "
        f"of {STORED_SIZE // KiB} KiB stored, {args.unfinished:,} unfinished behind a gate); "
        f"median of {args.runs} runs; the new head started {args.down:g} s after SIGKILL"
    )
    runs: list[Run] = []
    failures = 0
    for i in range(args.runs):
        try:
            run = one_run(args, stamps)
        except Failed as e:
            failures += 1
            print(f"run {i + 1} FAILED: {e}", flush=True)
            continue
        runs.append(run)
        print(f"run {i + 1}: " + "  ".join(f"{k} {value(run, k):.3f}" for k, _ in COLUMNS))
        steps = "  ".join(f"{t:.3f}:{n}/{h}" for t, n, h in run.counts)
        print(
            f"  before the kill: {run.objects_before} objects, {run.holding_before} held by "
            f"workers; the new head's objects/holding at times from listening: {steps}"
        )
        for line in run.warnings:
            print(f"  {line}")
        sys.stdout.flush()
    if failures:
        print(f"{failures} of {args.runs} runs FAILED (above); the figures are the others'")
    if not runs:
        raise SystemExit(1)
    print(f"{'seconds from the new head listening':<42} {'median':>7} {'min':>7} {'max':>7}")
    for key, label in COLUMNS:
        values = [value(r, key) for r in runs]
        mid = statistics.median(values)
        print(f"{label:<42} {mid:>7.3f} {min(values):>7.3f} {max(values):>7.3f}")
    mid = statistics.median(resumed(r) for r in runs)
    verdict = "met" if mid <= TARGET_S else "missed"
    print(f"resumed / target ({TARGET_S:g} s): {mid / TARGET_S:.2f}: {verdict}")


if __name__ == "__main__":
    # Workers import the tasks as ``benchmarks.resume``: so does this driver, so that they
    # are known by name (a task of ``__main__`` would travel by value).
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import importlib

    importlib.import_module(TASKS).main()
