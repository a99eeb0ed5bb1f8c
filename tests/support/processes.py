"""Processes a test starts, each with its output in a file, all killed at its end: the
`procs` fixture (tests/support/cluster.py) of the TLS and join-message tests."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Procs:
    """Processes a test starts, each with its output in a file; all killed at the end."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(self, name: str, argv: list[str], environ: dict[str, str]) -> None:
        out = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        self.procs[name] = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=environ, cwd=ROOT
        )
        out.close()

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def wait_for(
        self, name: str, pattern: re.Pattern[str], timeout: float = 20.0
    ) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = pattern.search(self.log(name))
            if found:
                return found
            if self.procs[name].poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{name} did not print {pattern.pattern!r}:\n{self.log(name)}")

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            proc.wait(10)
