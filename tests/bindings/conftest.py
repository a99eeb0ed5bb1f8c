"""The bindings side by side: every test here runs once per loop, the way anyio's tests run
once per backend. A loop whose binding is not installed is skipped, saying so."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from dista_runtime import loops
from tests.runtime.conftest import stop_process

#: Every loop Dista runs on; "anyio" is anyio on asyncio, "trio" anyio on trio.
LOOPS = ("asyncio", "anyio", "trio", "gevent")


def loop_params(names: tuple[str, ...] = LOOPS) -> list[object]:
    return [
        pytest.param(
            name,
            marks=pytest.mark.skipif(
                not loops.available(name), reason=f"the {name} binding is not installed"
            ),
        )
        for name in names
    ]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dista_runtime.cli", *args]


def child_env() -> dict[str, str]:
    """This process's import path for the processes a test starts (tests.* importable)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


class Cluster:
    """`dista head --loop HEAD` and `dista worker --loop WORKER` processes."""

    def __init__(self, head: str, worker: str, imports: str, workers: int = 1) -> None:
        env = child_env()
        self.head = subprocess.Popen(
            cli("head", "--port", "0", "--loop", head), stderr=subprocess.PIPE, text=True, env=env
        )
        assert self.head.stderr is not None
        line = self.head.stderr.readline()
        assert "listening on" in line, line
        self.address = line.rsplit(" ", 1)[1].strip()
        self.workers = [
            subprocess.Popen(
                cli("worker", "--head", self.address, "--loop", worker, "--import", imports),
                env=env,
            )
            for _ in range(workers)
        ]

    def status(self, loop: str) -> str:
        done = subprocess.run(  # noqa: PLW1510  (the assert shows stderr)
            cli("status", "--head", self.address, "--loop", loop),
            capture_output=True,
            text=True,
            timeout=30,
            env=child_env(),
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def wait_for_workers(self, loop: str, n: int, timeout: float = 30) -> None:
        import time

        deadline = time.monotonic() + timeout
        while f"workers: {n}" not in self.status(loop):
            assert time.monotonic() < deadline, self.status(loop)
            time.sleep(0.1)

    def close(self) -> None:
        for process in [*self.workers, self.head]:
            stop_process(process)


@pytest.fixture
def cli_cluster() -> Iterator[list[Cluster]]:
    """Clusters a test starts with `Cluster(...)` and appends here: closed at its end."""
    started: list[Cluster] = []
    try:
        yield started
    finally:
        for cluster in started:
            cluster.close()
