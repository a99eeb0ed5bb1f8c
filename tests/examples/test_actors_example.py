"""examples/actors.py, run as a user runs it: the count survives a SIGKILL of its worker."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.cluster import child_env

pytestmark = pytest.mark.timeout(120)


def test_the_word_count_survives_its_workers_death() -> None:
    done = subprocess.run(  # noqa: PLW1510  (the assert shows stderr)
        [sys.executable, "examples/actors.py"],
        capture_output=True,
        text=True,
        timeout=90,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("killed the actor's worker"), lines
    assert lines[1].startswith("2000 lines counted") and lines[1].endswith("each once: True")
    assert lines[2] == "top words: [('the', 4000), ('quick', 2000), ('brown', 2000)]"
