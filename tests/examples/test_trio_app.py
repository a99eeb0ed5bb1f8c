"""examples/trio_app.py, run as a user runs it: against a cluster of ``dista`` processes on
trio, and on a local cluster it starts itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.cluster import child_env, cli, head_process, stop_process

pytest.importorskip("trio")
pytestmark = pytest.mark.timeout(120)

EXPECTED = [
    "gave up on a slow task after 0.5 s and cancelled it",
    "20 tasks awaited by 4 coroutines",
    "longest Collatz chain below 10000: 6171 (261 steps)",
]


def _run_app(*args: str) -> list[str]:
    done = subprocess.run(  # noqa: PLW1510  (the assert shows stderr)
        [sys.executable, "examples/trio_app.py", *args],
        capture_output=True,
        text=True,
        timeout=90,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_trio_app_against_a_cluster_on_trio() -> None:
    with head_process("--loop", "trio", env=child_env()) as address:
        worker = subprocess.Popen(
            cli("worker", "--head", address, "--loop", "trio"), env=child_env()
        )
        try:
            assert _run_app("--head", address) == EXPECTED
        finally:
            stop_process(worker)


def test_the_trio_app_on_its_own_local_cluster() -> None:
    assert _run_app() == EXPECTED
