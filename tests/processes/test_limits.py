"""Resource bounds per peer against real heads (`dista_runtime._net.limits`, `_admission`).

Probed before these bounds: 2,000 idle connections stayed open for ever, and under
``ulimit -n 1024`` 1,100 silent ones locked new drivers out while the head wrote 168,511
lines of "Too many open files". Now a connection past a cap is refused (or the oldest silent
one closed for it) when it is attached, before a byte of it is read; the refusals and the
accept errors are a few lines, not one each; and a peer that floods the head and never
reads its replies is no longer read, so the head stays small and serves the others.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

import dista_proto as dp
from dista_proto import frame as F
from dista_runtime._net.limits import (
    MAX_CONNECTIONS_CEILING,
    Limits,
    add_limit_options,
    default_max_connections,
    limits_from_args,
    limits_from_env,
)
from dista_runtime.logs import message_of

ROOT = Path(__file__).resolve().parents[2]
LOOPS = ["asyncio", "anyio", "gevent"]
#: Only the caps close silent connections here, however slow a loaded machine is.
NO_HELLO_TIMEOUTS = {"DISTA_HELLO_TIMEOUT": "0", "DISTA_HELLO_IDLE_TIMEOUT": "0"}

DRIVER = textwrap.dedent(
    """
    import sys
    import dista_runtime as dista
    from tests.support import tasks

    with dista.init(sys.argv[1]):
        refs = [tasks.add.remote(i, 1) for i in range(20)]
        assert dista.get(refs, timeout=30) == [i + 1 for i in range(20)], "wrong values"
        print("ok")
    """
)


def _env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTA_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    env.update(settings)
    return env


class Head:
    """``dista head`` in a subprocess (under ``nofile`` open files, if given), and with
    ``worker`` a ``dista worker`` that has joined it."""

    def __init__(
        self, loop: str = "asyncio", nofile: int = 0, worker: bool = False, **settings: str
    ) -> None:
        self.env = _env(**settings)
        start = (
            "import resource, sys\n"
            f"if {nofile}: resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile}))\n"
            "from dista_runtime.cli import main\n"
            f"sys.exit(main(['head', '--port', '0', '--loop', '{loop}']))\n"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", start], stderr=subprocess.PIPE, text=True, env=self.env
        )
        self.worker: subprocess.Popen[bytes] | None = None
        assert self.process.stderr is not None
        line = self.process.stderr.readline()
        assert "listening on" in line, line
        self.address = line.rsplit(" ", 1)[1].strip()
        host, port = self.address.rsplit(":", 1)
        self.where = (host, int(port))
        self.log: list[str] = []
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        if worker:
            self._start_worker()

    def _read_log(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line.rstrip("\n"))

    def _start_worker(self) -> None:
        ready_r, ready_w = os.pipe()
        try:
            self.worker = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dista_runtime.cli",
                    "worker",
                    "--no-supervise",  # its pid is the worker's: its memory is measured
                    "--head",
                    self.address,
                    "--import",
                    "tests.support.tasks",
                    "--ready-fd",
                    str(ready_w),
                ],
                env=self.env,
                pass_fds=(ready_w,),
            )
            os.close(ready_w)
            ready_w = -1
            with os.fdopen(ready_r, "rb") as ready:
                ready_r = -1
                assert ready.read(1), "the worker did not join"
        finally:
            for fd in (ready_r, ready_w):
                if fd >= 0:
                    os.close(fd)

    def rss(self) -> int:
        return int(psutil.Process(self.process.pid).memory_info().rss)

    def connect(self) -> socket.socket:
        return socket.create_connection(self.where, timeout=10)

    def drive(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", DRIVER, self.address],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env=self.env,
            check=False,
        )

    def close(self) -> list[str]:
        """Stop both processes; the head's log lines."""
        for p in (self.worker, self.process):
            if p is not None and p.poll() is None:
                p.terminate()
        for p in (self.worker, self.process):
            if p is None:
                continue
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self._reader.join(10)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return self.log


@contextmanager
def head(**kwargs: object) -> Iterator[Head]:
    h = Head(**kwargs)  # type: ignore[arg-type]
    try:
        yield h
    finally:
        h.close()


def answer(sock: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything the head sends ``sock`` until it closes it."""
    sock.settimeout(timeout)
    chunks = []
    while chunk := sock.recv(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def refusal(data: bytes) -> str:
    event = dp.decode_event(data, from_head=True)
    assert isinstance(event, dp.Error) and event.object_id == 0, event
    return event.message


def closed_with(sock: socket.socket) -> bytes | None:
    """What the head sent ``sock`` before closing it, or None if it is still open."""
    sock.settimeout(0.05)
    data = b""
    try:
        while chunk := sock.recv(1 << 16):
            data += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return data


def lines(log: list[str], pattern: str) -> list[str]:
    """The messages of the log lines matching ``pattern`` (`dista_runtime.logs`)."""
    return [message_of(line) for line in log if re.search(pattern, line)]


# -- caps ------------------------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_per_host_cap_refuses_before_reading_and_logs_once(loop: str) -> None:
    """With 4 connections from one address that said hello, the 5th is refused with an error
    frame saying why, none of its bytes read (a 1 GiB header would be a logged protocol
    error); 30 refusals are two lines: the first at once, then how many followed in that
    second. (Silent connections would be closed for the newcomers instead: the eviction
    tests below.)"""
    socks: list[socket.socket] = []
    h = Head(loop=loop, DISTA_MAX_CONNECTIONS_PER_HOST="4", **NO_HELLO_TIMEOUTS)
    try:
        socks = [h.connect() for _ in range(4)]
        for sock in socks:
            sock.sendall(dp.encode_event(dp.Hello(F.ROLE_OBSERVER, 0)))
        time.sleep(0.2)
        refused = []
        for i in range(30):
            sock = h.connect()
            socks.append(sock)
            if i % 2:  # bytes the head never reads (the close may then reset the answer)
                sock.sendall(struct_header(F.KIND_HELLO, 1 << 30))
                with contextlib.suppress(ConnectionResetError):
                    answer(sock)
            else:
                refused.append(answer(sock))
        for data in refused:
            assert refusal(data) == (
                "the head refused the connection: over the cap of 4 from 127.0.0.1 "
                "(DISTA_MAX_CONNECTIONS_PER_HOST), all of them past their hello"
            )
        assert all(closed_with(s) is None for s in socks[:4])
        time.sleep(1.3)  # the second line comes at the end of the second
    finally:
        for sock in socks:
            sock.close()
        log = h.close()
    assert lines(log, "refused peer") == [], log  # nothing of theirs was read
    why = "over the cap of 4 from 127.0.0.1 (DISTA_MAX_CONNECTIONS_PER_HOST), all of them past their hello"
    assert lines(log, "connections? refused") == [
        f"dista head: 1 connection refused: {why}",
        f"dista head: 29 connections refused in the last second: {why}",
    ], log


def struct_header(kind: int, length: int) -> bytes:
    import struct

    return struct.pack("<IBQQ", length, kind, 1, 0)


@pytest.mark.parametrize("loop", ["asyncio", "gevent"])
def test_eviction_of_the_oldest_silent_connection_lets_a_real_driver_in(loop: str) -> None:
    """At the total cap, each new connection closes the oldest one that has not said hello:
    40 silent connections against a cap of 16 cannot lock a driver out, and the worker
    that said hello before them is never the one closed."""
    socks: list[socket.socket] = []
    h = Head(loop=loop, worker=True, DISTA_MAX_CONNECTIONS="16", **NO_HELLO_TIMEOUTS)
    try:
        socks.extend(h.connect() for _ in range(40))
        time.sleep(0.3)
        driver = h.drive()
        assert driver.returncode == 0 and driver.stdout.strip() == "ok", driver.stderr
        answers = [closed_with(s) for s in socks]
        closed = [a for a in answers if a is not None]
        # The worker and its task session hold 2 places; the driver took one more.
        assert len(closed) >= 40 - 16 + 2 + 1, len(closed)
        assert answers[0] is not None and refusal(answers[0]) == (
            "the head refused the connection: closed for a newer one at the cap of 16 "
            "connections (DISTA_MAX_CONNECTIONS): it had not said hello"
        )
        assert answers[-1] is None  # the newest silent ones stay (until their hello deadline)
        time.sleep(1.2)
    finally:
        for sock in socks:
            sock.close()
        log = h.close()
    evicted = lines(log, "had not said hello closed")
    assert 1 <= len(evicted) <= 3, log


def test_an_object_server_closes_its_oldest_silent_fetcher_for_a_new_one() -> None:
    """A worker's object server keeps the same caps: at its total, the oldest connection
    that has not sent a whole frame is closed for the new one, told why."""
    socks: list[socket.socket] = []
    h = Head(worker=True, DISTA_MAX_CONNECTIONS="4")
    try:
        assert h.worker is not None
        listening = [
            c.laddr
            for c in psutil.Process(h.worker.pid).net_connections("tcp")
            if c.status == psutil.CONN_LISTEN
        ]
        assert len(listening) == 1, listening
        where = (listening[0].ip, listening[0].port)
        for _ in range(6):
            socks.append(socket.create_connection(where, timeout=10))
            time.sleep(0.05)  # in order: the oldest is the first
        time.sleep(0.3)
        answers = [closed_with(s) for s in socks]
    finally:
        for sock in socks:
            sock.close()
        h.close()
    why = (
        "the worker refused the connection: closed for a newer one at the cap of 4 "
        "connections (DISTA_MAX_CONNECTIONS): it had not said hello"
    )
    assert [refusal(a) if a is not None else None for a in answers] == [why, why] + [None] * 4


def test_300_silent_connections_under_ulimit_256_leave_room_for_a_driver() -> None:
    """The probe: a head under ``ulimit -n 256`` (its cap 64: 256 less 64 for files and 128
    for a burst of accepts),
    300 silent connections, then a real driver runs its tasks; the head logs a handful of
    lines, not one per connection or per failed accept."""
    socks: list[socket.socket] = []
    h = Head(nofile=256, worker=True)
    try:
        socks.extend(h.connect() for _ in range(300))
        time.sleep(0.5)
        driver = h.drive()
        assert driver.returncode == 0 and driver.stdout.strip() == "ok", driver.stderr
        time.sleep(1.2)
    finally:
        for sock in socks:
            sock.close()
        log = h.close()
    assert not lines(log, "Too many open files|not accepted"), log
    assert len(log) <= 8, log


@pytest.mark.parametrize("loop", LOOPS)
def test_accept_errors_are_logged_once_a_second(loop: str) -> None:
    """Out of descriptors (a cap set above ``ulimit -n``), the listener rests a second after
    each failed accept and logs at most a line a second with a count, instead of a line
    each (asyncio's own listener wrote 13,735 lines of tracebacks in 5 s)."""
    socks: list[socket.socket] = []
    h = Head(loop=loop, nofile=48, DISTA_MAX_CONNECTIONS="1000")
    try:
        start = time.monotonic()
        socks.extend(h.connect() for _ in range(120))
        time.sleep(max(0.0, 3.5 - (time.monotonic() - start)))
        cpu = psutil.Process(h.process.pid).cpu_times()
    finally:
        for sock in socks:
            sock.close()
        log = h.close()
    failed = lines(log, "not accepted")
    assert 1 <= len(failed) <= 5, log
    assert all("Too many open files" in line for line in failed), failed
    assert "DISTA_MAX_CONNECTIONS" in failed[0]
    assert cpu.user + cpu.system < 3.0, cpu  # resting, not spinning


def test_the_hello_timeouts_reach_the_head() -> None:
    """DISTA_HELLO_IDLE_TIMEOUT closes a silent connection that long after it came (the
    head core keeps the deadline; `start_head` passes the setting on, and the head arms its
    timer for it when the connection comes: with no worker, nothing else woke it)."""
    h = Head(DISTA_HELLO_IDLE_TIMEOUT="1", DISTA_HELLO_TIMEOUT="30")
    try:
        sock = h.connect()
        start = time.monotonic()
        data = answer(sock)
        waited = time.monotonic() - start
        sock.close()
    finally:
        h.close()
    assert 0.8 < waited < 3.0, waited
    assert not data or "hello" in refusal(data), data  # closed, or told why


# -- a peer that never reads ---------------------------------------------------------------------


@pytest.mark.parametrize("loop", LOOPS)
def test_a_flooder_that_never_reads_is_no_longer_read(loop: str) -> None:
    """A driver that sends stats requests as fast as it can and never reads a reply: once
    the replies waiting for it pass the high-water mark the head stops reading it, so the
    head stays within a bound and a good driver gets right results meanwhile."""
    h = Head(loop=loop, worker=True)
    flooder = h.connect()
    stop = threading.Event()
    sent = [0]

    def flood() -> None:
        burst = dp.encode_event(dp.Stats()) * 4096
        flooder.setblocking(False)
        while not stop.is_set():
            try:
                sent[0] += flooder.send(burst)
            except BlockingIOError:
                time.sleep(0.005)
            except OSError:
                return

    try:
        before = h.rss()
        flooder.sendall(dp.encode_event(dp.Hello(F.ROLE_DRIVER, 0)))
        thread = threading.Thread(target=flood, daemon=True)
        thread.start()
        peak = before
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            peak = max(peak, h.rss())
            time.sleep(0.05)
        driver = h.drive()
        assert driver.returncode == 0 and driver.stdout.strip() == "ok", driver.stderr
        peak = max(peak, h.rss())
        stop.set()
        thread.join(5)
    finally:
        stop.set()
        flooder.close()
        h.close()
    assert sent[0] > 4 << 20, sent  # it did flood: more than the mark's worth of requests
    assert peak - before < 48 << 20, f"the head grew by {(peak - before) >> 20} MiB"


# -- settings --------------------------------------------------------------------------------


def test_defaults_follow_the_open_file_limit() -> None:
    assert default_max_connections(1024) == 1024 - 128 - 128
    assert default_max_connections(256) == 256 - 64 - 128
    assert default_max_connections(1 << 20) == MAX_CONNECTIONS_CEILING
    assert default_max_connections(10) == 1
    limits = limits_from_env()
    assert limits.max_per_host == 512 and limits.hello_timeout == 10.0
    assert limits.hello_idle_timeout == 5.0


@pytest.mark.parametrize(
    ("env", "value", "says"),
    [
        ("DISTA_MAX_CONNECTIONS", "lots", "DISTA_MAX_CONNECTIONS must be a whole number"),
        ("DISTA_MAX_CONNECTIONS_PER_HOST", "0", "DISTA_MAX_CONNECTIONS_PER_HOST must be"),
        ("DISTA_HELLO_TIMEOUT", "-1", "DISTA_HELLO_TIMEOUT must be a number of seconds"),
        ("DISTA_HELLO_IDLE_TIMEOUT", "soon", "DISTA_HELLO_IDLE_TIMEOUT must be a number"),
    ],
)
def test_a_bad_variable_is_one_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, says: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ValueError, match=says):
        limits_from_env()


@pytest.mark.parametrize(
    ("env", "value", "address"),
    [
        ("DISTA_MAX_CONNECTIONS_PER_HOST", "-3", None),
        # Driver-side settings, read on the driver's loop: a bad one must raise from init,
        # for a local cluster and for a head elsewhere alike, not hang it.
        ("DISTA_DRIVER_INFLIGHT_BYTES", "lots", None),
        ("DISTA_DRIVER_INFLIGHT_BYTES", "-5MiB", "127.0.0.1:9"),
        ("DISTA_KEEPALIVE_INTERVAL", "often", "127.0.0.1:9"),
    ],
)
def test_init_with_a_bad_variable_raises_before_starting(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, address: str | None
) -> None:
    import dista_runtime as dista

    monkeypatch.setenv(env, value)
    with pytest.raises(ValueError, match=f"{env} must be"):
        dista.init(address, workers=1)


def test_flags_override_the_variables_and_check_their_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DISTA_MAX_CONNECTIONS", "100")
    monkeypatch.setenv("DISTA_MAX_CONNECTIONS_PER_HOST", "7")
    monkeypatch.setenv("DISTA_HELLO_TIMEOUT", "10")  # the flags set their variables: restored
    p = argparse.ArgumentParser(prog="dista head")
    add_limit_options(p)
    limits = limits_from_args(p.parse_args(["--max-connections", "50", "--hello-timeout", "0"]))
    assert limits == Limits(50, 7, 0.0, 5.0)
    with pytest.raises(SystemExit) as exit:
        p.parse_args(["--max-connections-per-host", "none"])
    assert exit.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        "dista head: error: argument --max-connections-per-host: must be a whole number at "
        "least 1, not 'none'"
    )
