"""Backpressure on ``.remote()`` with real processes (issue 24, attack 6): a driver that
submits large arguments in a loop holds at most its in-flight budget
(``DISTA_DRIVER_INFLIGHT_BYTES``) plus one argument, its submits wait once over it, and every
result is right; over TLS and plain TCP. Before, a driver kept every unfinished task's
argument: 2,000 arguments of 10 MiB took it past 10 GiB."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dista_runtime._tls import certs
from tests.processes.test_tls import _LISTENING, CLI, ROOT, env, wait_worker
from tests.support.processes import Procs

MIB = 1 << 20
BUDGET = 8 * MIB
TASKS = 40

DRIVER = """
import json, sys
import dista_runtime as dista
from dista_runtime._session import context
from tests.processes.support.tls_tasks import total

tasks, mib = int(sys.argv[2]), 1 << 20
with dista.init(sys.argv[1]):
    session = context.session().session
    most, refs = 0, []
    for i in range(tasks):
        refs.append(total.remote(bytes([i % 251]) * mib))
        most = max(most, session.core.inflight_bytes)
    values = dista.get(refs, timeout=60)
    print(json.dumps({
        "right": values == [(i % 251) * mib for i in range(tasks)],
        "most": most,
        "waits": session.budget.waits,
        "left": session.core.inflight_bytes,
    }))
"""


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cluster's certificates, as ``dista certs`` writes them."""
    folder = tmp_path_factory.mktemp("tls")
    certs.write_quickstart(folder)
    return folder


@pytest.mark.parametrize("secure", [True, False], ids=["tls", "tcp"])
def test_a_driver_submitting_large_arguments_stays_within_its_budget(
    procs: Procs, tls_dir: Path, secure: bool
) -> None:
    tls = ["--tls-dir", str(tls_dir)] if secure else []
    procs.spawn("head", [*CLI, "head", "--port", "0", *tls], env())
    found = procs.wait_for("head", _LISTENING)
    head = f"{found.group(1)}:{found.group(2)}"
    worker = [*CLI, "worker", "--head", head, "--import", "tests.processes.support.tls_tasks"]
    procs.spawn("worker", [*worker, *tls], env())
    if secure:
        wait_worker((found.group(1), int(found.group(2))), tls_dir)
    extra = {"DISTA_DRIVER_INFLIGHT_BYTES": "8MiB"}
    if secure:
        extra["DISTA_TLS_DIR"] = str(tls_dir)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, head, str(TASKS)],
        check=False,
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        env=env(**extra),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["right"], out
    one = MIB + 64  # an argument: 1 MiB and its pickle's few bytes
    assert 0 < out["most"] <= BUDGET + one, out  # under the budget, plus one argument
    assert out["waits"] > 0, out  # submits did wait: 40 MiB was asked for at once
    assert out["left"] == 0, out
