"""The bindings side by side: the loops every binding test runs once on (the way anyio's
tests run once per backend; a loop whose binding is not installed is skipped, saying so),
and a cluster of CLI processes whose head and workers run chosen loops."""

from __future__ import annotations

import subprocess

import pytest

from dista_runtime import loops
from tests.support.cluster import child_env, cli, stop_process

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
