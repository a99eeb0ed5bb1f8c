"""Dista's log lines from real processes (`dista_runtime.logs`): a head, a supervisor and its
workers started by the CLI write a time and their role on every line, as text or as JSON
(``--log-format json``, inherited by the workers); a local cluster relays its workers'
lines as they wrote them; an application that configured logging gets ``dista.*`` records
once, through its own handlers.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dista_runtime.logs import formatted, message_of
from tests.support.cluster import child_env, cli

#: A text line: its local time with milliseconds, its role, its level, its message.
LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) "
    r"(head|(?:worker|supervisor|driver) pid (\d+)) (DEBUG|INFO|WARNING|ERROR) (.*)$"
)
JSON_FIELDS = {"time", "level", "role", "pid", "logger", "message"}
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

TASKS = textwrap.dedent(
    """
    import logging
    import os

    import dista_runtime as dista


    @dista.task
    def say(text: str) -> int:
        logging.getLogger("dista.worker").warning("%s", text)  # a worker's own log line
        print("printed by a task")
        return os.getpid()
    """
)


def free_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def run(argv: list[str], cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, check=False, capture_output=True, text=True, timeout=120,
        env=dict(child_env(), **env), cwd=cwd,
    )  # fmt: skip


def text_lines(stderr: str) -> list[re.Match[str]]:
    """Every line of ``stderr`` as a `LINE` match; fails on a line that is not one."""
    found = []
    for line in stderr.splitlines():
        match = LINE.match(line)
        assert match is not None, f"not a log line: {line!r} in\n{stderr}"
        found.append(match)
    return found


def test_a_head_writes_its_time_and_role() -> None:
    head = subprocess.Popen(
        cli("head", "--port", "0"), stderr=subprocess.PIPE, text=True, env=child_env()
    )
    try:
        assert head.stderr is not None
        first = head.stderr.readline().rstrip("\n")
    finally:
        head.terminate()
        rest = head.communicate(timeout=20)[1]
    (listening, stopped) = text_lines(first + "\n" + rest)
    assert listening.group(2) == "head" and listening.group(4) == "INFO", first
    assert re.fullmatch(r"dista head listening on 127\.0\.0\.1:\d+", listening.group(5)), first
    assert stopped.group(5) == "dista head: stopped by a signal", rest


def test_a_supervisor_and_its_workers_name_themselves(tmp_path: Path) -> None:
    """Workers that cannot import their tasks: each says so as ``worker pid N`` (its own
    pid), and their supervisor (``dista worker`` itself) as ``supervisor pid N``."""
    argv = cli("worker", "--head", free_address(), "--processes", "2", "--import", "nowhere")
    supervisor = subprocess.Popen(
        argv, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=tmp_path
    )
    stderr = supervisor.communicate(timeout=120)[1]
    assert supervisor.returncode == 1, stderr
    lines = text_lines(stderr)
    supervisors = [m for m in lines if m.group(2).startswith("supervisor")]
    workers = [m for m in lines if m.group(2).startswith("worker")]
    assert {m.group(3) for m in supervisors} == {str(supervisor.pid)}, stderr
    assert workers and str(supervisor.pid) not in {m.group(3) for m in workers}, stderr
    assert all(m.group(4) == "ERROR" for m in workers), stderr
    assert all("cannot import the task modules" in m.group(5) for m in workers), stderr
    assert any("restarting in 0.25 s" in m.group(5) for m in supervisors), stderr
    assert supervisors[-1].group(5).startswith("dista worker: workers keep failing to start")


def test_json_lines_for_log_shippers_reach_the_workers(tmp_path: Path) -> None:
    head = subprocess.Popen(
        cli("head", "--port", "0", "--log-format", "json"),
        stderr=subprocess.PIPE, text=True, env=child_env(),
    )  # fmt: skip
    try:
        assert head.stderr is not None
        first = json.loads(head.stderr.readline())
    finally:
        head.terminate()
        head.communicate(timeout=20)
    assert set(first) >= JSON_FIELDS and ISO_UTC.match(first["time"]), first
    assert (first["role"], first["logger"], first["pid"]) == ("head", "dista.head", head.pid)
    assert first["level"] == "INFO" and "listening on" in first["message"], first
    address = free_address()
    argv = cli("worker", "--head", address, "--processes", "2", "--import", "nowhere")
    done = run([*argv, "--log-format", "json"], cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines()]  # every line
    assert records and all(set(r) >= JSON_FIELDS for r in records), records
    assert all(ISO_UTC.match(r["time"]) for r in records), records
    roles = {r["role"].rsplit(" ", 1)[0] for r in records}
    assert roles == {"worker pid", "supervisor pid"}, roles  # the children are JSON too
    for r in records:
        assert r["role"] == f"{r['role'].rsplit(' ', 1)[0]} {r['pid']}", r
    loggers = {r["logger"] for r in records}
    assert loggers == {"dista.worker", "dista.supervisor"}, loggers
    # DISTA_LOG_FORMAT does the same, and a bad one is one plain line.
    done = run(cli("head", "--port", "0"), DISTA_LOG_FORMAT="xml")
    assert done.returncode == 2
    assert done.stderr == "dista head: DISTA_LOG_FORMAT must be text or json, not 'xml'\n"


DRIVER = textwrap.dedent(
    """
    import logging, os, sys
    import dista_runtime as dista
    import logtasks

    if sys.argv[1] == "app":  # an application that configured logging itself
        logging.basicConfig(format="APP %(name)s %(levelname)s %(message)s")
    with dista.init(workers=1):
        pid = logtasks.say.remote("a worker speaks").get(timeout=60)
        logging.getLogger("dista.driver").warning("the driver speaks")
        if sys.argv[1] == "late":  # configured after init: Dista's handler steps aside
            logging.basicConfig(format="LATE %(name)s %(message)s")
            logging.getLogger("dista.driver").warning("the driver again")
    print(pid, os.getpid())
    """
)


@pytest.mark.parametrize("how", ["plain", "app", "late"])
def test_a_local_cluster_relays_its_workers_lines(tmp_path: Path, how: str) -> None:
    (tmp_path / "logtasks.py").write_text(TASKS)
    (tmp_path / "driver.py").write_text(DRIVER)
    done = run([sys.executable, "driver.py", how], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    worker, driver = done.stdout.split()[-2:]
    err = done.stderr.splitlines()
    # The worker's line, relayed as it wrote it: its time and role, no second prefix.
    (said,) = [line for line in err if "a worker speaks" in line]
    match = LINE.match(said)
    assert match is not None and match.group(2) == f"worker pid {worker}", said
    assert match.group(4) == "WARNING" and match.group(5) == "a worker speaks", said
    # A task's print is no log line: it keeps the pid prefix.
    assert f"(pid={worker}) printed by a task" in done.stdout, done.stdout
    # The driver's own line: once, in the application's format if it has one.
    (own,) = [line for line in err if "the driver speaks" in line]
    if how == "app":
        assert own == "APP dista.driver WARNING the driver speaks", err
    else:
        match = LINE.match(own)
        assert match is not None and match.group(2) == f"driver pid {driver}", own
    if how == "late":
        (again,) = [line for line in err if "the driver again" in line]
        assert again == "LATE dista.driver the driver again", err


def test_dista_run_logs_as_the_driver_in_json(tmp_path: Path) -> None:
    (tmp_path / "logtasks.py").write_text(TASKS)
    (tmp_path / "job.py").write_text(
        "import logging, logtasks\n"
        "logtasks.say.remote('from a worker').get(timeout=60)\n"
        "logging.getLogger('dista.driver').info('from the driver')\n"
    )
    done = run(cli("run", "--workers", "1", "--log-format", "json", "job.py"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert all(formatted(line.encode()) for line in lines), done.stderr
    records = [json.loads(line) for line in lines]
    by_message = {r["message"]: r for r in records}
    assert by_message["from a worker"]["role"].startswith("worker pid "), records
    driver = by_message["from the driver"]
    assert driver["role"] == f"driver pid {driver['pid']}", driver
    assert message_of(json.dumps(driver)) == "from the driver"


def test_dista_run_no_progress_turns_the_line_off(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text("import os\nprint(os.environ.get('DISTA_PROGRESS'))\n")
    done = run(cli("run", "--no-progress", "job.py"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
    done = run(cli("run", "job.py"), cwd=tmp_path)
    assert done.stdout.strip() == os.environ.get("DISTA_PROGRESS", "None")
