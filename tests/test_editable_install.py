"""The README's editable install (``pip install -e .``) is one both type checkers see.

setuptools' default editable install is an import hook, which Python follows and mypy and
pyright do not: a user's project then got ``import-not-found`` (mypy) and every type
unknown (pyright). build_backend/dista_build.py makes its ``.pth`` name the package
directories instead. Here: a new virtual environment, the checkout installed editable into
it by pip (the build isolated, as the README's command does), and a module outside the
checkout checked with mypy --strict and pyright against that environment.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

#: One xdist group with the other CPU-heavy tests and the timing-sensitive ones (test_ahead).
pytestmark = pytest.mark.xdist_group("cpu")

ROOT = Path(__file__).resolve().parents[1]

USER_MODULE = """\
import dista_runtime as dista
from dista_asyncio import connect

@dista.task
def add(a: int, b: int) -> int:
    return a + b

reveal_type(add.remote(1, 2))
reveal_type(connect)
"""


@pytest.fixture(scope="module")
def editable_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with the checkout installed editable (no dependencies: the
    running environment's are reachable through a ``.pth``, as mypy needs them)."""
    where = tmp_path_factory.mktemp("editable")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "-e", str(ROOT)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"pip install -e failed:\n{done.stdout}\n{done.stderr}")
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    # This environment's packages (cloudpickle and the like) for the checkers, after the
    # checkout's: the checkout's own .pth is what is under test.
    (site / "zz_running_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def _pth_lines(venv: Path) -> list[str]:
    found = sorted(venv.glob("lib/python*/site-packages/__editable__*dista*.pth"))
    assert len(found) == 1, found
    return found[0].read_text().splitlines()


def test_the_editable_install_is_plain_directories(editable_env: Path) -> None:
    assert _pth_lines(editable_env) == [str(ROOT), str(ROOT / "bindings")]
    assert not list(editable_env.glob("lib/python*/site-packages/__editable___*_finder.py"))
    python = editable_env / "bin" / "python"
    done = subprocess.run(
        [str(python), "-c", "import dista_runtime, dista_asyncio; print(dista_runtime.__file__)"],
        capture_output=True, text=True, check=False, cwd="/",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ROOT / "dista_runtime" / "__init__.py")


def test_mypy_sees_the_editable_install(editable_env: Path, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(USER_MODULE)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental",
         "--python-executable", str(editable_env / "bin" / "python"), "app.py"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
    )  # fmt: skip
    out = done.stdout
    assert "import-not-found" not in out and done.returncode == 0, out + done.stderr
    assert 'Revealed type is "dista_runtime._api.ref.ObjectRef[int]"' in out, out
    assert "def (address: str | None =" in out, out  # connect's own signature, not Any


def test_pyright_sees_the_editable_install(editable_env: Path, tmp_path: Path) -> None:
    pyright = shutil.which("pyright") or str(Path(sys.executable).parent / "pyright")
    if not Path(pyright).exists():
        pytest.skip("pyright is not installed (pip install pyright)")
    (tmp_path / "app.py").write_text(USER_MODULE)
    done = subprocess.run(
        [pyright, "--outputjson", "--pythonpath", str(editable_env / "bin" / "python"),
         "app.py"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300, check=False,
    )  # fmt: skip
    report = json.loads(done.stdout)
    said = [d["message"] for d in report["generalDiagnostics"]]
    assert report["summary"]["errorCount"] == 0, said
    assert 'Type of "add.remote(1, 2)" is "ObjectRef[int]"' in said, said
    assert any(m.startswith('Type of "connect" is "(address: str | None') for m in said), said
