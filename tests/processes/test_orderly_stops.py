"""Orderly stops and plain messages, as a new user meets them (issue 29, deliverable 5):
each stop ends cleanly and says what happened in one line. Real processes throughout: a
driver script, the CLI, real signals; each test kills what it started.
"""

from __future__ import annotations

import http.server
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.processes.test_tls import CLI, cli, env
from tests.support.processes import Procs

_TASKS = "tests.processes.support.stops_tasks"
_LISTENING = re.compile(r"listening on (\S+):(\d+)")


def _driver(procs: Procs, name: str, code: str, **environ: str) -> subprocess.Popen[bytes]:
    """``code`` run as a driver script (in a session of its own, as a terminal's job)."""
    procs.spawn(name, [sys.executable, "-c", code], env(**environ))
    return procs.procs[name]


def _children(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def _all_gone(kids: list[psutil.Process], timeout: float) -> None:
    _, alive = psutil.wait_procs(kids, timeout=timeout)
    for kid in alive:
        kid.kill()
    assert not alive, f"left running: {alive}"


def _head(procs: Procs, *more: str) -> tuple[str, int]:
    procs.spawn("head", [*CLI, "head", "--port", "0", *more], env())
    found = procs.wait_for("head", _LISTENING)
    return found.group(1), int(found.group(2))


# -- 1. gevent, SIGTERM ---------------------------------------------------------------------

_GEVENT = f"""
from gevent import monkey; monkey.patch_all()
import time
import dista_runtime as dista
from {_TASKS} import spin
dista.init(workers=2)
print(spin.remote(0.0).get(), "ready", flush=True)
time.sleep(60)
"""


def test_sigterm_to_a_gevent_driver_ends_it_and_its_workers_without_tracebacks(
    procs: Procs,
) -> None:
    proc = _driver(procs, "driver", _GEVENT)
    procs.wait_for("driver", re.compile("ready"))
    kids = _children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == -signal.SIGTERM  # died of the signal, as the default action
    _all_gone(kids, 5)
    out = procs.log("driver")
    assert "Traceback" not in out and "BlockingSwitchOutError" not in out, out


# -- 2. init() inside asyncio.run -----------------------------------------------------------

_IN_ASYNCIO = f"""
import asyncio
import dista_runtime as dista
from {_TASKS} import spin

async def main():
    dista.init(workers=1)
    print(await spin.remote(0.0), "done", flush=True)
    dista.shutdown()

asyncio.run(main())
"""


def test_init_inside_asyncio_run_shuts_down_without_warnings(procs: Procs) -> None:
    proc = _driver(procs, "driver", _IN_ASYNCIO)
    assert proc.wait(60) == 0, procs.log("driver")
    out = procs.log("driver")
    assert "done" in out
    assert "never awaited" not in out and "Warning" not in out, out


# -- 3. Ctrl-C of a busy local cluster ------------------------------------------------------

_BUSY = f"""
import dista_runtime as dista
from {_TASKS} import spin
with dista.init(workers=2):
    refs = [spin.remote(0.06) for _ in range(400)]
    print("ready", flush=True)
    dista.get(refs)
"""


@pytest.mark.parametrize("attempt", range(4))  # the race it fixes: about one in two
def test_ctrl_c_of_a_busy_local_cluster_exits_at_once(procs: Procs, attempt: int) -> None:
    proc = _driver(procs, "driver", _BUSY)
    procs.wait_for("driver", re.compile("ready"), timeout=30)
    time.sleep(0.3)  # results flowing
    kids = _children(proc.pid)
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(15)
    took = time.monotonic() - began
    _all_gone(kids, 5)
    out = procs.log("driver")
    assert took < 1.5, f"Ctrl-C took {took:.2f} s:\n{out}"
    assert "lost the head" not in out and "reconnecting" not in out, out
    assert out.rstrip().endswith("KeyboardInterrupt"), out  # and nothing after it


# -- 4. dista stop of `dista worker --processes N` ------------------------------------------


def test_dista_stop_of_worker_processes_says_so_once(procs: Procs) -> None:
    host, port = _head(procs)
    argv = [*CLI, "worker", "--head", f"{host}:{port}", "--processes", "2"]
    procs.spawn("workers", [*argv, "--import", _TASKS], env())
    deadline = time.monotonic() + 30
    while "workers 2" not in _status(host, port):
        assert time.monotonic() < deadline, procs.log("workers")
        time.sleep(0.1)
    kids = _children(procs.procs["workers"].pid)
    stop = subprocess.run(
        [*CLI, "stop", "--head", f"{host}:{port}"], env=env(), timeout=30, check=False
    )
    assert stop.returncode == 0
    assert procs.procs["workers"].wait(30) == 0
    _all_gone(kids, 5)
    out = procs.log("workers")
    assert "cannot reach the head" not in out, out
    assert len(out.strip().splitlines()) == 1 and "stopped us" in out, out


def _status(host: str, port: int) -> str:
    done = subprocess.run(
        [*CLI, "status", "--head", f"{host}:{port}"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=30,
        check=False,
    )
    return re.sub(r"\s+", " ", done.stdout)


# -- 5. a worker drained with nowhere to go -------------------------------------------------

_HOLDER = """
import os, signal, sys, time
import dista_runtime as dista
from {tasks} import big
dista.init("{host}:{port}")
ref = big.remote(1 << 20)
dista.wait([ref], num_returns=1, timeout=30)
os.kill({worker}, signal.SIGTERM)
time.sleep(3)  # its drain (1 s) times out: nowhere to move the object
began = time.monotonic()
try:
    ref.get(timeout=60)
except Exception as e:
    print(f"failed in {{time.monotonic() - began:.1f}} s: {{e}}", flush=True)
"""


def test_a_worker_drained_with_nowhere_to_go_says_so(procs: Procs) -> None:
    host, port = _head(procs, "--recovery-grace", "2")  # how long it waits for a worker back
    argv = [*CLI, "worker", "--head", f"{host}:{port}", "--no-supervise", "--import", _TASKS]
    procs.spawn("worker", argv, env(DISTA_DRAIN_TIMEOUT="1"))
    procs.wait_for("head", re.compile("listening"))
    deadline = time.monotonic() + 30
    while "workers 1" not in _status(host, port):
        assert time.monotonic() < deadline, procs.log("worker")
        time.sleep(0.1)
    code = _HOLDER.format(tasks=_TASKS, host=host, port=port, worker=procs.procs["worker"].pid)
    proc = _driver(procs, "driver", code)
    assert proc.wait(60) == 0, procs.log("driver")
    said = procs.log("driver")
    found = re.search(r"failed in ([\d.]+) s: (.*)", said)
    assert found is not None, said
    assert float(found.group(1)) < 10.0, said
    assert "was drained and left, and no other worker could take its objects" in said, said
    assert procs.procs["worker"].wait(10) == 0
    worker = procs.log("worker")
    assert "reconnecting" not in worker and "lost the head" not in worker, worker
    assert "leaving: drain timed out" in worker, worker


# -- 6. a port out of range -----------------------------------------------------------------


@pytest.mark.parametrize("command", ["head", "dashboard"])
def test_a_port_out_of_range_is_one_line(command: str) -> None:
    code, lines = cli([command, "--port", "99999"])
    assert code == 2
    assert len(lines) == 1 and "--port must be from 0 to 65535, not 99999" in lines[0], lines


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"DISTA_RECOVERY_GRACE": "soon"}, "DISTA_RECOVERY_GRACE must be a number of seconds"),
        ({"DISTA_HEAD_ON_SIGTERM": "reboot"}, "DISTA_HEAD_ON_SIGTERM must be stop or restart"),
    ],
)
def test_a_bad_head_setting_in_the_environment_is_one_line(
    setting: dict[str, str], said: str
) -> None:
    code, lines = cli(["head", "--port", "0"], **setting)
    assert code == 2
    assert len(lines) == 1 and said in lines[0], lines


# -- 7. init() against a port that is not a Dista head --------------------------------------


def _init_fails(procs: Procs, port: int, **environ: str) -> tuple[float, str]:
    code = f"""
import time
import dista_runtime as dista
began = time.monotonic()
try:
    dista.init("127.0.0.1:{port}")
except Exception as e:
    print(f"failed in {{time.monotonic() - began:.1f}} s: {{e}}", flush=True)
"""
    proc = _driver(procs, "driver", code, **environ)
    assert proc.wait(60) == 0, procs.log("driver")
    said = procs.log("driver")
    found = re.search(r"failed in ([\d.]+) s: (.*)", said)
    assert found is not None, said
    return float(found.group(1)), found.group(2)


def _tcp_server(answer: bytes | None) -> Iterator[int]:
    """A TCP server's port: it takes connections and writes ``answer`` to each (None:
    says nothing), until the test ends."""
    server = socket.create_server(("127.0.0.1", 0))
    taken: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn = server.accept()[0]
            except OSError:
                return
            taken.append(conn)
            if answer is not None:
                conn.sendall(answer)

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
        for conn in taken:
            conn.close()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP server that takes connections and says nothing."""
    yield from _tcp_server(None)


@pytest.fixture
def http_server() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def chatty_server() -> Iterator[int]:
    """A TCP server that answers whatever it is sent with an HTTP error."""
    yield from _tcp_server(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


@pytest.mark.parametrize("server", ["silent_server", "http_server", "chatty_server"])
def test_init_against_a_port_that_is_not_a_head_fails_fast(
    procs: Procs, server: str, request: pytest.FixtureRequest
) -> None:
    port: int = request.getfixturevalue(server)
    took, why = _init_fails(procs, port)
    assert took < 5.0, why  # not init's 30 s timeout
    assert f"127.0.0.1:{port} is not a Dista head" in why, why
    assert len(procs.log("driver").strip().splitlines()) == 1, procs.log("driver")


# -- 8. a TLS driver and a plain head -------------------------------------------------------


@pytest.mark.parametrize("loop", ["asyncio", "gevent"])
def test_a_tls_driver_dialing_a_plain_head_is_told_so(
    procs: Procs, tmp_path: Path, loop: str
) -> None:
    pytest.importorskip("cryptography", reason="dista certs needs the tls extra")
    from dista_runtime._tls import certs

    certs.write_quickstart(tmp_path / "tls")
    _, port = _head(procs)
    _, why = _init_fails(procs, port, DISTA_TLS_DIR=str(tmp_path / "tls"), DISTA_LOOP=loop)
    assert "WRONG_VERSION_NUMBER" in why
    assert "the head does not run TLS" in why, why
