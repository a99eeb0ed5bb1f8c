"""What the Executor's and Pool's tests share: functions their workers run (importable:
workers load them by name), and the driver's side of a cancel and of a script run."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.support.cluster import child_env

ROOT = Path(__file__).resolve().parents[3]


def square(x: int) -> int:
    return x * x


def pause(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def spin(seconds: float) -> float:
    """Busy for ``seconds`` in Python, so that a cancel interrupts it at once (a long
    ``time.sleep`` is C code: an interrupt waits for it to return)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.01)
    return seconds


def tick(path: str, seconds: float) -> int:
    """Append a byte to ``path`` every 10 ms for ``seconds``: while the file grows, the task
    runs (a cancelled one stops growing it)."""
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        with open(path, "a") as f:
            f.write(".")
        n += 1
        time.sleep(0.01)
    return n


def stopped_growing(paths: list[Path]) -> bool:
    """Whether the files stop growing (the tasks writing them ended), within 5 s."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        before = [p.stat().st_size for p in paths]
        time.sleep(0.3)
        if [p.stat().st_size for p in paths] == before:
            return True
    return False


def run_script(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    """Run ``text`` as a user's script ``job.py`` (its own cluster), from the checkout."""
    script = tmp_path / "job.py"
    script.write_text(text)
    return subprocess.run(
        [sys.executable, str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=100,
        env=child_env(),
        cwd=ROOT,
    )
