"""Attack 3 of issue 24 with real processes: two teams share a head, each with its own
workers (importing different modules) and, under TLS, its own driver certificate.

Team B's script-defined (by-value) tasks must never run on team A's workers (so they cannot
read a file there), and team B cannot call or kill team A's actor by naming its ID, from its
driver or from a task's session: only team A's driver and holders of a handle it gave out
(which carries the actor's capability) may. A handle passed into a task still lets the task
call the actor; one pickled out of band to team B's driver lets it call too. Team A's actor
keeps its state throughout.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import Procs

from .test_tls import CLI, ROOT, env

_LISTENING = re.compile(r"listening on (\S+):(\d+)")
_ACTOR = re.compile(r"^ACTOR (0x[0-9a-f]+) ([0-9a-f]+)$", re.MULTILINE)
_STATE = re.compile(r"^STATE (\d+)$", re.MULTILINE)


def _team_dir(tmp: Path) -> Path:
    from dista_runtime._tls import certs

    folder = tmp / "tls"
    folder.mkdir()
    certs.write_quickstart(folder)
    ca = certs.load_ca(folder)
    for team in ("teamA", "teamB"):
        cert, key = certs.issue(ca, team, ["driver"])
        (folder / f"{team}.pem").write_bytes(cert)
        (folder / f"{team}.key").write_bytes(key)
        (folder / f"{team}.key").chmod(0o600)
    return folder


def _tls(folder: Path | None, role: str) -> dict[str, str]:
    """The TLS settings of a process of ``role`` (a team's driver: its own pair)."""
    if folder is None:
        return {}
    if role in ("teamA", "teamB"):
        return {
            "DISTA_TLS_CA": str(folder / "ca.pem"),
            "DISTA_TLS_CERT": str(folder / f"{role}.pem"),
            "DISTA_TLS_KEY": str(folder / f"{role}.key"),
        }
    return {"DISTA_TLS_DIR": str(folder)}


@pytest.mark.parametrize("transport", ["tls", "tcp"])
def test_team_b_cannot_reach_team_a(procs: Procs, tmp_path: Path, transport: str) -> None:
    pytest.importorskip("cryptography", reason="dista certs needs the tls extra")
    folder = _team_dir(tmp_path) if transport == "tls" else None
    secret = tmp_path / "team_a_secret"
    secret.write_bytes(b"team A's key" * 10)
    procs.spawn("head", [*CLI, "head", "--port", "0"], env(**_tls(folder, "head")))
    found = procs.wait_for("head", _LISTENING)
    head = f"{found.group(1)}:{found.group(2)}"
    worker = [*CLI, "worker", "--head", head]
    team_a = ["--import", "tests.processes.support.team_a"]
    for name in ("a1", "a2"):  # one hosts the actor, the other runs tasks
        procs.spawn(name, [*worker, *team_a], env(TEAM="A", **_tls(folder, "worker")))
    procs.spawn("b1", worker, env(TEAM="B", **_tls(folder, "worker")))
    # (No wait for the workers: team A's actor and tasks wait for theirs, and team B's
    # tasks queue until one may run them.)
    with subprocess.Popen(
        [sys.executable, "-m", "tests.processes.support.team_a", head],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        cwd=ROOT, env=env(**_tls(folder, "teamA")), text=True,
    ) as a:  # fmt: skip
        assert a.stdout is not None and a.stdin is not None
        line = a.stdout.readline()
        actor = _ACTOR.match(line.strip())
        assert actor, line + a.stdout.read()
        b = subprocess.run(
            [sys.executable, "-m", "tests.processes.support.team_b", head, actor.group(1),
             actor.group(2), str(secret)],
            check=False, capture_output=True, text=True, timeout=60, cwd=ROOT,
            env=env(**_tls(folder, "teamB")),
        )  # fmt: skip
        a.stdin.write("\n")
        a.stdin.flush()
        rest = a.stdout.read()
        assert a.wait(30) == 0, rest
    assert b.returncode == 0, b.stdout + b.stderr
    report = json.loads(b.stdout.strip().splitlines()[-1])
    # Team B's script-defined tasks ran only on team B's worker.
    assert {team for team, _ in report["ran"]} == {"B"}, report["ran"]
    # Its calls by ID failed readably, from its driver and from its task's session ...
    refused = "was not opened by this driver: only its creator and holders of a handle"
    assert refused in report["driver"]["call"], report
    assert refused in report["task"]["call"], report
    # ... and its kills did nothing: team A's actor kept its state (42, then 43 from a
    # task given the handle), which team B could read only through the handle A gave out.
    assert report["handle"] == 43
    assert _STATE.search(rest) and _STATE.search(rest).group(1) == "43", rest  # type: ignore[union-attr]
    assert "Traceback" not in procs.log("head")
