"""A driver whose tasks no worker can import gets an error that says what to do, not a hang;
its by-value tasks run on a worker of another registry only if it accepts by-value code
(``--accept-by-value``). Real processes: a CLI head, a CLI worker that imports
other modules, and a driver script."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.support.cluster import head_process, stop_process

GRACE_S = 2.0
CLI = [sys.executable, "-m", "dista_runtime.cli"]

#: The end of each driver script: wait for ``ref`` (submitted at ``began``), then say how
#: it ended, when, and how many tasks the head still has waiting.
REPORT = """
try:
    ref.get(timeout=60)
except dista.TaskError as e:
    print("ERROR", str(e).splitlines()[0])
    print("AFTER", round(time.monotonic() - began, 1))
else:
    print("RAN")
print("STATUS", dista.stats().pending)
dista.shutdown()
"""

DRIVER = """
import sys, time
import dista_runtime as dista
import lonely_tasks

dista.init(sys.argv[1])

@dista.task
def by_value(x: int) -> int:  # defined in __main__: by value, on a worker accepting it
    return x + 1

assert by_value.remote(41).get(timeout=30) == 42
began = time.monotonic()
ref = lonely_tasks.lonely.remote()
later = lonely_tasks.lonely.remote()
"""


def _one_worker_then(
    tmp_path: Path, worker: list[str], driver: list[str]
) -> subprocess.CompletedProcess[str]:
    """A head with the short no-worker grace and one worker (``worker``: its flags), then a
    driver (``driver``: this interpreter's arguments, then the head's address), run in
    ``tmp_path`` with it on the path; the driver's run, once the worker is stopped."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    with head_process("--no-worker-grace", str(GRACE_S), env=env) as address:
        process = subprocess.Popen([*CLI, "worker", "--head", address, *worker], env=env)
        try:
            return subprocess.run(
                [sys.executable, *driver, address], check=False, capture_output=True,
                text=True, env=env, timeout=90, cwd=tmp_path,
            )  # fmt: skip
        finally:
            stop_process(process)


def test_tasks_no_worker_imports_fail_after_the_grace_naming_the_module(tmp_path: Path) -> None:
    (tmp_path / "lonely_tasks.py").write_text(
        textwrap.dedent(
            """
            import dista_runtime as dista

            @dista.task
            def lonely() -> int:
                return 1
            """
        )
    )
    (tmp_path / "driver.py").write_text(DRIVER + REPORT)
    driver = _one_worker_then(
        tmp_path,
        ["--import", "tests.support.tasks", "--accept-by-value"],
        [str(tmp_path / "driver.py")],
    )
    out = driver.stdout
    assert driver.returncode == 0, driver.stderr[-3000:]
    assert (
        "ERROR no worker imports module lonely_tasks: start workers with --import lonely_tasks"
        in out
    ), out
    after = float(out.split("AFTER ", 1)[1].split()[0])
    assert GRACE_S - 0.5 <= after < GRACE_S + 5, out
    assert "STATUS 0" in out, out  # the second task failed too: nothing waits


SCRIPT_TASKS = """
import sys, time
import dista_runtime as dista

@dista.task
def twice(x: int) -> int:
    return 2 * x

if __name__ == "__main__":
    dista.init(sys.argv[1])
    began = time.monotonic()
    ref = twice.remote(21)
""" + textwrap.indent(REPORT, "    ")


def test_a_script_run_as_python_m_is_told_its_tasks_travel_by_value(tmp_path: Path) -> None:
    """Its workers import the script's module, but run as ``python -m``, its tasks are
    ``__main__``'s: by value. The error says so and what to do, not "import the same
    modules" (which the workers do)."""
    (tmp_path / "script_tasks.py").write_text(SCRIPT_TASKS)
    driver = _one_worker_then(tmp_path, ["--import", "script_tasks"], ["-m", "script_tasks"])
    out = driver.stdout
    assert driver.returncode == 0, driver.stderr[-3000:]
    assert (
        "ERROR this script runs as `python -m script_tasks`, so its tasks and actors are "
        "defined in __main__ and travel by value, even to workers that --import script_tasks"
    ) in out, out


LOST = """
import sys, time
import dista_runtime as dista
from tests.support import tasks

dista.init(sys.argv[1])
ref = tasks.sleep_then.remote(60, 1, sys.argv[2])
print("SUBMITTED", flush=True)
began = time.monotonic()
"""


def test_a_task_whose_only_worker_is_killed_fails_after_the_grace(tmp_path: Path) -> None:
    """SIGKILL the one worker while it runs a task: the task goes back to the queue, and
    with no worker of its registry left it fails after the grace (it used to wait for
    ever, while `dista status` said it would fail)."""
    marker = tmp_path / "running"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    with head_process("--no-worker-grace", str(GRACE_S), env=env) as address:
        worker = subprocess.Popen(
            [*CLI, "worker", "--head", address, "--import", "tests.support.tasks"], env=env
        )
        driver = subprocess.Popen(
            [sys.executable, "-c", LOST + REPORT, address, str(marker)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            deadline = time.monotonic() + 30
            while not marker.exists():
                assert time.monotonic() < deadline, "the task never started"
                time.sleep(0.05)
            worker.send_signal(signal.SIGKILL)
            worker.wait(10)
            out, err = driver.communicate(timeout=60)
        finally:
            stop_process(worker)
            stop_process(driver)
    assert driver.returncode == 0, err[-3000:]
    assert "ERROR" in out and "none of the connected workers" in out, out
    after = float(out.split("AFTER ", 1)[1].split()[0])
    assert after < GRACE_S + 10, out
    assert "STATUS 0" in out, out


SUBSET_DRIVER = """
import sys, time
import dista_runtime as dista
import alpha_tasks
{extra}
dista.init(sys.argv[1])
began = time.monotonic()
ref = alpha_tasks.alpha.remote(20)
"""


def _task_module(tmp_path: Path, name: str) -> None:
    (tmp_path / f"{name}_tasks.py").write_text(
        textwrap.dedent(
            f"""
            import dista_runtime as dista

            @dista.task
            def {name}(x: int) -> int:
                return x + 1
            """
        )
    )


def test_a_worker_serves_drivers_importing_some_of_its_modules(tmp_path: Path) -> None:
    """Task-names: a worker importing alpha and beta runs the tasks of a driver importing
    only alpha (their registry hashes differ); a driver importing alpha and gamma is told
    that gamma, not alpha, is the module no worker imports."""
    for name in ("alpha", "beta", "gamma"):
        _task_module(tmp_path, name)
    (tmp_path / "subset.py").write_text(SUBSET_DRIVER.format(extra="") + REPORT)
    (tmp_path / "wider.py").write_text(SUBSET_DRIVER.format(extra="import gamma_tasks") + REPORT)
    worker = ["--import", "alpha_tasks", "--import", "beta_tasks"]
    subset = _one_worker_then(tmp_path, worker, [str(tmp_path / "subset.py")])
    assert subset.returncode == 0, subset.stderr[-3000:]
    assert "RAN" in subset.stdout, subset.stdout
    wider = _one_worker_then(tmp_path, worker, [str(tmp_path / "wider.py")])
    assert wider.returncode == 0, wider.stderr[-3000:]
    assert (
        "ERROR no worker imports module gamma_tasks: start workers with --import gamma_tasks"
        in wider.stdout
    ), wider.stdout
