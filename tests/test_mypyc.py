"""The optional compiled core (``DISTA_MYPYC=1``, see setup.py) builds and passes the core's
tests: the wire layer's and the seeded cluster simulation's, run against the compiled
modules. CI runs everything else on the pure-Python build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

#: One xdist group with the other CPU-heavy tests and the timing-sensitive ones (test_ahead).
pytestmark = pytest.mark.xdist_group("cpu")

ROOT = Path(__file__).resolve().parent.parent
_JOBS = max(2, os.cpu_count() or 1)
COMPILED_SEEDS = {
    "DISTA_SIM_SEEDS": "60",
    "DISTA_RECOVERY_SIM_SEEDS": "60",
    "DISTA_ACTOR_SIM_SEEDS": "50",
    "DISTA_SECURE_SIM_SEEDS": "30",
    "DISTA_MAPPED_SIM_SEEDS": "30",
    "DISTA_AHEAD_SIM_SEEDS": "60",
}


def _cannot_build() -> str:
    try:
        import mypyc  # noqa: F401
    except ImportError:
        return "mypyc is not installed"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python headers"
    return ""


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.timeout(900)
def test_the_compiled_core_passes_the_core_tests(tmp_path: Path) -> None:
    reason = _cannot_build()
    if reason:
        pytest.skip(reason)
    ignore = shutil.ignore_patterns("__pycache__", "*.so")
    shutil.copytree(ROOT / "dista_proto", tmp_path / "dista_proto", ignore=ignore)
    shutil.copy(ROOT / "setup.py", tmp_path)
    build = _run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace", "-j", str(_JOBS)],
        tmp_path,
        # -O0: the same code compiled in about 60% of the time (76 s against 121 s here);
        # in many C files, on every core (30 s against 68 s on 2 cores).
        dict(os.environ, DISTA_MYPYC="1", DISTA_MYPYC_OPT="0", DISTA_MYPYC_MULTI_FILE="1"),
    )
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]
    compiled = {p.name.split(".")[0] for p in (tmp_path / "dista_proto").glob("*.so")}
    assert {"_head", "_worker", "_driver", "_connection", "_decode", "_encode"} <= compiled

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    # Fewer seeds than the pure run, which sweeps them all: here every scenario and rule
    # runs compiled, and a few hundred seeds reach every path the compiled code has.
    env.update(COMPILED_SEEDS)
    where = _run(
        [sys.executable, "-c", "import dista_proto._head as h; print(h.__file__)"], tmp_path, env
    )
    assert where.stdout.strip().endswith(".so"), where.stdout + where.stderr
    tests = _run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            *("-n", "0"),  # no parallel workers of its own (pyproject's addopts has -n 2)
            "-p",
            "no:cacheprovider",
            "--import-mode=append",  # the compiled copy first on the path, not the checkout
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(ROOT),
            str(ROOT / "tests" / "proto"),
            str(ROOT / "tests" / "sim"),
        ],
        tmp_path,
        env,
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
