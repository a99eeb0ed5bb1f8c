"""examples/asyncio_web.py, run as a user runs it: real HTTP requests to a real service."""

from __future__ import annotations

import concurrent.futures
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.support.cluster import head_process, stop_process

pytest.importorskip("aiohttp")
pytestmark = pytest.mark.timeout(120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _get(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=30) as response:
        answer: dict[str, object] = json.loads(response.read())
        return answer


def test_handlers_await_tasks_without_blocking_the_loop() -> None:
    with head_process() as address:
        worker = subprocess.Popen(
            [sys.executable, "-m", "dista_runtime.cli", "worker", "--head", address]
        )
        port = _free_port()
        app = subprocess.Popen(
            [sys.executable, "examples/asyncio_web.py", "--head", address, "--port", str(port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert app.stdout is not None
            assert "serving on" in app.stdout.readline()
            base = f"http://127.0.0.1:{port}"
            assert _get(f"{base}/square?n=7") == {"n": 7, "square": 49}
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                slow = [pool.submit(_get, f"{base}/square?n={n}&sleep=1.5") for n in range(3)]
                time.sleep(0.3)  # the slow tasks are running on the worker now
                started = time.monotonic()
                assert _get(f"{base}/ping") == {"ok": True}
                assert time.monotonic() - started < 0.5  # the loop was free
                assert [f.result()["square"] for f in slow] == [0, 1, 4]
                late = pool.submit(_get, f"{base}/square?n=5&sleep=1.5")
                time.sleep(0.5)
                app.send_signal(signal.SIGTERM)  # while a request is in flight
                assert late.result() == {"n": 5, "square": 25}  # it was answered first
            assert app.wait(20) == 0
        finally:
            stop_process(app)
            stop_process(worker)
