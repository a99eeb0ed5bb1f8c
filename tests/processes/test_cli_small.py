"""The CLI's small promises: a version, one clear line instead of a traceback for a user's
mistake or a closed pipe, and a timeline that names tasks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from dista_runtime.logs import message_of
from tests.support.cluster import head_process

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
CLI = [sys.executable, "-m", "dista_runtime.cli"]
DRIVER = """
import sys, dista_runtime as dista, namedtasks
with dista.init(sys.argv[1]):
    assert namedtasks.square.remote(3).get(timeout=60) == 9
"""


def cli(
    *args: str, cwd: Path = ROOT, stdout: int | None = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        check=False,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=60,
    )


@pytest.fixture(scope="module")
def head() -> Iterator[str]:
    """A `dista head` on a free port; its address."""
    with head_process(env=ENV) as address:
        yield address


def test_timeline_labels() -> None:
    from dista_runtime._api.trace import BY_VALUE_LABEL, task_label
    from dista_runtime._values import ids as _ids
    from dista_runtime._values import registry as _registry
    from tests.support import tasks  # noqa: F401  (registers tests.support.tasks:add)

    assert task_label(_ids.task_id("tests.support.tasks:add")) == "tests.support.tasks.add"
    assert task_label(_ids.task_id("tests.support.tasks:add", 2)) == "tests.support.tasks.add"
    assert task_label(_registry.BY_VALUE_ID) == BY_VALUE_LABEL == "by-value task"
    assert task_label(0xAB) == "task 0xab"


def test_version() -> None:
    out = cli("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "dista 0.1.0"


def test_run_a_missing_script_says_so_in_one_line(tmp_path: Path) -> None:
    out = cli("run", "missing.py", cwd=tmp_path)
    assert out.returncode != 0
    (line,) = out.stderr.splitlines()  # one log line (`dista_runtime.logs`)
    assert message_of(line) == "dista run: missing.py: no such file", line
    assert out.stdout == ""


def test_a_scripts_own_error_keeps_its_traceback(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("raise ValueError('bad input')\n")
    out = cli("run", "--workers", "1", "job.py", cwd=tmp_path)
    assert out.returncode == 1
    assert "ValueError: bad input" in out.stderr
    assert 'File "job.py", line 1' in out.stderr
    assert "runpy" not in out.stderr  # the script's frames, not the CLI's


def test_a_closed_pipe_is_no_traceback(head: str) -> None:
    """`dista status | head -1`: the reader left before we wrote."""
    read, write = os.pipe()
    os.close(read)
    try:
        out = cli("status", "--head", head, stdout=write)
    finally:
        os.close(write)
    assert out.returncode == 141, out.stderr
    assert out.stderr == ""


def test_a_port_in_use_is_one_line(head: str) -> None:
    port = head.rsplit(":", 1)[1]
    out = cli("head", "--port", port)
    assert out.returncode == 1
    assert message_of(out.stderr).startswith("dista head: "), out.stderr
    assert "in use" in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_an_unwritable_trace_file_is_one_line(head: str, tmp_path: Path) -> None:
    out = cli("timeline", "--head", head, "-o", str(tmp_path / "no" / "such" / "t.json"))
    assert out.returncode == 1
    assert out.stderr.startswith("dista timeline: "), out.stderr
    assert "Traceback" not in out.stderr


def test_timeline_names_tasks_from_imported_modules(head: str, tmp_path: Path) -> None:
    (tmp_path / "namedtasks.py").write_text(
        textwrap.dedent(
            """
            import dista_runtime as dista

            @dista.task
            def square(x: int) -> int:
                return x * x
            """
        )
    )
    worker = subprocess.Popen(
        [*CLI, "worker", "--head", head, "--import", "namedtasks"],
        env=ENV,
        cwd=tmp_path,
    )
    try:
        driver = subprocess.run(
            [
                sys.executable,
                "-c",
                DRIVER,
                head,
            ],
            check=False,
            capture_output=True,
            text=True,
            env=ENV,
            cwd=tmp_path,
            timeout=120,
        )
        assert driver.returncode == 0, driver.stderr
        named = cli("timeline", "--head", head, "--import", "namedtasks", cwd=tmp_path)
        assert named.returncode == 0, named.stderr
        assert "namedtasks.square" in named.stdout, named.stdout
        # Without --import too: the driver told the head what its tasks are called.
        told = cli("timeline", "--head", head, cwd=tmp_path)
        assert "namedtasks.square" in told.stdout, told.stdout
        assert "task 0x" not in told.stdout, told.stdout
    finally:
        worker.terminate()
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
