"""`dista dashboard` with real processes: plain HTTP only on loopback, HTTPS to the
cluster's certificate holders under TLS, a head killed by SIGKILL shown down (metrics and
page) and watched again once a new head listens, and `dista.init(dashboard=True)`'s process
started and stopped with the cluster. (The page itself: test_dashboard_browser.py.)"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.processes.support.restartable_cluster import processes
from tests.support.processes import ROOT, Procs

CLI = [sys.executable, "-m", "dista_runtime.cli"]
_URL = re.compile(r"(https?://\S+/)")
_LISTENING = re.compile(r"listening on (\S+):(\d+)")


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    for name in ("DISTA_ADDRESS", "DISTA_TLS_DIR", "http_proxy", "HTTP_PROXY"):
        env.pop(name, None)
    env.update(extra)
    return env


def _get(url: str, context: ssl.SSLContext | None = None) -> str:
    with urllib.request.urlopen(url, timeout=10, context=context) as answer:
        text: str = answer.read().decode()
        return text


def _state(url: str, context: ssl.SSLContext | None = None) -> dict[str, Any]:
    state: dict[str, Any] = json.loads(_get(url + "api/state", context))
    return state


def _until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s")


def _metric(text: str, name: str) -> float | None:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def test_plain_http_only_on_loopback_and_a_bad_port_is_one_line() -> None:
    done = subprocess.run(
        [*CLI, "dashboard", "--head", "127.0.0.1:1", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "refusing to serve plain HTTP on 0.0.0.0" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    bad = subprocess.run(
        [*CLI, "dashboard", "--head", "127.0.0.1:1", "--port", "99999"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )
    # Checked with every command's --port, before anything starts (a usage error: exit 2).
    assert bad.returncode == 2 and "--port must be from 0 to 65535" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_head_killed_shows_down_then_a_new_one_is_watched(tmp_path: Path) -> None:
    with processes(tmp_path) as cluster:
        cluster.start_head()
        cluster.start_worker()
        with open(tmp_path / "dashboard.log", "wb") as out:
            dashboard = subprocess.Popen(
                [*CLI, "dashboard", "--head", cluster.address, "--port", "0"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=cluster.env,
            )
        try:
            _until(lambda: _URL.search((tmp_path / "dashboard.log").read_text()), 30, "a URL")
            url = _URL.search((tmp_path / "dashboard.log").read_text()).group(1)  # type: ignore[union-attr]
            _until(lambda: _metric(_get(url + "metrics"), "dista_head_up") == 1, 20, "head up")
            _until(
                lambda: _metric(_get(url + "metrics"), 'dista_workers{state="ready"}') == 1,
                20,
                "the worker ready",
            )
            before = _state(url)["epoch"]
            cluster.kill_head()  # SIGKILL
            _until(lambda: _metric(_get(url + "metrics"), "dista_head_up") == 0, 20, "down")
            state = _state(url)
            assert state["up"] is False and state["why"], state
            cluster.start_head()  # a new head on the same address: its worker rejoins
            _until(lambda: _metric(_get(url + "metrics"), "dista_head_up") == 1, 30, "up again")
            _until(lambda: _state(url)["epoch"] != before, 10, "the new head's epoch")
            _until(
                lambda: _metric(_get(url + "metrics"), 'dista_workers{state="ready"}') == 1,
                30,
                "the worker back",
            )
        finally:
            dashboard.terminate()
            dashboard.wait(10)
        assert dashboard.returncode in (0, -15), dashboard.returncode
        assert "Traceback" not in (tmp_path / "dashboard.log").read_text()


def test_a_tls_cluster_serves_https_to_its_certificate_holders(
    procs: Procs, tmp_path: Path
) -> None:
    pytest.importorskip("cryptography", reason="dista certs needs the tls extra")
    from dista_runtime._tls import certs

    folder = tmp_path / "tls"
    certs.write_quickstart(folder)
    env = _env()
    procs.spawn("head", [*CLI, "head", "--port", "0", "--tls-dir", str(folder)], env)
    host, port = procs.wait_for("head", _LISTENING).groups()
    argv = [*CLI, "dashboard", "--head", f"{host}:{port}", "--tls-dir", str(folder)]
    procs.spawn("dashboard", [*argv, "--host", "0.0.0.0", "--port", "0"], env)
    served = int(re.search(r":(\d+)/", procs.wait_for("dashboard", _URL).group(1)).group(1))  # type: ignore[union-attr]
    url = f"https://127.0.0.1:{served}/"
    holder = ssl.create_default_context(cafile=str(folder / "ca.pem"))
    holder.check_hostname = False  # (the cluster's certificates name roles, not hosts)
    holder.load_cert_chain(folder / "driver.pem", folder / "driver.key")
    _until(lambda: _state(url, holder)["up"], 20, "the TLS head watched")
    assert "Dista" in _get(url, holder)
    stranger = ssl.create_default_context(cafile=str(folder / "ca.pem"))
    stranger.check_hostname = False
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        _get(url + "api/state", stranger)  # no certificate of the cluster's: refused


INIT_SCRIPT = """
import json, sys, urllib.request
import dista_runtime as dista

@dista.task
def square(x: int) -> int:
    return x * x

with dista.init(workers=1, dashboard=True) as cluster:
    print(cluster.dashboard_url, flush=True)
    assert dista.get([square.remote(i) for i in range(20)]) == [i * i for i in range(20)]
    page = urllib.request.urlopen(cluster.dashboard_url, timeout=10).read().decode()
    assert "Dista" in page
print("left", flush=True)
"""


def test_init_with_a_dashboard_starts_and_stops_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", INIT_SCRIPT],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    url, left = done.stdout.split()
    assert url.startswith("http://127.0.0.1:") and left == "left"
    assert f"dashboard INFO dista dashboard: serving {url}" in done.stderr, done.stderr
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        _get(url)  # gone with the cluster
