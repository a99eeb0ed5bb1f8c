"""Session takeover and fetches across drivers, with real processes (issue 24, attacks 1
and 2; docs/security.md, "What a hostile peer gets").

A victim driver holds a 1 MiB object on its worker and an actor. An attacker reads the
victim's number and the head's epoch from `dista status`, resumes as it (with another
team's driver certificate, or the victim's own certificate from another process), and
fetches the victim's object straight from the worker's object server. Each is refused; the
victim's object and actor are untouched and its next reads work.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import socket
import ssl
import sys
import time
from pathlib import Path

import pytest

import dista_proto as dp

pytest.importorskip("cryptography", reason="dista certs needs the tls extra")

from dista_runtime._tls import certs
from tests.processes.support import session_attacks as A
from tests.processes.test_tls import CLI, client_context, env, status
from tests.support.processes import Procs

_LISTENING = re.compile(r"listening on (\S+):(\d+)")
_WORKER = re.compile(r"^worker (\d+\.\d+\.\d+\.\d+):(\d+):", re.MULTILINE)
_TASKS = "tests.processes.support.session_attacks"
#: The wait of a fetch the head never granted, short for the test (5 s by default).
_WAIT = "0.3"


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tls")
    certs.write_quickstart(folder)
    cert, key = certs.issue(certs.load_ca(folder), "team-b", ["driver"])
    (folder / "teamb.pem").write_bytes(cert)
    (folder / "teamb.key").write_bytes(key)
    (folder / "teamb.key").chmod(0o600)
    return folder


def _tls(tls_dir: Path | None) -> list[str]:
    return ["--tls-dir", str(tls_dir)] if tls_dir is not None else []


def start_cluster(procs: Procs, tls_dir: Path | None, port: int = 0) -> tuple[str, int]:
    argv = [*CLI, "head", "--port", str(port), *_tls(tls_dir)]
    procs.spawn("head", argv, env())
    found = procs.wait_for("head", _LISTENING)
    head = found.group(1), int(found.group(2))
    argv = [*CLI, "worker", "--head", f"{head[0]}:{head[1]}", "--import", _TASKS, *_tls(tls_dir)]
    procs.spawn("worker", argv, env(DISTA_FETCH_GRANT_WAIT=_WAIT))
    return head


def start_victim(procs: Procs, head: tuple[str, int], tls_dir: Path | None, go: Path) -> None:
    extra = {"DISTA_TLS_DIR": str(tls_dir)} if tls_dir is not None else {}
    argv = [sys.executable, "-m", _TASKS, "victim", f"{head[0]}:{head[1]}", str(go)]
    procs.spawn("victim", argv, env(**extra))
    procs.wait_for("victim", re.compile("victim ready"), timeout=60)


def plain_status(head: tuple[str, int]) -> str:
    import subprocess

    argv = [*CLI, "status", "--head", f"{head[0]}:{head[1]}"]
    done = subprocess.run(argv, check=False, capture_output=True, text=True, env=env(), timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def worker_address(text: str) -> tuple[str, int]:
    found = _WORKER.search(text)
    assert found, text
    return found.group(1), int(found.group(2))


def finish_victim(procs: Procs, go: Path) -> None:
    go.touch()
    procs.wait_for("victim", re.compile("victim: all right"), timeout=60)
    assert procs.procs["victim"].wait(30) == 0, procs.log("victim")


def refused_resume(loot: A.Loot, number: int) -> None:
    assert not loot.welcomed and loot.bytes_read == 0 and not loot.located, loot
    assert any(f"cannot resume driver {number}" in e for e in loot.errors), loot


def test_a_resume_or_fetch_as_another_driver_is_refused_under_tls(
    tls_dir: Path, procs: Procs, tmp_path: Path
) -> None:
    head = start_cluster(procs, tls_dir)
    go = tmp_path / "go"
    start_victim(procs, head, tls_dir, go)
    text = status(head, tls_dir)  # what any driver certificate may read
    target = A.read_status(text)
    assert target.actors, text
    server = worker_address(text)
    team_b, own = client_context(tls_dir, "teamb"), client_context(tls_dir, "driver")
    # Attack 1: resume as the victim, with another team's certificate or its own (another
    # process on its machine), without a secret or with a guessed one.
    for context in (team_b, own):
        for secret in (b"", secrets.token_bytes(dp.SECRET_SIZE)):
            loot = A.resume_as(head, context, target, secret=secret, server_context=context)
            refused_resume(loot, target.number)
    procs.wait_for("head", re.compile(rf"refused resume of driver {target.number} by .*team-b"))
    # Attack 2: fetch the victim's object (its first IDs) from the worker's object server.
    for context in (team_b, own):
        for n in (1,):
            oid = target.number << dp.ID_BITS | n
            for token in (b"", secrets.token_bytes(dp.TOKEN_SIZE)):
                served, why = A.fetch(server, context, oid, token)
                assert served == 0 and f"{oid:#x} was not offered" in why, why
    finish_victim(procs, go)  # its object and actor untouched, its next reads work


def test_a_resume_or_fetch_as_another_driver_is_refused_on_plain_tcp(
    procs: Procs, tmp_path: Path
) -> None:
    head = start_cluster(procs, None)
    go = tmp_path / "go"
    start_victim(procs, head, None, go)
    text = plain_status(head)
    target = A.read_status(text)
    for secret in (b"", secrets.token_bytes(dp.SECRET_SIZE)):
        refused_resume(A.resume_as(head, None, target, secret=secret), target.number)
    server = worker_address(text)
    for n in (1,):
        oid = target.number << dp.ID_BITS | n
        for token in (b"", secrets.token_bytes(dp.TOKEN_SIZE)):
            served, why = A.fetch(server, None, oid, token)
            assert served == 0 and f"{oid:#x} was not offered" in why, why
    finish_victim(procs, go)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_head_restarted_with_its_key_resumes_its_drivers_and_refuses_others(
    tls_dir: Path, procs: Procs, tmp_path: Path
) -> None:
    port = _free_port()
    head = start_cluster(procs, tls_dir, port)
    go = tmp_path / "go"
    start_victim(procs, head, tls_dir, go)
    target = A.read_status(status(head, tls_dir))
    procs.procs["head"].send_signal(signal.SIGKILL)
    procs.procs["head"].wait(10)
    os.rename(procs.logs / "head.log", procs.logs / "head-1.log")
    procs.spawn("head", [*CLI, "head", "--port", str(port), *_tls(tls_dir)], env())
    procs.wait_for("head", _LISTENING)
    # Whoever comes first on the new head (this attacker, or the victim reconnecting), the
    # attacker cannot show the secret the head computes again from its key.
    context = client_context(tls_dir, "teamb")
    deadline = time.monotonic() + 10
    while True:
        try:
            loot = A.resume_as(head, context, target, secret=secrets.token_bytes(16))
            break
        except (ConnectionError, ssl.SSLError):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    refused_resume(loot, target.number)
    finish_victim(procs, go)  # resumed on the new head: its object and actor are back
