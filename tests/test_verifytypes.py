"""pyright's ``--verifytypes`` on each package as a user installs it: every symbol of the
public interface has a declared type, none is left to a checker's inference (100% type
completeness). pyright checks an installed package only (an editable install is an import
hook it cannot follow), so the checkout is built and installed into a virtual environment
of its own, without dependencies; the packages it imports are this environment's."""

from __future__ import annotations

import json
import os
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import pytest

#: One xdist group with the other CPU-heavy tests and the timing-sensitive ones (test_ahead).
pytestmark = pytest.mark.xdist_group("cpu")

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("dista_proto", "dista_runtime", "dista_asyncio", "dista_anyio", "dista_gevent")
#: What the build reads: pyproject.toml names the readme, setup.py is the build script.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in", "build_backend")
SOURCES += ("dista_proto", "dista_runtime", "bindings")

#: Diagnostics no annotation of ours can remove, by symbol: `DistaBackend`'s bases are
#: joblib's, and joblib ships no type information (no py.typed), which --verifytypes does
#: not infer from. Only these messages are excused there; anything else about it counts.
UNTYPED_BASES = {
    "dista_runtime.joblib.DistaBackend": {
        "Type of base class unknown",
        "Type of metaclass unknown",
    }
}


def _pyright() -> str | None:
    here = str(Path(sys.executable).parent)
    return shutil.which("pyright", path=here) or shutil.which("pyright")


def _install(top: Path) -> Path:
    """A virtual environment in ``top`` with the checkout installed in it, no dependencies:
    a ``.pth`` file puts this environment's site-packages after its own. Its python."""
    source = top / "source"  # a copy: the build writes build/ and *.egg-info beside it
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            skip = shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info")
            shutil.copytree(ROOT / name, source / name, ignore=skip)
        else:
            shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", top / "venv"], check=True)
    python = top / "venv" / "bin" / "python"
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    found = subprocess.run([python, "-c", purelib], check=True, capture_output=True, text=True)
    packages = Path(found.stdout.strip())
    ours = dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"]])
    (packages / "_dependencies.pth").write_text("".join(f"{path}\n" for path in ours))
    # No build isolation (nothing fetched): the build backend is this environment's
    # setuptools, which the test extra brings (bdist_wheel is built into >= 70.1).
    build = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"),
            *("--no-build-isolation", "--no-index", "--no-compile"),
            *("--target", str(packages), str(source)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]
    return python


def _verify(pyright: str, python: Path, package: str, cwd: Path) -> subprocess.Popen[str]:
    # --ignoreexternal: an unknown type imported from another package is that package's.
    command = [pyright, "--verifytypes", package, "--ignoreexternal", "--outputjson"]
    # --verifytypes finds packages with the python on PATH (it ignores --pythonpath).
    path = os.pathsep.join([str(python.parent), os.environ.get("PATH", "")])
    env = dict(os.environ, PATH=path, PYRIGHT_PYTHON_IGNORE_WARNINGS="1")
    # A session of its own: the wrapper runs node as its child, ended with it (`_end`).
    return subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _end(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:  # not read: another report's failure ended the test first
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate()  # its pipes closed


def _offenders(report: dict[str, Any]) -> list[str]:
    """Each symbol's errors (warnings are missing docstrings: not counted in the score),
    less those `UNTYPED_BASES` excuses; the causes first, then what is partially unknown
    through them (a parameter of a class with an undeclared attribute, say)."""
    causes, through = [], []
    for symbol in report["symbols"]:
        excused = UNTYPED_BASES.get(symbol["name"], set())
        for diagnostic in symbol["diagnostics"]:
            lines = diagnostic["message"].replace("\xa0", " ").splitlines()
            message = "; ".join(line.strip() for line in lines)
            if diagnostic["severity"] == "error" and message not in excused:
                start = diagnostic.get("range", {}).get("start", {}).get("line", -1) + 1
                where = f"{Path(diagnostic.get('file') or '?').name}:{start}"
                found = through if "partially unknown" in message else causes
                found.append(f"{symbol['name']} ({where}): {message}")
    if causes and through:
        return [*causes, f"... and {len(through)} partially unknown through these"]
    return causes or through


@pytest.mark.timeout(300)  # pyright's first run fetches its npm package
def test_every_package_is_type_complete() -> None:
    pyright = _pyright()
    if pyright is None:
        pytest.skip("pyright is not installed: pip install -e '.[test]' (pyright==1.1.414)")
    with tempfile.TemporaryDirectory(prefix="dista-verifytypes-") as tmp:
        failures = _check(pyright, Path(tmp))
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)


def _check(pyright: str, top: Path) -> list[str]:
    """What is wrong with the packages' reports, all five checked at once."""
    python = _install(top)
    cwd = top / "run"  # empty: nothing there for pyright to take for the packages
    cwd.mkdir()
    running = {name: _verify(pyright, python, name, cwd) for name in PACKAGES}
    try:
        return [failure for name in PACKAGES for failure in _judge(name, running[name], top)]
    finally:
        for process in running.values():
            _end(process)


def _judge(name: str, process: subprocess.Popen[str], top: Path) -> list[str]:
    """What is wrong with ``name``'s report (nothing: its types are complete)."""
    out, err = process.communicate(timeout=240)
    try:
        report = json.loads(out)["typeCompleteness"]
    except (ValueError, KeyError):
        return [f"{name}: pyright gave no report\n{out[-2000:]}{err[-2000:]}"]
    failures = []
    where = report["packageRootDirectory"]
    if not where or not Path(where).resolve().is_relative_to((top / "venv").resolve()):
        failures.append(f"{name}: checked {where or 'nothing'}, not the installed copy")
    offenders = _offenders(report)
    unknown = sum(
        counts["withAmbiguousType"] + counts["withUnknownType"]
        for counts in (report["exportedSymbolCounts"], report["otherSymbolCounts"])
    )
    excused = sum(1 for symbol in report["symbols"] if symbol["name"] in UNTYPED_BASES)
    score = 100 * report["completenessScore"]
    if offenders or unknown > excused or (not excused and score != 100.0):
        listed = "\n  ".join(offenders or ["(no diagnostic: see pyright's report)"])
        failures.append(f"{name}: {score:.1f}% type complete\n  {listed}")
    return failures
