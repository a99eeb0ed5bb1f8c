"""A plain ``dista worker`` (no ``--processes``) is supervised too: its worker process is a
child that is replaced when it crashes, while what users saw stays (the worker's own output,
SIGTERM drains and exits 0, Ctrl-C exits 130, a worker that cannot start exits 2 with why,
one that cannot reach its head, once it no longer waits for it, 69).

The pid of ``dista worker`` is the supervisor's; a task's ``os.getpid()`` is the worker
child's, which these tests crash.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dista_runtime.logs import message_of
from tests.processes.test_supervise import (
    CLI,
    TASKS,
    Lines,
    children_of,
    env_for,
    last_json,
    run_driver,
    wait_for_head_workers,
)
from tests.support.cluster import alive, assert_gone, head_process

PIDS = """
import json, sys
import dista_runtime as dista
import crashy
with dista.init(sys.argv[1]):
    print(json.dumps({"pids": dista.get([crashy.hello.remote("hi") for _ in range(4)])}))
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory holding the task module ``crashy`` and a private TMPDIR (``tmp/``)."""
    (tmp_path / "crashy.py").write_text(TASKS)
    (tmp_path / "tmp").mkdir()
    return tmp_path


@pytest.fixture
def head(workdir: Path) -> Iterator[str]:
    with head_process(env=env_for(workdir)) as address:
        yield address


def _worker_pids(workdir: Path, head: str) -> set[int]:
    out = run_driver(workdir, PIDS.replace("sys.argv[1]", repr(head)), timeout=60)
    assert out.returncode == 0, out.stderr
    pids = last_json(out.stdout)["pids"]
    assert isinstance(pids, list)
    return {int(p) for p in pids}


def _start(workdir: Path, head: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "worker", "--head", head, "--import", "crashy"],
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(workdir),
        cwd=workdir,
    )


def _end(worker: subprocess.Popen[str], children: list[int]) -> None:
    if worker.poll() is None:
        worker.kill()
        worker.wait()
    for pid in children:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    if worker.stderr is not None:
        worker.stderr.close()


def test_a_plain_worker_that_segfaults_is_replaced_and_sigterm_still_drains_it(
    workdir: Path, head: str
) -> None:
    worker = _start(workdir, head)
    children: list[int] = []
    try:
        err = Lines(worker.stderr)
        wait_for_head_workers(head, 1)
        (victim,) = _worker_pids(workdir, head)
        assert victim != worker.pid and children_of(worker.pid) == [victim]
        os.kill(victim, signal.SIGSEGV)
        line = err.wait_for(f"pid {victim} died: SIGSEGV")
        assert message_of(line).startswith("dista worker: ") and "restarting" in line, line
        wait_for_head_workers(head, 1)
        (replacement,) = _worker_pids(workdir, head)  # runs tasks, and status shows it
        assert replacement != victim and children_of(worker.pid) == [replacement]
        children = [replacement]
        worker.send_signal(signal.SIGTERM)  # drains the worker, as unsupervised
        assert worker.wait(30) == 0
        assert_gone(children)
        assert any("draining" in line for line in err.lines), err.lines
        assert "Traceback" not in "".join(err.lines), err.lines
    finally:
        _end(worker, children)


def test_sigkill_of_the_plain_worker_pid_loses_the_worker(workdir: Path, head: str) -> None:
    """SIGKILL to what a user started ends both processes: the head loses its worker
    (nothing is left to replace it), as before supervision."""
    worker = _start(workdir, head)
    children: list[int] = []
    try:
        wait_for_head_workers(head, 1)
        children = children_of(worker.pid)
        assert len(children) == 1, children
        worker.kill()
        worker.wait()
        wait_for_head_workers(head, 0)
        assert_gone(children)
    finally:
        _end(worker, children)


def test_ctrl_c_stops_a_plain_worker_with_its_code(workdir: Path, head: str) -> None:
    worker = _start(workdir, head)
    children: list[int] = []
    try:
        wait_for_head_workers(head, 1)
        children = children_of(worker.pid)
        worker.send_signal(signal.SIGINT)
        assert worker.wait(15) == 130
        assert_gone(children)
    finally:
        _end(worker, children)


def test_a_plain_worker_that_cannot_start_exits_with_the_reason_once(workdir: Path) -> None:
    out = _lone_worker(workdir, "--import", "nowhere")
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("cannot import the task modules") == 1, out.stderr
    assert "restarting" not in out.stderr, out.stderr
    out = _lone_worker(workdir, "--wait-for-head", "0")  # a head not there yet is waited for
    assert out.returncode == 69, out.stderr
    assert out.stderr.count("cannot reach the head") == 1, out.stderr


def _lone_worker(workdir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """A plain `dista worker` of a head nobody runs, with ``flags``: how it ended."""
    return subprocess.run(
        [*CLI, "worker", "--head", "127.0.0.1:9", *flags],
        check=False, capture_output=True, text=True, env=env_for(workdir), cwd=workdir,
        timeout=60,
    )  # fmt: skip
