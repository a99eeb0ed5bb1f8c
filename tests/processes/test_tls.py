"""Mutual TLS with real processes: a cluster on each binding, and every kind of peer the
head and an object server must refuse before reading a frame from it.

Certificates come from `dista_runtime._tls.certs` (what ``dista certs DIR`` writes), plus an
expired one, one from another CA and a read-only observer made with the same API. The
attackers are raw sockets wrapped with the standard ``ssl`` module.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dista_proto import frame as F

pytest.importorskip("cryptography", reason="dista certs needs the tls extra")

from dista_runtime._tls import certs
from tests.support.processes import Procs

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "dista_runtime.cli"]
_LISTENING = re.compile(r"listening on (\S+):(\d+)")
_WORKER = re.compile(r"^worker (\d+\.\d+\.\d+\.\d+):(\d+):", re.MULTILINE)


def env(**extra: str) -> dict[str, str]:
    out = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "bindings")]))
    for name in ("DISTA_ADDRESS", "DISTA_TLS_DIR", "DISTA_TLS_CA", "DISTA_TLS_CERT"):
        out.pop(name, None)
    out.pop("DISTA_TLS_KEY", None)
    out.pop("DISTA_INSECURE", None)
    out.update(extra)
    return out


def cli(argv: list[str], **environ: str) -> tuple[int, list[str]]:
    """``dista ARGV`` run to its end: its exit status and the lines it wrote (both
    streams), for the commands that must fail in one line."""
    done = subprocess.run(
        [*CLI, *argv], capture_output=True, text=True, env=env(**environ), timeout=30, check=False
    )
    return done.returncode, (done.stdout + done.stderr).strip().splitlines()


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tls")
    certs.write_quickstart(folder)
    ca = certs.load_ca(folder)
    now = datetime.now(UTC)
    # A driver's certificate that expired yesterday, one from another cluster's CA, a
    # certificate granting only "head" (nothing a peer of a head may be), a read-only
    # observer.
    pairs = {
        "expired": certs.issue(
            ca, "expired", ["driver"], days=1, not_before=now - timedelta(days=3)
        ),
        "stranger": certs.issue(certs.make_ca("another cluster"), "stranger", ["driver"]),
        "headonly": certs.issue(ca, "headonly", ["head"]),
        "reader": certs.issue(ca, "reader", ["observer"]),
    }
    for name, (cert, key) in pairs.items():
        (folder / f"{name}.pem").write_bytes(cert)
        (folder / f"{name}.key").write_bytes(key)
        (folder / f"{name}.key").chmod(0o600)
    return folder


def start_head(procs: Procs, tls_dir: Path, loop: str = "asyncio") -> tuple[str, int]:
    argv = [*CLI, "head", "--port", "0", "--loop", loop, "--tls-dir", str(tls_dir)]
    procs.spawn("head", argv, env(DISTA_LIVENESS_TIMEOUT="30"))
    found = procs.wait_for("head", _LISTENING)
    return found.group(1), int(found.group(2))


def start_worker(
    procs: Procs, tls_dir: Path, head: tuple[str, int], loop: str, *more: str
) -> None:
    argv = [*CLI, "worker", "--head", f"{head[0]}:{head[1]}", "--loop", loop]
    argv += ["--import", "tests.processes.support.tls_tasks", "--tls-dir", str(tls_dir), *more]
    procs.spawn("worker", argv, env())


def status(head: tuple[str, int], tls_dir: Path) -> str:
    argv = [*CLI, "status", "--head", f"{head[0]}:{head[1]}", "--tls-dir", str(tls_dir)]
    done = subprocess.run(
        check=False, args=argv, capture_output=True, text=True, env=env(), timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def wait_worker(head: tuple[str, int], tls_dir: Path) -> tuple[str, int]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = _WORKER.search(status(head, tls_dir))
        if found:
            return found.group(1), int(found.group(2))
        time.sleep(0.1)
    raise AssertionError("no worker joined the head within 20 s")


@pytest.mark.parametrize("loop", ["asyncio", "anyio", "gevent"])
def test_a_cluster_runs_in_tls_on_each_binding(tls_dir: Path, procs: Procs, loop: str) -> None:
    head = start_head(procs, tls_dir, loop)
    start_worker(procs, tls_dir, head, loop)
    wait_worker(head, tls_dir)
    argv = [sys.executable, "-m", "tests.processes.support.tls_tasks", f"{head[0]}:{head[1]}"]
    done = subprocess.run(check=False, args=
        argv, capture_output=True, text=True, timeout=60, cwd=ROOT,
        env=env(DISTA_TLS_DIR=str(tls_dir), DISTA_LOOP=loop),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all right" in done.stdout


# -- refused before any frame is read ---------------------------------------------------------


def client_context(tls_dir: Path, name: str | None, ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.load_verify_locations(cafile=str(ca or tls_dir / "ca.pem"))
    if name is not None:
        context.load_cert_chain(str(tls_dir / f"{name}.pem"), str(tls_dir / f"{name}.key"))
    return context


def _hello(role: int) -> bytes:
    body = bytes([F.KIND_HELLO]) + bytes(16) + bytes([role]) + bytes(8)
    return len(body).to_bytes(4, "little") + body


def talk(address: tuple[str, int], context: ssl.SSLContext, data: bytes) -> bytes:
    """Connect in TLS, send ``data``, and return all the peer sends until it closes
    (an ``ssl.SSLError`` or ``ConnectionError`` from a refused handshake propagates)."""
    with (
        socket.create_connection(address, timeout=10) as raw,
        context.wrap_socket(raw) as sock,
    ):
        sock.sendall(data)
        got = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, ssl.SSLZeroReturnError):
                break
            if not chunk:
                break
            got += chunk
        return got


def refused_in_handshake(address: tuple[str, int], context: ssl.SSLContext) -> None:
    """The peer's certificate is refused in the handshake: it never gets a byte of a
    frame, and never has one read (TLS 1.3 tells a client so on its first read)."""
    with pytest.raises((ssl.SSLError, ConnectionError)):
        got = talk(address, context, _hello(F.ROLE_DRIVER))
        assert got == b"", got  # no welcome: closed at once
        raise ConnectionError("closed without a byte")


def errors_in(data: bytes) -> list[str]:
    """The texts of the error frames in ``data``."""
    out = []
    while len(data) >= 4:
        n = int.from_bytes(data[:4], "little")
        body, data = data[4 : 4 + n], data[4 + n :]
        if body and body[0] == F.KIND_ERROR:
            out.append(bytes(body[17:]).decode(errors="replace"))
    return out


@pytest.mark.parametrize("loop", ["asyncio", "gevent"])
def test_the_head_refuses_peers_without_a_good_certificate(
    tls_dir: Path, procs: Procs, loop: str
) -> None:
    head = start_head(procs, tls_dir, loop)
    # No certificate, one from another CA, an expired one: refused in the handshake.
    refused_in_handshake(head, client_context(tls_dir, None))
    refused_in_handshake(head, client_context(tls_dir, "stranger"))
    refused_in_handshake(head, client_context(tls_dir, "expired"))
    # Plain TCP at a TLS head: its hello is not TLS, closed without an answer.
    with socket.create_connection(head, timeout=10) as sock:
        sock.sendall(_hello(F.ROLE_DRIVER))
        assert b"welcome" not in sock.recv(65536)
    # A certificate whose role may not be a head's peer: closed before any frame is read
    # (a hello and a stop ride along: neither is answered nor acted on).
    stop = bytes([F.KIND_STOP]) + bytes(16)
    got = talk(
        head,
        client_context(tls_dir, "headonly"),
        _hello(F.ROLE_OBSERVER) + len(stop).to_bytes(4, "little") + stop,
    )
    assert got == b""
    # The head is still up, and says why it refused each.
    assert "drivers: 0" in status(head, tls_dir)
    log = procs.log("head")
    assert "TLS handshake with" in log
    assert "grants head" in log


def test_a_certificate_bounds_the_role_a_peer_says_hello_as(tls_dir: Path, procs: Procs) -> None:
    head = start_head(procs, tls_dir)
    # A driver's certificate saying hello as a worker: an error frame saying why, closed.
    worker_hello = (
        bytes([F.KIND_HELLO]) + bytes(16) + bytes([F.ROLE_WORKER]) + bytes(8) + bytes(12)
    )
    got = talk(
        head,
        client_context(tls_dir, "driver"),
        len(worker_hello).to_bytes(4, "little") + worker_hello,
    )
    assert any("grants driver" in e and "worker" in e for e in errors_in(got)), got
    # A driver's certificate, and a read-only observer's, may not stop the cluster.
    stop = bytes([F.KIND_STOP]) + bytes(16)
    for name in ("driver", "reader"):
        got = talk(
            head,
            client_context(tls_dir, name),
            _hello(F.ROLE_OBSERVER) + len(stop).to_bytes(4, "little") + stop,
        )
        assert any("stop" in e for e in errors_in(got)), (name, got)
    # `dista stop` with the read-only certificate says it was refused, and the head runs.
    argv = [*CLI, "stop", "--head", f"{head[0]}:{head[1]}", "--tls-dir", str(tls_dir)]
    argv += ["--tls-cert", str(tls_dir / "reader.pem"), "--tls-key", str(tls_dir / "reader.key")]
    done = subprocess.run(
        check=False, args=argv, capture_output=True, text=True, env=env(), timeout=30
    )
    assert done.returncode == 1 and "refused" in done.stderr, done.stderr
    assert procs.procs["head"].poll() is None
    # The quick-start observer may stop it.
    argv = [*CLI, "stop", "--head", f"{head[0]}:{head[1]}", "--tls-dir", str(tls_dir)]
    done = subprocess.run(
        check=False, args=argv, capture_output=True, text=True, env=env(), timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert procs.procs["head"].wait(10) == 0


def test_an_object_server_refuses_peers_without_a_members_certificate(
    tls_dir: Path, procs: Procs
) -> None:
    head = start_head(procs, tls_dir)
    start_worker(procs, tls_dir, head, "asyncio")
    server = wait_worker(head, tls_dir)
    refused_in_handshake(server, client_context(tls_dir, None))
    refused_in_handshake(server, client_context(tls_dir, "stranger"))
    refused_in_handshake(server, client_context(tls_dir, "expired"))
    fetch = bytes([F.KIND_FETCH]) + (1 << 40 | 1).to_bytes(8, "little") + bytes(8)
    for name in ("observer", "headonly"):  # roles that never fetch: closed unread
        assert (
            talk(server, client_context(tls_dir, name), len(fetch).to_bytes(4, "little") + fetch)
            == b""
        )


def test_a_plain_driver_is_told_the_head_wants_tls(tls_dir: Path, procs: Procs) -> None:
    head = start_head(procs, tls_dir)
    code = f"import dista_runtime as d; d.init(address={f'{head[0]}:{head[1]}'!r})"
    done = subprocess.run(
        check=False,
        args=[sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert done.returncode != 0
    assert "DISTA_TLS_DIR" in done.stderr, done.stderr


def test_listening_beyond_loopback_needs_tls_or_insecure(tls_dir: Path, procs: Procs) -> None:
    done = subprocess.run(
        check=False,
        args=[*CLI, "head", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=30,
    )
    assert done.returncode == 2
    assert "TLS" in done.stderr and "--tls-dir" in done.stderr and "--insecure" in done.stderr
    # --insecure runs, warning as it starts.
    procs.spawn("head", [*CLI, "head", "--host", "0.0.0.0", "--port", "0", "--insecure"], env())
    procs.wait_for("head", _LISTENING)
    assert "WITHOUT TLS" in procs.log("head")
    # A worker asked to listen everywhere without TLS is refused the same way.
    done = subprocess.run(
        check=False,
        args=[*CLI, "worker", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=30,
    )
    assert done.returncode == 2 and "TLS" in done.stderr


def test_a_worker_listening_everywhere_advertises_a_real_address(
    tls_dir: Path, procs: Procs
) -> None:
    head = start_head(procs, tls_dir)
    start_worker(procs, tls_dir, head, "asyncio", "--host", "0.0.0.0")
    host, _ = wait_worker(head, tls_dir)
    assert host == "127.0.0.1"


def _machine_address() -> str | None:
    """This machine's address on its default route (no packet is sent), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))
        except OSError:
            return None
        host: str = probe.getsockname()[0]
    return None if host.startswith("127.") else host


def test_a_driver_dialing_the_machines_address_fetches_from_a_loopback_worker(
    tls_dir: Path, procs: Procs
) -> None:
    """The worker joins by 127.0.0.1, the driver by the machine's own address: the head
    sees the driver come from that address, the driver fetches from the worker's 127.0.0.1,
    and the grant still lets it (it was refused after 5 s)."""
    address = _machine_address()
    if address is None:
        pytest.skip("no address beyond loopback here")
    argv = [*CLI, "head", "--host", "0.0.0.0", "--port", "0", "--tls-dir", str(tls_dir)]
    procs.spawn("head", argv, env())
    port = int(procs.wait_for("head", _LISTENING).group(2))
    start_worker(procs, tls_dir, ("127.0.0.1", port), "asyncio")
    wait_worker(("127.0.0.1", port), tls_dir)
    done = subprocess.run(check=False, args=
        [sys.executable, "-m", "tests.processes.support.tls_tasks", f"{address}:{port}"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
        env=env(DISTA_TLS_DIR=str(tls_dir)),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all right" in done.stdout


@pytest.mark.parametrize("loop", ["asyncio", "gevent", "anyio"])
def test_a_bare_tcp_probe_is_no_warning_and_a_stranger_still_is(
    tls_dir: Path, procs: Procs, loop: str
) -> None:
    """An orchestrator's TCP probe connects and closes without a TLS hello every few
    seconds: the head says nothing about it at WARNING. A peer that speaks something else
    (an HTTP request) is still a failed handshake it warns about."""
    head = start_head(procs, tls_dir, loop)
    for _ in range(5):
        socket.create_connection(head, timeout=10).close()
    with socket.create_connection(head, timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert sock.recv(100) == b""  # closed on it
    assert "drivers: 0" in status(head, tls_dir)  # the head is up and answers
    log = procs.log("head")
    assert log.count("TLS handshake with") == 1, log
    assert "HTTP_REQUEST" in log


def test_a_worker_without_the_driver_pair_is_one_line(tls_dir: Path, tmp_path: Path) -> None:
    """A worker's tasks open sessions to the head as drivers do: without the driver pair,
    it says so at start (exit 2), not in a traceback when the first task needs it."""
    for name in ("ca.pem", "worker.pem", "worker.key"):
        (tmp_path / name).write_bytes((tls_dir / name).read_bytes())
    code, lines = cli(
        ["worker", "--no-supervise", "--head", "127.0.0.1:9", "--tls-dir", str(tmp_path)]
    )
    assert code == 2
    assert len(lines) == 1 and "driver.pem does not exist" in lines[0], lines
    assert "needs the driver pair" in lines[0]
