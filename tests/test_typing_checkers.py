"""The files directly in typing/ under the three checkers users run: pyright --strict (each
file says so in its first line), mypy --strict with Dista's plugin, and mypy --strict
without it. Each must find no error but the expected ones, and every expected one
(``# type: ignore`` lines: pyright's ``reportUnnecessaryTypeIgnoreComment`` and mypy's
``warn_unused_ignores`` fail the run if a wrong call stops being an error). typing/plugin/
holds what only the plugin types; the project's own mypy run checks it (test_quality)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = sorted((ROOT / "typing").glob("*.py"))
STRICT = "# pyright: strict, reportUnnecessaryTypeIgnoreComment=true"

#: One xdist group with the other CPU-heavy tests and the timing-sensitive ones (test_ahead).
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("cpu")]


def _show(done: subprocess.CompletedProcess[str]) -> str:
    return f"{done.stdout}\n{done.stderr}"


def test_each_shared_file_asks_pyright_for_strict_and_needed_ignores() -> None:
    assert len(SHARED) >= 5
    for path in SHARED:
        assert path.read_text().splitlines()[0] == STRICT, path


def test_pyright_strict() -> None:
    here = str(Path(sys.executable).parent)
    pyright = shutil.which("pyright", path=here) or shutil.which("pyright")
    if pyright is None:
        pytest.skip("pyright is not installed (the test extra pins it)")
    done = subprocess.run(
        [pyright, "--pythonpath", sys.executable, *map(str, SHARED)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, _show(done)
    assert "0 errors, 0 warnings" in done.stdout, _show(done)


@pytest.mark.parametrize("plugin", [True, False], ids=["with-plugin", "without-plugin"])
def test_mypy_strict(plugin: bool, tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    config = tmp_path / "mypy.ini"
    lines = ["[mypy]", "strict = True", "warn_unused_ignores = True"]
    lines += [f"mypy_path = {ROOT / 'bindings'}", f"cache_dir = {tmp_path / 'cache'}"]
    if plugin:
        lines.append("plugins = dista_runtime.mypy_plugin")
    config.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), *map(str, SHARED)],
        cwd=tmp_path,  # not the checkout: its pyproject.toml would turn the plugin on
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, _show(done)
    assert f"Success: no issues found in {len(SHARED)} source files" in done.stdout, _show(done)
