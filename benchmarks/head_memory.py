"""``python -m benchmarks.head_memory``: a head's memory idle, under a burst, and after it.

The bogus drivers' 32 MiB tasks are accepted (a task's arguments are opaque to the head)
and the garbage after them refused; the head keeps a driver that left without a goodbye,
and its tasks, for the recovery grace (30 s), so ``--late 30`` shows the memory once that
has passed too.

Starts a real ``dista head`` and two ``dista worker`` processes on loopback, samples the
head's RSS idle, then runs a burst: ``--drivers`` driver processes at once, each getting
``--tasks`` results of ``--result-kib`` KiB (under the 64 KiB inline threshold, so every
one passes through the head), while ``--bogus`` connections say hello and send frames
announcing ``--bogus-mib`` MiB of garbage (read in full, then refused), over and over. The
head's RSS is sampled every 50 ms during the burst (peak) and 5 s after it ends (after).
Prints each run's figures and the medians over ``--runs`` runs.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import dista_runtime as dista

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20

DRIVER = """
import sys
import dista_runtime as dista
from benchmarks.head_memory import blob

tasks, kib = int(sys.argv[2]), int(sys.argv[3])
with dista.init(sys.argv[1]):
    refs = [blob.remote(i, kib) for i in range(tasks)]
    values = dista.get(refs, timeout=120)
    assert all(v == bytes([i % 251]) * (kib << 10) for i, v in enumerate(values)), "wrong"
print("ok")
"""


@dista.task
def blob(i: int, kib: int) -> bytes:
    """A result of ``kib`` KiB, inline when under the threshold."""
    return bytes([i % 251]) * (kib << 10)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTA_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    return env


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Cluster:
    """A `dista head` and ``workers`` `dista worker`s importing ``module``, as processes
    (benchmarks/driver_memory.py's too); `close` ends them."""

    def __init__(
        self,
        module: str = "benchmarks.head_memory",
        workers: int = 2,
        env: dict[str, str] | None = None,
    ) -> None:
        env = _env() if env is None else env
        cli = [sys.executable, "-m", "dista_runtime.cli"]
        self.head = subprocess.Popen(
            [*cli, "head", "--port", "0"], stderr=subprocess.PIPE, text=True, env=env
        )
        self.workers: list[subprocess.Popen[bytes]] = []
        try:
            assert self.head.stderr is not None
            line = self.head.stderr.readline()
            assert "listening on" in line, line
            self.address = line.rsplit(" ", 1)[1].strip()
            for _ in range(workers):
                r, w = os.pipe()
                argv = [*cli, "worker", "--head", self.address, "--import", module]
                self.workers.append(
                    subprocess.Popen(
                        [*argv, "--ready-fd", str(w)], env=env, pass_fds=(w,), cwd=ROOT
                    )
                )
                os.close(w)
                with os.fdopen(r, "rb") as ready:
                    assert ready.read(1), "a worker did not join"
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for p in [*self.workers, self.head]:
            if p.poll() is None:
                p.terminate()
        for p in [*self.workers, self.head]:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.head.stderr is not None:
            self.head.stderr.close()


def _bogus(address: str, mib: int, stop: threading.Event, sent: list[int]) -> None:
    """Hello as a driver, then a task frame announcing ``mib`` MiB of garbage; again."""
    host, port = address.rsplit(":", 1)
    import dista_proto as dp
    from dista_proto import frame as F

    hello = dp.encode_event(dp.Hello(F.ROLE_DRIVER, 0))
    garbage = os.urandom(MIB)
    header = struct.pack("<IBQQ", mib * MIB, F.KIND_TASK, 1, 1)
    while not stop.is_set():
        try:
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(hello + header)
                for _ in range(mib):
                    sock.sendall(garbage)
                sent[0] += mib
                sock.settimeout(10)
                while sock.recv(1 << 16):
                    pass
        except OSError:
            time.sleep(0.05)


def run_once(args: argparse.Namespace) -> tuple[int, int, int]:
    cluster = Cluster()
    try:
        pid = cluster.head.pid
        time.sleep(1.0)
        idle = int(statistics.median(_sample(pid, 0.5)))
        stop = threading.Event()
        sent = [0]
        flood = [
            threading.Thread(target=_bogus, args=(cluster.address, args.bogus_mib, stop, sent))
            for _ in range(args.bogus)
        ]
        for t in flood:
            t.start()
        drivers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    DRIVER,
                    cluster.address,
                    str(args.tasks),
                    str(args.result_kib),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_env(),
                cwd=ROOT,
            )
            for _ in range(args.drivers)
        ]
        peak = idle
        while any(d.poll() is None for d in drivers):
            peak = max(peak, _rss(pid))
            time.sleep(0.05)
        stop.set()
        for t in flood:
            t.join(30)
        for d in drivers:
            out, err = d.communicate()
            assert d.returncode == 0 and out.strip() == "ok", err[-2000:]
        peak = max(peak, _rss(pid))
        time.sleep(5.0)
        after = int(statistics.median(_sample(pid, 0.5)))
        late = ""
        if args.late:
            time.sleep(args.late)
            late = f", {args.late + 5:g} s after {int(statistics.median(_sample(pid, 0.5))) / MIB:.0f} MiB"
        print(
            f"idle {idle / MIB:.0f} MiB, peak {peak / MIB:.0f} MiB, after {after / MIB:.0f} MiB"
            f" ({after / idle:.2f}x idle){late}; bogus MiB sent {sent[0]}",
            flush=True,
        )
        return idle, peak, after
    finally:
        cluster.close()


def _sample(pid: int, seconds: float) -> list[int]:
    samples = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        samples.append(_rss(pid))
        time.sleep(0.05)
    return samples


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.head_memory", description=__doc__)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--drivers", type=int, default=16)
    p.add_argument("--tasks", type=int, default=400)
    p.add_argument("--result-kib", type=int, default=60)
    p.add_argument("--bogus", type=int, default=8)
    p.add_argument("--bogus-mib", type=int, default=32)
    p.add_argument(
        "--late",
        type=float,
        default=0.0,
        help="also sample this many seconds after 'after' (past the 30 s recovery grace that "
        "keeps the bogus drivers' tasks)",
    )
    args = p.parse_args(argv)
    runs = [run_once(args) for _ in range(args.runs)]
    idle, peak, after = (statistics.median(r[i] for r in runs) / MIB for i in range(3))
    print(
        f"median: idle {idle:.0f} MiB, peak {peak:.0f} MiB, after {after:.0f} MiB "
        f"({after / idle:.2f}x idle)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
