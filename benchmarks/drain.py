"""A worker holding 1 GiB drained by SIGTERM: how its hand-over compares with a plain get.

Run it from a checkout after ``python -m pip install -e .``::

    python benchmarks/drain.py                 # 16 x 64 MiB, median of 5 runs
    python benchmarks/drain.py --runs 9 --count 8 --mib 128

Each run starts a cluster of its own, as separate processes on loopback TCP: a head
(``python -m dista_runtime.cli head --port P``) and worker A (``... worker --head
127.0.0.1:P --import benchmarks.drain``, with ``DISTA_DRAIN_TIMEOUT=600``); this process is
the driver (``dista.init("127.0.0.1:P")``). While A is the only worker, ``--count`` tasks
each return ``--mib`` MiB of ``bytes`` (filled, not lazily zeroed pages): all of it is stored
on A. Then worker B joins, and once the head's status shows both workers and A holding
every result, two things are timed:

- **get**: ``dista.get`` of every result by the driver (the driver fetches from A's object
  server; the bytes land in fresh buffers and are unpickled into fresh ``bytes``). The
  values are then dropped;
- **drain**: SIGTERM to A, until A's process has exited. A tells the head it drains, the
  head asks B to adopt each object (B fetches it from A's object server, as the driver
  did), and tells A to stop once B has them all. Within it, **adopted**: until the head's
  status (polled every 10 ms from a thread here, idle otherwise) shows B holding them all.

And, as the link's speed on this machine, **socket**: the same bytes sent over a loopback
TCP connection by another process and received into a fresh ``bytearray`` here (the
receive side's page faults count, as they do for Dista's fetches).

Afterwards the head's status must show B holding every object and A gone, and the driver
reads two of them back from B. Printed per measure: the median over runs, the spread and
GB/s (10^9 bytes/s), and the ratio drain / get (the target: at most 2) as the median of the
runs' ratios.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # for ``benchmarks.resume`` when run as a script
    sys.path.insert(0, str(ROOT))
try:
    import dista_runtime as dista
except ImportError:  # not installed: use the checkout this script lives in
    sys.path[:0] = [str(ROOT / "bindings")]
    import dista_runtime as dista

from benchmarks.resume import (
    count,
    free_port,
    start_head,
    start_worker,
    status,
    stop,
    wait_for,
)

MiB = 1 << 20
TARGET_RATIO = 2.0
#: The module workers import: this one, by its importable name.
TASKS = "benchmarks.drain"
FILL = b"\xab"  # bytes(n) would be lazily zeroed pages: fill them for real
CHUNK = 4 * MiB


@dista.task
def make_bytes(size: int) -> bytes:
    return FILL * size


@dataclass
class Run:
    get: float
    drain: float
    adopted: float  # from SIGTERM until the head's status shows B holding everything
    socket: float


def holding(text: str, port: int) -> int:
    """What the status line of the worker whose object server is on ``port`` holds."""
    for line in text.splitlines():
        if line.startswith("worker ") and line.split()[1].rstrip(":").endswith(f":{port}"):
            return int(line.split("holding ")[1].split(",")[0])
    return -1


def worker_port(text: str, other: int | None = None) -> int:
    """The object server port of the (other) worker in a status text."""
    for line in text.splitlines():
        if line.startswith("worker "):
            port = int(line.split()[1].rstrip(":").rsplit(":", 1)[1])
            if port != other:
                return port
    raise SystemExit(f"no worker in the status: {text}")


def one_run(args: argparse.Namespace, log: Path) -> Run:
    count_, size = args.count, args.mib * MiB
    port = free_port()
    head, _ = start_head(port)
    env = {**os.environ, "DISTA_DRAIN_TIMEOUT": "600"}
    with log.open("ab") as out:
        a = start_worker(port, TASKS, env, out)
    b: subprocess.Popen[bytes] | None = None
    try:
        text = wait_for(port, "worker A joining", lambda t: count(t, "workers") == 1)
        a_port = worker_port(text)
        dista.init(f"127.0.0.1:{port}")
        try:
            refs = [make_bytes.remote(size) for _ in range(count_)]
            deadline = time.monotonic() + 300.0
            while not all(r.done() for r in refs):
                if time.monotonic() > deadline:
                    raise SystemExit("the tasks did not finish in 300 s")
                time.sleep(0.01)
            with log.open("ab") as out:
                b = start_worker(port, TASKS, env, out)
            text = wait_for(
                port,
                f"worker B joining, A holding {count_}",
                lambda t: count(t, "workers") == 2 and holding(t, a_port) == count_,
            )
            b_port = worker_port(text, a_port)

            gc.collect()
            start = time.perf_counter()
            values = dista.get(refs, timeout=600.0)
            got = time.perf_counter() - start
            if [len(v) for v in values] != [size] * count_ or values[-1][-1:] != FILL:
                raise SystemExit("wrong values from the plain get")
            del values
            gc.collect()

            adopted: list[float] = []
            watch = threading.Thread(
                target=watch_adoption, args=(port, b_port, count_, adopted), daemon=True
            )
            watch.start()
            start = time.perf_counter()
            a.send_signal(signal.SIGTERM)
            code = a.wait(timeout=900.0)
            drained = time.perf_counter() - start
            watch.join(15.0)
            if code != 0:
                raise SystemExit(f"worker A exited with {code} (see {log})")
            text = wait_for(
                port,
                f"B holding all {count_} objects",
                lambda t: count(t, "workers") == 1 and holding(t, b_port) == count_,
                timeout=10.0,
            )
            for ref in (refs[0], refs[-1]):  # they now come from B
                value = ref.get(timeout=60.0)
                if len(value) != size or value[:1] != FILL:
                    raise SystemExit("wrong value after the drain")
                del value
        finally:
            dista.shutdown()
    finally:
        stop(a, b, head)
    moved = adopted[0] - start if adopted else float("nan")
    return Run(got, drained, moved, socket_time(count_ * size))


def watch_adoption(port: int, b_port: int, objects: int, out: list[float]) -> None:
    """Poll the head's status every 10 ms until B holds ``objects``: the time into ``out``."""
    deadline = time.monotonic() + 900.0
    while time.monotonic() < deadline:
        try:
            text = status(port, 2.0)
        except ConnectionError:
            continue
        if holding(text, b_port) >= objects:
            out.append(time.perf_counter())
            return
        time.sleep(0.01)


def socket_time(total: int) -> float:
    """Seconds to receive ``total`` bytes over loopback TCP from another process."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        sender = subprocess.Popen(
            [sys.executable, "-c", SENDER, str(port), str(total)], stdin=subprocess.PIPE
        )
        try:
            conn, _ = server.accept()
            with conn:
                buffer = bytearray(total)  # untouched: the faults come with the bytes
                view = memoryview(buffer)
                assert sender.stdin is not None
                sender.stdin.write(b"go\n")  # its buffer is filled: start the clock
                sender.stdin.close()
                start = time.perf_counter()
                got = 0
                while got < total:
                    n = conn.recv_into(view[got:], min(CHUNK, total - got))
                    if not n:
                        raise SystemExit("the sender stopped early")
                    got += n
                elapsed = time.perf_counter() - start
                del view, buffer
        finally:
            sender.wait(60.0)
    return elapsed


SENDER = """
import socket, sys
port, total = int(sys.argv[1]), int(sys.argv[2])
data = b"\\xab" * total
with socket.create_connection(("127.0.0.1", port)) as s:
    sys.stdin.readline()
    s.sendall(data)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--count", type=int, default=16, help="results on the drained worker")
    parser.add_argument("--mib", type=int, default=64, help="MiB per result")
    args = parser.parse_args()
    total = args.count * args.mib * MiB
    print(
        f"Dista drain of a worker holding {args.count} x {args.mib} MiB "
        f"({total / 2**30:.2f} GiB), CPython {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
        f"median of {args.runs} runs"
    )
    with tempfile.TemporaryDirectory(prefix="dista-drain-") as tmp:
        log = Path(tmp) / "workers.log"
        runs: list[Run] = []
        for i in range(args.runs):
            run = one_run(args, log)
            runs.append(run)
            print(
                f"run {i + 1}: get {run.get:.3f} s, drain {run.drain:.3f} s "
                f"(drain / get {run.drain / run.get:.2f}; all adopted at {run.adopted:.3f} s), "
                f"socket {run.socket:.3f} s",
                flush=True,
            )
        warnings = [line for line in log.read_text().splitlines() if "drain" in line]
        if warnings:
            print("worker A said: " + warnings[-1])
    print(f"{'':<24} {'median s':>9} {'min':>7} {'max':>7} {'GB/s':>6}")
    for key, label in [
        ("get", "plain get by the driver"),
        ("drain", "drain (SIGTERM to exit)"),
        ("adopted", "  of which: all adopted"),
        ("socket", "loopback socket"),
    ]:
        values = [getattr(r, key) for r in runs]
        mid = statistics.median(values)
        rate = total / mid / 1e9
        print(f"{label:<24} {mid:>9.3f} {min(values):>7.3f} {max(values):>7.3f} {rate:>6.2f}")
    ratios = [r.drain / r.get for r in runs]
    ratio = statistics.median(ratios)
    to_socket = statistics.median(r.drain / r.socket for r in runs)
    verdict = "met" if ratio <= TARGET_RATIO else "missed"
    print(
        f"drain / get: {ratio:.2f} (runs {', '.join(f'{x:.2f}' for x in ratios)}); "
        f"target at most {TARGET_RATIO:g}: {verdict}; drain / socket: {to_socket:.2f}"
    )


if __name__ == "__main__":
    # Workers import the tasks as ``benchmarks.drain``: so does this driver, so that they
    # are known by name (a task of ``__main__`` would travel by value).
    import importlib

    importlib.import_module(TASKS).main()
