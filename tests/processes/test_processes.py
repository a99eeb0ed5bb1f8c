"""Clusters from the CLI, several drivers, teardown without orphans, the CLI itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.cluster import CliHead, alive, assert_gone, stop_process

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))

DRIVER = textwrap.dedent(
    """
    import sys
    import dista_runtime as dista
    from tests.support import tasks

    with dista.init(sys.argv[1]):
        n = int(sys.argv[2])
        refs = [tasks.add.remote(i, 1) for i in range(n)]
        values = dista.get(refs, timeout=120)
        assert values == [i + 1 for i in range(n)], "wrong values"
        del refs
        print("ok", sum(values))
    """
)


def run_driver(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        check=False,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=timeout,
        cwd=ROOT,
    )


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dista_runtime.cli", *args],
        check=False,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=timeout,
        cwd=ROOT,
    )


def test_four_drivers_10000_tasks(cli_head: CliHead) -> None:
    drivers = [
        subprocess.Popen(
            [sys.executable, "-c", DRIVER, cli_head.address, "2500"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            cwd=ROOT,
        )
        for _ in range(4)
    ]
    for d in drivers:
        out, err = d.communicate(timeout=120)
        assert d.returncode == 0, err
        assert out.strip() == f"ok {sum(range(1, 2501))}"
    status = cli("status", "--head", cli_head.address)
    assert status.returncode == 0, status.stderr
    assert "2 workers" in status.stdout or "workers: 2" in status.stdout, status.stdout


def test_cli_status_timeline_stop(cli_head: CliHead, tmp_path: Path) -> None:
    result = run_driver(DRIVER, cli_head.address, "20")
    assert result.returncode == 0, result.stderr
    trace = tmp_path / "trace.json"
    out = cli("timeline", "--head", cli_head.address, "--output", str(trace))
    assert out.returncode == 0, out.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "run") == 20
    table = cli("timeline", "--head", cli_head.address)
    assert table.returncode == 0 and "finished tasks" in table.stdout
    stopped = cli("stop", "--head", cli_head.address)
    assert stopped.returncode == 0, stopped.stderr
    assert cli_head.head.wait(10) == 0
    for w in cli_head.workers:
        assert w.wait(10) == 0


def test_cli_help_for_every_command() -> None:
    for command in ["head", "worker", "status", "timeline", "stop", "run"]:
        out = cli(command, "--help")
        assert out.returncode == 0 and "usage: dista" in out.stdout, command
    assert "COMMAND" in cli("--help").stdout


def test_status_without_a_head_says_so() -> None:
    out = cli("status", "--head", "127.0.0.1:9", "--timeout", "2")
    assert out.returncode == 1
    assert "cannot reach a Dista head" in out.stderr


def _spawn_local_driver(script: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=ROOT,
    )


HOLD = textwrap.dedent(
    """
    import faulthandler, signal, sys, time
    import dista_runtime as dista
    from tests.support import tasks
    faulthandler.register(signal.SIGUSR1)  # the test asks where it hangs, if it does
    # As a terminal's program: a background job of a non-interactive shell (CI launched
    # with `&`) inherits SIGINT ignored, and Python then installs no handler for it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    cluster = dista.init(workers=2)
    assert tasks.add.remote(1, 2).get(timeout=30) == 3
    print(" ".join(map(str, cluster.pids())), flush=True)
    time.sleep(60)
    """
)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_no_orphans_when_the_driver_dies(how: signal.Signals) -> None:
    driver = _spawn_local_driver(HOLD)
    try:
        assert driver.stdout is not None
        line = driver.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2, (line, driver.stderr.read() if driver.stderr else "")  # workers
        assert all(alive(p) for p in pids)
        driver.send_signal(how)
        try:
            driver.wait(10)
        except subprocess.TimeoutExpired:
            driver.send_signal(signal.SIGUSR1)
            time.sleep(1)
            driver.kill()
            _, err = driver.communicate()
            raise AssertionError(f"the driver did not exit after {how.name}:\n{err}") from None
        assert_gone(pids)
    finally:
        stop_process(driver)


def test_clean_exit_leaves_nothing() -> None:
    script = textwrap.dedent(
        """
        import dista_runtime as dista
        from tests.support import tasks
        with dista.init(workers=2) as cluster:
            assert tasks.add.remote(1, 2).get(timeout=30) == 3
            print(" ".join(map(str, cluster.pids())))
        """
    )
    result = run_driver(script)
    assert result.returncode == 0, result.stderr
    assert_gone([int(p) for p in result.stdout.split()])
    assert "Traceback" not in result.stderr, result.stderr


def test_dista_run_script(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(
        textwrap.dedent(
            """
            import dista_runtime as dista

            @dista.task
            def square(x: int) -> int:
                return x * x

            print(sum(dista.get([square.remote(i) for i in range(10)])))
            """
        )
    )
    result = cli("run", "--workers", "2", str(script), timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(sum(i * i for i in range(10)))


def test_quickstart() -> None:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "examples/quickstart.py"],
        check=False,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "pi ~ 3.14" in result.stdout
    assert "200 MiB array result" in result.stdout
    assert "0 objects held" in result.stdout
    assert time.monotonic() - started < 60
