"""What a process says when it cannot join a TLS head, with real processes: a head's
certificate from another `dista certs` directory (the driver, `dista status` and a worker
say so), a worker the head will not take (it says it could not join, never that it lost
the head, and gives up cleanly), and where the head says its certificates come from.
"""

from __future__ import annotations

import re
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cryptography", reason="dista certs needs the tls extra")

from dista_runtime._tls import certs
from dista_runtime._tls.config import dial_failure
from dista_runtime.logs import message_of
from tests.processes.test_tls import CLI, ROOT, env, start_head
from tests.support.processes import Procs

#: The hint for a head whose certificate another CA signed (`_tls.dial_failure`).
_OTHER_CA = "the head's certificate is not signed by this process's CA"


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two clusters' certificates, as two runs of `dista certs` write them."""
    ours, theirs = tmp_path_factory.mktemp("ours"), tmp_path_factory.mktemp("theirs")
    certs.write_quickstart(ours)
    certs.write_quickstart(theirs)
    return ours, theirs


def run(argv: list[str], timeout: float = 60, **environ: str) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` to its end (killed after ``timeout`` s), its output as text."""
    return subprocess.run(
        check=False,
        args=argv,
        capture_output=True,
        text=True,
        env=env(**environ),
        cwd=ROOT,
        timeout=timeout,
    )


def test_the_hint_names_another_ca_only_for_a_failed_verification() -> None:
    said = "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate"
    assert dial_failure(said, None).startswith(said)  # the original reason stays
    assert _OTHER_CA in dial_failure(said, None)
    assert "same `dista certs` directory" in dial_failure(said, None)
    error = ssl.SSLCertVerificationError(1, "certificate verify failed")
    assert _OTHER_CA in dial_failure(error, None)
    # Other failures, and an expired certificate (which says so itself), are left as they are.
    assert dial_failure("[Errno 111] Connection refused", None) == "[Errno 111] Connection refused"
    expired = "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired"
    assert dial_failure(expired, None) == expired


def test_a_head_of_another_cluster_is_named_as_such(
    clusters: tuple[Path, Path], procs: Procs
) -> None:
    ours, theirs = clusters
    host, port = start_head(procs, ours)
    address = f"{host}:{port}"
    # The head says where its certificates come from, not a variable nobody set.
    procs.wait_for("head", re.compile("mutual TLS"))
    assert f"dista head: mutual TLS (certificates from {ours})" in procs.log("head")
    assert "DISTA_TLS_DIR=" not in procs.log("head")
    # A driver, `dista status` and a worker with the other cluster's CA: the reason, and why.
    code = f"import dista_runtime as d; d.init(address={address!r})"
    driver = run([sys.executable, "-c", code], DISTA_TLS_DIR=str(theirs))
    status = run([*CLI, "status", "--head", address, "--tls-dir", str(theirs)])
    worker = run([*CLI, "worker", "--head", address, "--tls-dir", str(theirs)])
    assert driver.returncode != 0 and status.returncode != 0 and worker.returncode == 69
    for said in (driver.stderr, status.stderr, worker.stderr):
        assert "CERTIFICATE_VERIFY_FAILED" in said, said
        assert f"{_OTHER_CA} ({theirs / 'ca.pem'})" in said, said
        assert "same `dista certs` directory (or the same --tls-ca)" in said, said
    assert procs.procs["head"].poll() is None


@pytest.mark.parametrize("how", ["wrong role", "no TLS"])
def test_a_worker_the_head_will_not_take_could_not_join(
    clusters: tuple[Path, Path], procs: Procs, how: str
) -> None:
    ours, _ = clusters
    host, port = start_head(procs, ours)
    argv = [*CLI, "worker", "--head", f"{host}:{port}"]
    if how == "wrong role":  # the cluster's own CA, but a driver's certificate
        argv += ["--tls-ca", str(ours / "ca.pem")]
        argv += ["--tls-cert", str(ours / "driver.pem"), "--tls-key", str(ours / "driver.key")]
    done = run(argv, DISTA_RECONNECT_TIMEOUT="2")
    said = done.stdout + done.stderr
    assert done.returncode == 69, said
    lines = [message_of(line) for line in done.stderr.splitlines()]
    assert lines[0].startswith(f"dista worker: could not join the head at {host}:{port} ("), said
    assert "trying again for up to 2 s (DISTA_RECONNECT_TIMEOUT)" in lines[0], said
    hint = "may not take this process's certificate" if how == "wrong role" else "--tls-dir"
    assert hint in lines[0], said
    assert "lost the head" not in said and "was lost" not in said, said
    # Given up: its hint last, and nothing of the loop it ran on.
    assert lines[-1].startswith(f"dista worker: could not join the head at {host}:{port} in 2 s")
    assert "Traceback" not in said and "Task was destroyed" not in said, said
    assert "Event loop is closed" not in said, said
