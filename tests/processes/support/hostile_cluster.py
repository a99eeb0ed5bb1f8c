"""Real processes for the hostile-input runs: a `dista head` on a free port, `dista worker`
processes importing `tests.processes.support.hostile_tasks`, and the well-behaved driver
(`tests.processes.support.hostile_driver`). Every process's output goes to a file in ``logs`` (a head
under attack logs a line per refused peer: a pipe nobody reads would fill and stall it);
`close` kills and reaps them all, also after a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

import dista_proto as dp

__all__ = ["Cluster", "Death", "GoodDriver", "ROOT"]

ROOT = Path(__file__).resolve().parents[3]
CLI = [sys.executable, "-m", "dista_runtime.cli"]
TASKS = "tests.processes.support.hostile_tasks"
_LISTENING = re.compile(r"listening on (\S+):(\d+)")
_WORKER = re.compile(r"^worker (\d+\.\d+\.\d+\.\d+):(\d+):", re.MULTILINE)


@dataclass(frozen=True)
class Death:
    """A process that exited while it should have run."""

    name: str
    code: int
    tail: str


class Cluster:
    """A head and workers as processes; the head's extra flags in ``head_args``."""

    def __init__(
        self,
        logs: Path,
        workers: int = 3,
        head_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.logs = logs
        logs.mkdir(parents=True, exist_ok=True)
        path = [str(ROOT), str(ROOT / "bindings"), *sys.path]
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), PYTHONUNBUFFERED="1")
        self.env.pop("DISTA_ADDRESS", None)
        self.env.update(env or {})
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.head = self._spawn("head", [*CLI, "head", "--port", "0", *head_args])
        self.host, self.port = self._listening()
        self.address = f"{self.host}:{self.port}"
        self.workers = [
            self._spawn(
                f"worker{i}",
                [*CLI, "worker", "--no-supervise", "--head", self.address, "--import", TASKS],
            )
            for i in range(workers)
        ]
        self.expected_dead: set[str] = set()

    def _spawn(self, name: str, argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        with open(self.logs / f"{name}.log", "wb") as out:
            kw.setdefault("stdout", out)
            process = subprocess.Popen(
                argv,
                stderr=out if "stderr" not in kw else kw.pop("stderr"),
                env=self.env,
                cwd=ROOT,
                **kw,
            )
        self.procs[name] = process
        return process

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def _listening(self, timeout: float = 20.0) -> tuple[str, int]:
        deadline = time.monotonic() + timeout
        while not (m := _LISTENING.search(self.log("head"))):
            if self.head.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the head did not start:\n{self.log('head')[-2000:]}")
            time.sleep(0.02)
        return m[1], int(m[2])

    def status(self, timeout: float = 10.0) -> str:
        done = subprocess.run(
            [*CLI, "status", "--head", self.address, "--timeout", str(timeout)],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=ROOT,
            timeout=timeout + 20,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"dista status failed: {done.stderr.strip()}")
        return done.stdout

    def wait_for_workers(self, timeout: float = 30.0) -> str:
        """Until every worker has joined; the head's status then."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.status()
            if len(_WORKER.findall(status)) >= len(self.workers):
                return status
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers did not join:\n{status}\n{self.why()}")
            time.sleep(0.1)

    def servers(self, status: str) -> list[dp.Address]:
        return [dp.Address(h, int(p)) for h, p in _WORKER.findall(status)]

    @staticmethod
    def registry_of(status: str, number: int) -> int:
        m = re.search(rf"^driver {number}: registry (0x[0-9a-f]+)", status, re.MULTILINE)
        return int(m[1], 16) if m else 0

    def rss(self) -> dict[str, int]:
        """Resident bytes of the head and each worker (0 for one that is gone)."""
        out = {}
        for name, p in self.procs.items():
            if name == "driver":
                continue
            try:
                out[name] = psutil.Process(p.pid).memory_info().rss
            except psutil.Error:
                out[name] = 0
        return out

    def deaths(self) -> list[Death]:
        return [
            Death(name, p.returncode, "\n".join(self.log(name).splitlines()[-15:]))
            for name, p in self.procs.items()
            if p.poll() is not None and name not in self.expected_dead
        ]

    def why(self) -> str:
        parts = []
        for name, p in self.procs.items():
            state = "running" if p.poll() is None else f"exited {p.returncode}"
            tail = self.log(name).splitlines()[-12:]
            parts += [f"--- {name} (pid {p.pid}, {state}):", *tail]
        return "\n".join(parts)

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
        for p in self.procs.values():
            p.wait()
            for stream in (p.stdin, p.stdout):
                if stream is not None:
                    stream.close()


class GoodDriver:
    """`tests.processes.support.hostile_driver` as a process of ``cluster``: its lines as they come."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.process = cluster._spawn(
            "driver",
            [sys.executable, "-m", "tests.processes.support.hostile_driver", cluster.address],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            with contextlib.suppress(ValueError):
                self.lines.append(json.loads(raw))

    def wait_for(self, key: str, timeout: float) -> dict[str, Any]:
        """The first line with ``key``, waiting up to ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines:
                if key in line:
                    return line
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the good driver gave no {key!r} line:\n{self.cluster.log('driver')[-3000:]}"
                )
            time.sleep(0.05)

    def rounds(self) -> list[dict[str, Any]]:
        return [line for line in self.lines if "round" in line]

    def stop(self, timeout: float = 180.0) -> dict[str, Any]:
        """Close its stdin: it ends its round and reports; its summary line."""
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        summary = self.wait_for("done", timeout)
        self.process.wait(30)
        return summary
