"""deploy/systemd: `systemd-analyze verify` takes the units without a word, `systemd-analyze
security` rates them well, and they agree with dista.env: the workers' stop timeout covers
DISTA_DRAIN_TIMEOUT, every variable a command line uses is set there."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
HEAD, WORKER = "dista-head.service", "dista-worker@.service"
#: Where the units run dista from; made in the temporary root verify looks in.
DISTA = "/opt/dista/bin/dista"
SYSTEM_UNITS = Path("/usr/lib/systemd/system")
DRAIN_MARGIN_S = 10

analyze = shutil.which("systemd-analyze")
pytestmark = pytest.mark.skipif(analyze is None, reason="systemd-analyze is not installed")


def settings(text: str) -> dict[str, list[str]]:
    """Each key's values in file order (systemd keys may repeat), comments dropped."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def unit(name: str) -> dict[str, list[str]]:
    return settings((UNITS / name).read_text())


def environment() -> dict[str, str]:
    return {k: v[-1] for k, v in settings((UNITS / "dista.env").read_text()).items()}


def verify(root: Path, *names: str) -> str:
    """``systemd-analyze verify`` in a root holding systemd's own units, these and dista."""
    if not (root / "usr/lib/systemd/system").exists():
        shutil.copytree(SYSTEM_UNITS, root / "usr/lib/systemd/system", symlinks=True)
        (root / DISTA.lstrip("/")).parent.mkdir(parents=True)
        (root / DISTA.lstrip("/")).write_text("#!/bin/sh\n")
        (root / DISTA.lstrip("/")).chmod(0o755)
    here = root / "etc/systemd/system"
    here.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (here / name).exists():
            shutil.copy(UNITS / name, here / name)
    out = subprocess.run(
        [str(analyze), "verify", f"--root={root}", "--man=no", *(str(here / n) for n in names)],
        check=False,
        capture_output=True,
        text=True,
    )
    return (
        f"exit {out.returncode}: {out.stdout}{out.stderr}"
        if out.returncode or out.stdout or out.stderr
        else ""
    )


@pytest.mark.skipif(not SYSTEM_UNITS.exists(), reason="no /usr/lib/systemd/system to verify in")
def test_systemd_analyze_verify_says_nothing(tmp_path: Path) -> None:
    assert verify(tmp_path, HEAD, WORKER) == ""


@pytest.mark.skipif(not SYSTEM_UNITS.exists(), reason="no /usr/lib/systemd/system to verify in")
@pytest.mark.parametrize(
    ("good", "bad", "said"),
    [
        ("KillSignal=SIGTERM", "KillSignal=SIGTREM", "signal"),
        ("Restart=on-failure", "Restarts=on-failure", "Unknown key"),
        (DISTA, "/opt/dista/bin/dista-nope", "not executable"),
    ],
)
def test_verify_catches_a_broken_unit(tmp_path: Path, good: str, bad: str, said: str) -> None:
    here = tmp_path / "etc/systemd/system"
    here.mkdir(parents=True)
    (here / HEAD).write_text((UNITS / HEAD).read_text().replace(good, bad))
    assert said in verify(tmp_path, HEAD)


@pytest.mark.parametrize("name", [HEAD, WORKER])
def test_systemd_analyze_security_rates_the_units_ok(tmp_path: Path, name: str) -> None:
    out = subprocess.run(
        [str(analyze), "security", "--offline=true", "--no-pager", str(UNITS / name)],
        check=False,
        capture_output=True,
        text=True,
    )
    level = re.search(r"Overall exposure level for \S+: ([\d.]+)", out.stdout)
    assert level is not None, out.stdout + out.stderr
    assert float(level.group(1)) <= 2.0, out.stdout


def drain_problems(worker: dict[str, list[str]], env: dict[str, str]) -> list[str]:
    problems = []
    drain = float(env.get("DISTA_DRAIN_TIMEOUT", "120"))
    stop = float(worker["TimeoutStopSec"][-1])
    if stop < drain + DRAIN_MARGIN_S:
        problems.append(f"TimeoutStopSec={stop:g} does not cover a {drain:g} s drain")
    if worker["KillSignal"] != ["SIGTERM"]:
        problems.append("a worker is drained by SIGTERM")
    if "--no-supervise" not in worker["ExecStart"][-1]:
        problems.append("a supervised worker: systemd's SIGTERM reaches the supervisor")
    return problems


def test_the_workers_stop_timeout_covers_the_drain() -> None:
    env = environment()
    assert "DISTA_DRAIN_TIMEOUT" in env  # set on purpose, not left to the default
    assert drain_problems(unit(WORKER), env) == []
    assert drain_problems(unit(WORKER), {**env, "DISTA_DRAIN_TIMEOUT": "145"}) != []
    assert drain_problems({**unit(WORKER), "TimeoutStopSec": ["60"]}, env) != []


def test_the_units_read_dista_env_and_run_as_dista() -> None:
    env = environment()
    user = (UNITS / "dista.sysusers.conf").read_text().split("\n")[-2].split()[1]
    for name in (HEAD, WORKER):
        found = unit(name)
        assert found["EnvironmentFile"] == ["/etc/dista/dista.env"]
        assert found["User"] == [user] and user != "root"
        assert found["Restart"] == ["on-failure"] and found["KillSignal"] == ["SIGTERM"]
        assert found["ExecStart"][-1].startswith(DISTA + " ")
        used = re.findall(r"\$\{?(\w+)\}?", found["ExecStart"][-1])
        assert used and set(used) <= set(env), used
    assert env["DISTA_TLS_DIR"] == "/etc/dista/tls"
    assert env["DISTA_LIVENESS_TIMEOUT"]
