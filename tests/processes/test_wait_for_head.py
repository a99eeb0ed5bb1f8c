"""Workers started before their head wait for it (``--wait-for-head``,
``DISTA_WAIT_FOR_HEAD``; `dista_runtime._hosts.wait`), with real processes: a worker and
``--processes 2`` started first join a head started later and run its tasks; a head that
never comes is an error after the wait, not at once; SIGTERM ends the wait at once; a
head's certificate from another CA is no absence, and fails at once.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dista_runtime.logs import message_of
from tests.support.cluster import child_env, cli
from tests.support.processes import ROOT, Procs

_WAITING = re.compile(r"dista worker pid \d+: no head at (\S+) yet \(connection refused\)")
_DRIVER = """
import sys
import dista_runtime as dista
from tests.support import tasks
with dista.init(address=sys.argv[1]):
    print(tasks.add.remote(2, 3).get(timeout=30))
"""


def free_address() -> str:
    """A loopback port nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def start_head_later(procs: Procs, address: str, started: float, after: float = 1.5) -> None:
    """`dista head` on ``address``, ``after`` seconds after ``started``; returns once it
    listens."""
    time.sleep(max(0.0, started + after - time.monotonic()))
    port = address.rsplit(":", 1)[1]
    procs.spawn("head", cli("head", "--port", port), child_env())
    procs.wait_for("head", re.compile("listening on"))


def workers_of(address: str) -> int:
    done = subprocess.run(
        cli("status", "--head", address), check=False, capture_output=True, text=True,
        env=child_env(), timeout=30,
    )  # fmt: skip
    return len(re.findall(r"^worker ", done.stdout, re.MULTILINE)) if done.returncode == 0 else 0


def wait_workers(address: str, n: int, timeout: float = 15.0) -> float:
    """Seconds until ``n`` workers joined the head at ``address``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if workers_of(address) >= n:
            return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"{n} workers did not join {address} in {timeout} s")


def test_a_worker_started_first_joins_a_head_started_later(procs: Procs) -> None:
    address = free_address()
    started = time.monotonic()
    argv = cli("worker", "--head", address, "--import", "tests.support.tasks")
    procs.spawn("worker", argv, child_env())
    assert procs.wait_for("worker", _WAITING).group(1) == address
    start_head_later(procs, address, started)
    driver = subprocess.run(
        [sys.executable, "-c", _DRIVER, address], check=False, capture_output=True, text=True,
        env=child_env(), cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert driver.returncode == 0 and driver.stdout.strip() == "5", driver.stderr
    said = procs.wait_for("worker", re.compile(r"reached the head at \S+ after [\d.]+ s"))
    assert said.group(0).startswith(f"reached the head at {address} after")
    log = procs.log("worker")
    assert log.count("no head at") == 1, log  # one line while it waited, not one a try
    assert "Traceback" not in log, log


def test_processes_started_first_all_join(procs: Procs) -> None:
    address = free_address()
    started = time.monotonic()
    argv = cli("worker", "--head", address, "--processes", "2", "--import", "tests.support.tasks")
    procs.spawn("workers", argv, child_env())
    procs.wait_for("workers", _WAITING)
    start_head_later(procs, address, started)
    wait_workers(address, 2)
    assert procs.procs["workers"].poll() is None  # no waiting child was taken for a start failure
    procs.procs["workers"].send_signal(signal.SIGTERM)
    assert procs.procs["workers"].wait(15) == 128 + signal.SIGTERM
    log = procs.log("workers")
    assert "keep failing" not in log and "exited" not in log and "Traceback" not in log, log


def test_a_head_that_never_comes_fails_after_the_wait(procs: Procs) -> None:
    address = free_address()
    start = time.monotonic()
    done = subprocess.run(
        cli("worker", "--head", address, "--wait-for-head", "1"), check=False,
        capture_output=True, text=True, env=child_env(), timeout=60,
    )  # fmt: skip
    took = time.monotonic() - start
    assert done.returncode == 69, done.stderr
    assert 1.0 < took < 8.0, took
    lines = [message_of(line) for line in done.stderr.splitlines()]
    assert lines[0].endswith(
        f"no head at {address} yet (connection refused); trying again for up to 1 s "
        "(--wait-for-head, DISTA_WAIT_FOR_HEAD)"
    ), lines
    assert lines[-1].startswith(f"dista worker: no head at {address} after trying for 1."), lines
    assert "(--wait-for-head or DISTA_WAIT_FOR_HEAD: 1 s;" in lines[-1], lines
    assert "last: [Errno 111]" in lines[-1], lines
    assert len(lines) == 2 and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("how", ["one", "--processes 2", "--no-supervise"])
def test_sigterm_while_waiting_exits_at_once(procs: Procs, how: str) -> None:
    flags = [] if how == "one" else how.split()
    procs.spawn("worker", cli("worker", "--head", free_address(), *flags), child_env())
    procs.wait_for("worker", _WAITING)
    if how == "--processes 2":  # both children wait
        deadline = time.monotonic() + 20
        while len(_WAITING.findall(procs.log("worker"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    worker = procs.procs["worker"]
    start = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    code = worker.wait(10)
    took = time.monotonic() - start
    assert took < 1.0, took
    assert code == (128 + signal.SIGTERM if how == "--processes 2" else 0)
    log = procs.log("worker")
    assert "stopped by a signal before joining the head" in log, log
    assert "Traceback" not in log, log


def test_a_head_of_another_ca_is_not_waited_for(procs: Procs, tmp_path: Path) -> None:
    pytest.importorskip("cryptography", reason="dista certs needs the tls extra")
    from dista_runtime._tls import certs

    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    certs.write_quickstart(ours)
    certs.write_quickstart(theirs)
    argv = cli("head", "--port", "0", "--tls-dir", str(ours))
    procs.spawn("head", argv, child_env())
    address = procs.wait_for("head", re.compile(r"listening on (\S+)")).group(1)
    start = time.monotonic()
    done = subprocess.run(
        cli("worker", "--head", address, "--tls-dir", str(theirs)), check=False,
        capture_output=True, text=True, env=child_env(), timeout=60,
    )  # fmt: skip
    assert done.returncode == 69, done.stderr
    assert time.monotonic() - start < 10.0  # the default wait is 60 s: not waited for
    assert "CERTIFICATE_VERIFY_FAILED" in done.stderr, done.stderr
    assert "no head at" not in done.stderr, done.stderr
