"""``python -m benchmarks.flood``: connection floods against a head (issue 24, attack 4).

Starts a real `dista head` (TLS, the cluster's certificates from ``dista certs``, or plain
TCP with ``--plain``; default limits) and one `dista worker` on loopback, then measures a legitimate workload (a driver
process joining, then ``--tasks`` small tasks) alone, and again during each attack from
127.0.0.1, the driver's own host:

- ``silent``: ``--connections`` plain TCP connections (10,000 by default) that never start
  their TLS handshake (or, plain, never say hello), opened as fast as the machine allows
  and kept open;
- ``observers``: ``--observers`` connections that say hello as observers and then send
  nothing;
- ``drip``: a connection that says hello as a driver and sends a frame a byte a second.

For each: the driver's join time and workload time (and their ratio to the time alone),
the head's RSS idle, at its peak during the attack and 5 s after it, how many of the
attack's connections the head had closed, and (drip) when. The process's open-file
limit is raised to its hard limit (20,000 here) so that the flood is not bounded by it.
``--root`` runs another checkout (the code before a change) with the same benchmark.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from dista_proto import frame as F

ROOT = Path(__file__).resolve().parents[1]
_LISTENING = re.compile(r"listening on (\S+):(\d+)")
DRIVER = """
import sys, time
import dista_runtime as dista
from flood_tasks import square
start = time.monotonic()
with dista.init(address=sys.argv[1]):
    joined = time.monotonic()
    n = int(sys.argv[2])
    assert dista.get([square.remote(i) for i in range(n)], timeout=300) == [i * i for i in range(n)]
    done = time.monotonic()
print(f"{joined - start:.3f} {done - joined:.3f}", flush=True)
"""


TASKS = """
import dista_runtime as dista

@dista.task
def square(x: int) -> int:
    return x * x
"""


class Cluster:
    def __init__(self, root: Path, tls_dir: Path | None, logs: Path) -> None:
        (logs / "flood_tasks.py").write_text(TASKS)  # importable from either checkout
        path = os.pathsep.join([str(root), str(root / "bindings"), str(logs)])
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DISTA_")}
        self.env.update(PYTHONPATH=path, PYTHONUNBUFFERED="1")
        if tls_dir is not None:
            self.env["DISTA_TLS_DIR"] = str(tls_dir)
        self.tls_dir, self.logs, self.procs = tls_dir, logs, []
        cli = [sys.executable, "-m", "dista_runtime.cli"]
        head_log = logs / "head.log"
        self.head = self._spawn([*cli, "head", "--port", "0"], head_log)
        deadline = time.monotonic() + 30
        while not (found := _LISTENING.search(head_log.read_text())):
            assert time.monotonic() < deadline, head_log.read_text()
            time.sleep(0.05)
        self.address = (found.group(1), int(found.group(2)))
        self.text = f"{found.group(1)}:{found.group(2)}"
        worker = [*cli, "worker", "--head", self.text, "--import", "flood_tasks"]
        self._spawn(worker, logs / "worker.log")
        self.ps = psutil.Process(self.head.pid)

    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=out, env=self.env, cwd=self.logs)
        self.procs.append(p)
        return p

    def driver(self, tasks: int, timeout: float = 120) -> tuple[float, float]:
        """Seconds to join and to run ``tasks`` (inf, inf if it did not within ``timeout``)."""
        try:
            done = subprocess.run(
                [sys.executable, "-c", DRIVER, self.text, str(tasks)], capture_output=True,
                text=True, timeout=timeout, env=self.env, cwd=self.logs, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return float("inf"), float("inf")
        if done.returncode:
            print("driver failed:", done.stderr[-500:])
            return float("inf"), float("inf")
        joined, ran = done.stdout.split()
        return float(joined), float(ran)

    def rss(self) -> int:
        return int(self.ps.memory_info().rss)

    def connect(self, name: str) -> socket.socket:
        """A connection to the head: in TLS with ``name``'s certificate, or plain."""
        raw = socket.create_connection(self.address, timeout=30)
        return self.context(name).wrap_socket(raw) if self.tls_dir else raw

    def context(self, name: str) -> ssl.SSLContext:
        assert self.tls_dir is not None
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        c.check_hostname = False
        c.load_verify_locations(cafile=str(self.tls_dir / "ca.pem"))
        c.load_cert_chain(str(self.tls_dir / f"{name}.pem"), str(self.tls_dir / f"{name}.key"))
        return c

    def close(self) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait(10)


def hello(role: int) -> bytes:
    body = bytes([F.KIND_HELLO]) + bytes(16) + bytes([role]) + bytes(8)
    return len(body).to_bytes(4, "little") + body


def open_silent(c: Cluster, n: int, out: list[socket.socket]) -> None:
    for _ in range(n):
        try:
            out.append(socket.create_connection(c.address, timeout=30))
        except OSError:
            time.sleep(0.01)


def open_observers(c: Cluster, n: int, out: list[socket.socket]) -> None:
    for _ in range(n):
        try:
            s = c.connect("observer")
            s.sendall(hello(F.ROLE_OBSERVER))
            out.append(s)
        except OSError:
            pass


def closed(socks: list[socket.socket]) -> int:
    """How many of ``socks`` the head has closed (what they had to read is dropped)."""
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            while s.recv(1 << 16):
                pass
            n += 1
        except (BlockingIOError, ssl.SSLWantReadError):
            pass
        except OSError:
            n += 1
    return n


def attack(c: Cluster, kind: str, args: argparse.Namespace, alone: tuple[float, float]) -> None:
    socks: list[socket.socket] = []
    idle = c.rss()
    peak = [idle]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            peak[0] = max(peak[0], c.rss())

    sampler = threading.Thread(target=sample)
    sampler.start()
    t0 = time.monotonic()
    if kind == "silent":
        opener = threading.Thread(target=open_silent, args=(c, args.connections, socks))
    elif kind == "observers":
        opener = threading.Thread(target=open_observers, args=(c, args.observers, socks))
    else:
        opener = threading.Thread(target=drip, args=(c, socks))
    opener.start()
    time.sleep(1.0)  # the flood is under way
    joined, ran = c.driver(args.tasks)
    opener.join()
    opened = time.monotonic() - t0
    gone = closed(socks)
    stop.set()
    sampler.join()
    for s in socks:
        s.close()
    time.sleep(5)
    after = c.rss()
    print(
        f"{kind}: {len(socks):,} connections in {opened:.1f} s; driver joined in "
        f"{joined:.2f} s, {args.tasks} tasks in {ran:.2f} s ({ran / alone[1]:.2f}x alone); "
        f"head RSS idle {idle / 2**20:.0f} MiB, peak {peak[0] / 2**20:.0f} MiB "
        f"({peak[0] / idle:.2f}x), 5 s after {after / 2**20:.0f} MiB ({after / idle:.2f}x); "
        f"{gone:,} of the attack's connections closed by the head by then",
        flush=True,
    )


def drip(c: Cluster, out: list[socket.socket]) -> None:
    """Hello as a driver, then a task frame's header a byte a second, for up to 30 s."""
    s = c.connect("driver")
    s.sendall(hello(F.ROLE_DRIVER))
    frame = (65536).to_bytes(4, "little") + bytes([F.KIND_TASK]) + bytes(16)
    start = time.monotonic()
    s.settimeout(1.0)
    for i in range(30):
        try:
            s.sendall(frame[i : i + 1])
            while s.recv(1 << 16):
                pass
            break  # closed
        except (TimeoutError, ssl.SSLWantReadError):
            continue
        except OSError:
            break
    print(f"drip: the head closed it after {time.monotonic() - start:.1f} s", flush=True)
    s.close()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.flood", description=__doc__)
    p.add_argument("--connections", type=int, default=10_000)
    p.add_argument("--observers", type=int, default=2_000)
    p.add_argument("--tasks", type=int, default=2_000)
    p.add_argument("--attacks", default="silent,observers,drip")
    p.add_argument("--plain", action="store_true", help="a plain TCP head, not TLS")
    p.add_argument("--root", type=Path, default=ROOT, help="the checkout to run (default: this)")
    args = p.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    from dista_runtime._tls import certs

    with tempfile.TemporaryDirectory() as tmp:
        tls_dir, logs = Path(tmp) / "tls", Path(tmp) / "logs"
        logs.mkdir()
        certs.write_quickstart(tls_dir)
        c = Cluster(args.root, None if args.plain else tls_dir, logs)
        try:
            c.driver(10)  # the worker has joined
            alone = c.driver(args.tasks)
            print(f"alone: driver joined in {alone[0]:.2f} s, {args.tasks} tasks in "
                  f"{alone[1]:.2f} s", flush=True)  # fmt: skip
            for kind in args.attacks.split(","):
                attack(c, kind, args, alone)
        finally:
            c.close()


if __name__ == "__main__":
    main()
