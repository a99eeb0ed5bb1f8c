"""A driver whose tasks no worker can import gets an error that says what to do, not a hang;
its by-value tasks run on any worker. Real processes: a CLI head, a CLI worker that imports
other modules, and a driver script."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.runtime.conftest import head_process, stop_process

GRACE_S = 2.0
CLI = [sys.executable, "-m", "dista_runtime.cli"]

DRIVER = """
import sys, time
import dista_runtime as dista
import lonely_tasks

dista.init(sys.argv[1])

@dista.task
def by_value(x: int) -> int:  # defined in __main__: travels by value, runs anywhere
    return x + 1

assert by_value.remote(41).get(timeout=30) == 42
began = time.monotonic()
ref = lonely_tasks.lonely.remote()
later = lonely_tasks.lonely.remote()
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
    (tmp_path / "driver.py").write_text(DRIVER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    with head_process("--no-worker-grace", str(GRACE_S), env=env) as address:
        worker = subprocess.Popen(
            [*CLI, "worker", "--head", address, "--import", "tests.runtime.tasks"],
            env=env,
        )
        try:
            driver = subprocess.run(
                [sys.executable, str(tmp_path / "driver.py"), address],
                check=False,
                capture_output=True,
                text=True,
                env=env,
                timeout=90,
                cwd=tmp_path,
            )
        finally:
            stop_process(worker)
    out = driver.stdout
    assert driver.returncode == 0, driver.stderr[-3000:]
    assert (
        "ERROR no worker imports module lonely_tasks: start workers with --import lonely_tasks"
        in out
    ), out
    after = float(out.split("AFTER ", 1)[1].split()[0])
    assert GRACE_S - 0.5 <= after < GRACE_S + 5, out
    assert "STATUS 0" in out, out  # the second task failed too: nothing waits
