"""Helpers for tests that start real processes: a local cluster settling, processes
gone, `dista head`/`dista worker` as subprocesses, and the command line and environment a
child process needs to import `tests.*`. The fixtures built on them are in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import gc
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import dista_runtime as dista


def settle_to_zero(timeout: float = 10.0) -> dista.HeadStats:
    """Until the head holds nothing (objects, bytes, tasks pending or running): every ref
    the test dropped was released and freed."""
    gc.collect()
    deadline = time.monotonic() + timeout
    while True:
        stats = dista.stats()
        if (stats.objects, stats.held_bytes, stats.pending, stats.running) == (0, 0, 0, 0):
            return stats
        assert time.monotonic() < deadline, f"the head still holds {stats}"
        time.sleep(0.05)


def wait_for_workers(n: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while dista.stats().workers < n:
        assert time.monotonic() < deadline, "the workers did not connect"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def assert_gone(pids: list[int], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        assert time.monotonic() < deadline, (
            f"processes still alive: {[p for p in pids if alive(p)]}"
        )
        time.sleep(0.05)


def stop_process(process: subprocess.Popen[Any]) -> None:
    """Terminate, give it 10 s, then kill; close its pipes."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()


@contextlib.contextmanager
def head_process(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A `dista head --port 0 ARGS` process for the block; its address."""
    process = subprocess.Popen(
        [sys.executable, "-m", "dista_runtime.cli", "head", "--port", "0", *args],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert "listening on" in line, line
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        stop_process(process)


def task_modules() -> list[str]:
    """Every module this process has registered tasks from: what workers must import for
    this process, as a driver, to have their registry hash whatever other test modules were
    imported first (a worker serves drivers of exactly its own task modules)."""
    from dista_runtime._values import registry as _registry
    from tests.support import tasks  # noqa: F401

    names, _ = _registry.snapshot()
    return _registry.modules(names)


class CliHead:
    """`dista head` and `dista worker` as real subprocesses, for multi-driver tests."""

    def __init__(
        self, workers: int = 2, imports: tuple[str, ...] = ("tests.support.tasks",)
    ) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        self.head = subprocess.Popen(
            [sys.executable, "-m", "dista_runtime.cli", "head", "--port", "0"],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.head.stderr is not None
        line = self.head.stderr.readline()
        assert "listening on" in line, line
        self.address = line.rsplit(" ", 1)[1].strip()
        self.workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dista_runtime.cli",
                    "worker",
                    "--head",
                    self.address,
                    "--import",
                    ",".join(imports),
                ],
                env=env,
            )
            for _ in range(workers)
        ]

    def pids(self) -> list[int]:
        return [self.head.pid, *(w.pid for w in self.workers)]

    def close(self) -> None:
        for p in [self.head, *self.workers]:
            if p.poll() is None:
                p.terminate()
        for p in [self.head, *self.workers]:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.head.stderr is not None:
            self.head.stderr.close()


def cli(*args: str) -> list[str]:
    """The `dista` command line with ``args``, run by this interpreter."""
    return [sys.executable, "-m", "dista_runtime.cli", *args]


def child_env() -> dict[str, str]:
    """This process's import path for the processes a test starts (tests.* importable)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
