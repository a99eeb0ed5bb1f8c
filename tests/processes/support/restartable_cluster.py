"""A head that can be killed and started again on the same port, and `dista worker`
processes, for the tests of recovery by real signals (test_recovery.py, test_clock.py).
Every process's output goes to a file; `Processes.why` shows their tails and the head's
status when an assertion fails. The driver is the test's own process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dista_runtime as dista
from tests.processes.support import recovery_tasks as rt
from tests.support.cluster import task_modules

ROOT = Path(__file__).resolve().parents[3]
CLI = [sys.executable, "-m", "dista_runtime.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Processes:
    """A head on a fixed port and `dista worker` processes, each with its output in a file
    of ``logs``; `close` ends every one of them (also after a failure)."""

    def __init__(self, logs: Path, env: dict[str, str] | None = None) -> None:
        self.logs = logs
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
        self.env.pop("DISTA_ADDRESS", None)
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env.update(env or {})
        self.head: subprocess.Popen[bytes] | None = None
        self.heads: list[subprocess.Popen[bytes]] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        self._files: dict[int, Path] = {}
        self.imports = ",".join(sorted({*task_modules(), rt.__name__}))

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        path = self.logs / f"{name}.log"
        with open(path, "ab") as out:
            process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT
            )
        self._files[process.pid] = path
        return process

    def output(self, process: subprocess.Popen[bytes]) -> str:
        return self._files[process.pid].read_text(errors="replace")

    def start_head(
        self, timeout: float = 15.0, args: tuple[str, ...] = ()
    ) -> subprocess.Popen[bytes]:
        """A new head on our port (``args``: more of its options); returns once it
        listens."""
        argv = [*CLI, "head", "--port", str(self.port), *args]
        head = self._spawn(f"head{len(self.heads)}", argv)
        self.head = head
        self.heads.append(head)
        deadline = time.monotonic() + timeout
        while "listening on" not in self.output(head):
            assert head.poll() is None, self.why(f"the head exited {head.returncode}")
            assert time.monotonic() < deadline, self.why("the head did not listen")
            time.sleep(0.01)
        return head

    def kill_head(self) -> None:
        assert self.head is not None
        self.head.send_signal(signal.SIGKILL)
        self.head.wait(10)

    def start_worker(self) -> subprocess.Popen[bytes]:
        n = len(self.workers)
        argv = [*CLI, "worker", "--head", self.address, "--import", self.imports]
        argv.append("--no-supervise")  # its pid is the worker's: tests stop and signal it
        worker = self._spawn(f"worker{n}", argv)
        self.workers.append(worker)
        return worker

    def status(self) -> str:
        done = subprocess.run(
            [*CLI, "status", "--head", self.address, "--timeout", "5"],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=ROOT,
            timeout=30,
            check=False,
        )
        return done.stdout if done.returncode == 0 else f"<status failed: {done.stderr}>"

    def why(self, what: str, lines: int = 25) -> str:
        """``what``, the head's status, then the tail of every process's output."""
        parts = [what]
        if self.head is not None and self.head.poll() is None:
            parts += ["--- dista status:", self.status().rstrip()]
        for p in [*self.heads, *self.workers]:
            path = self._files[p.pid]
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            state = "running" if p.poll() is None else f"exited {p.returncode}"
            parts.append(f"--- {path.name} (pid {p.pid}, {state}):")
            parts.extend(tail)
        return "\n".join(parts)

    def close(self) -> None:
        """SIGKILL every process still running (a stopped one too), and reap them all."""
        everyone = [*self.heads, *self.workers]
        for p in everyone:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
        for p in everyone:
            p.wait()


@contextlib.contextmanager
def processes(tmp_path: Path, **env: str) -> Iterator[Processes]:
    procs = Processes(tmp_path, env)
    try:
        yield procs
    finally:
        procs.close()


def wait_for_workers(n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while dista.stats().workers != n:
        assert time.monotonic() < deadline, f"{dista.stats().workers} workers, not {n}"
        time.sleep(0.05)
