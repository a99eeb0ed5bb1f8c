"""What `dista status` and `dista.stats()` say about a real local cluster: drivers and the
workers' client sessions counted apart, stored bytes counted in `held_bytes`."""

from __future__ import annotations

import subprocess
import sys
import time

import dista_runtime as dista
from tests.support import fault_tasks as ft
from tests.support.cluster import assert_gone, wait_for_workers


def test_status_counts_drivers_and_clients_apart_and_held_bytes_count_stored_values() -> None:
    with dista.init(workers=2) as c:
        wait_for_workers(2)
        ref = ft.blob.remote(40)  # 40 MiB: stays on its worker
        dista.wait([ref], timeout=60)
        assert dista.stats().held_bytes >= 40 << 20
        status = subprocess.run(
            [sys.executable, "-m", "dista_runtime.cli", "status", "--head", c.address],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert "drivers: 1  clients (tasks' sessions): 2  workers: 2" in status, status
        assert "held bytes: 4" in status, status  # 41,943,040 and more
        del ref
        deadline = time.monotonic() + 10
        while dista.stats().held_bytes:
            assert time.monotonic() < deadline, dista.stats()
            time.sleep(0.05)
    assert_gone(c.pids())
