"""The binding is chosen by name at run time: `init(loop=)`, `DISTA_LOOP`, `--loop`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import dista_runtime as dista
from dista_runtime import loops


def test_asyncio_unless_told_or_detected_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISTA_LOOP", raising=False)
    assert loops.choose() == "asyncio"
    assert loops.backend().__module__.split(".")[0] == "dista_asyncio"
    monkeypatch.setenv("DISTA_LOOP", "asyncio")
    assert loops.choose() == "asyncio"


def test_an_unknown_loop_says_which_there_are(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTA_LOOP", "tokio")
    with pytest.raises(dista.DistaError, match="unknown loop 'tokio': choose one of asyncio"):
        loops.choose()
    with pytest.raises(dista.DistaError, match="unknown loop"):
        dista.init(loop="tokio")


def test_a_binding_not_in_this_installation_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(loops._PACKAGES, "gevent", "dista_gevent_not_installed")
    with pytest.raises(
        dista.DistaError, match=r"binding .* is not available.*pip install 'dista\[gevent\]'"
    ):
        dista.init(loop="gevent")


def test_the_default_is_the_loop_the_process_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside trio: the anyio binding on trio; in a gevent-patched process: gevent."""
    monkeypatch.delenv("DISTA_LOOP", raising=False)
    trio = pytest.importorskip("trio")
    pytest.importorskip("gevent")

    async def inside() -> str:
        return loops.choose()

    assert trio.run(inside) == "trio"
    assert loops.choose() == "asyncio"  # trio imported, but not running here
    patched = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "from gevent import monkey; monkey.patch_all()\n"
                "from dista_runtime import loops; print(loops.choose())"
            ),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "DISTA_LOOP"},
    )
    assert patched.stdout.strip() == "gevent"


def test_every_cli_role_takes_loop() -> None:
    for role in ("head", "worker", "status", "timeline", "stop", "run"):
        out = subprocess.run(
            [sys.executable, "-m", "dista_runtime.cli", role, "--help"],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert "--loop" in out, role
    bad = subprocess.run(
        [sys.executable, "-m", "dista_runtime.cli", "status", "--loop", "tokio"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "invalid choice: 'tokio'" in bad.stderr
