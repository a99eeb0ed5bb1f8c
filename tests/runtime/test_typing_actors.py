"""Actors under mypy: with the plugin every call is checked, without it nothing false is.

mypy runs in-process on two small modules (the actors in one, the calls in the other, so
the plugin's ``remote`` is seen across modules, through mypy's cache too), once with the
plugin and once without, and must report exactly the lines marked for each.
``typing/plugin/check_actors.py`` pins the types themselves (``assert_type``); it is checked with
the rest of ``typing/`` by ``tests/test_quality.py::test_mypy_strict``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parent.parent.parent

ACTORS = """\
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

import dista_runtime as dista
from dista_runtime import actor

T = TypeVar("T")

@dista.actor
class Counter:
    def __init__(self, start: int = 0) -> None:
        self.value = start

    def add(self, k: int) -> int:
        self.value += k
        return self.value

    async def aget(self) -> int:
        return self.value

@actor(checkpoint_every=10)
class Box(Generic[T]):
    def __init__(self, item: T) -> None:
        self.item = item

    def get(self) -> T:
        return self.item

@dista.actor
class Declared:
    # For pyright (no plugins): what ``remote`` gives; the plugin checks the arguments.
    if TYPE_CHECKING:
        remote: ClassVar[Callable[..., dista.ActorHandle[Declared]]]

    def __init__(self, n: int) -> None:
        self.n = n
"""

CALLS = """\
from typing import assert_type

import dista_runtime as dista
from dista_runtime import ActorHandle, ObjectRef

from actors import Box, Counter, Declared

@dista.task
def use(h: ActorHandle[Counter]) -> int:
    return 0

def right(h: ActorHandle[Counter], r: ObjectRef[int], s: ObjectRef[str]) -> None:
    Counter.remote(r)  # PLAIN attr-defined
    Counter.remote(start=1)  # PLAIN attr-defined
    Box.remote(s)  # PLAIN attr-defined
    Declared.remote(r)
    h.add.remote(r)
    h.add.remote(k=1)
    h.aget.remote()
    use.remote(h)
    assert_type(Counter(1), Counter)

def typed(h: ActorHandle[Counter], b: ActorHandle[Box[str]]) -> None:
    assert_type(h.add.remote(1), ObjectRef[int])  # PLAIN assert-type
    assert_type(h.aget.remote(), ObjectRef[int])  # PLAIN assert-type
    assert_type(b.get.remote(), ObjectRef[str])  # PLAIN assert-type

def wrong(h: ActorHandle[Counter], s: ObjectRef[str]) -> None:
    Counter.remote("x")  # WRONG arg-type PLAIN attr-defined
    Counter.remote(1, 2)  # WRONG call-arg PLAIN attr-defined
    Declared.remote("x")  # WRONG arg-type
    Declared.remote()  # WRONG call-arg
    h.add.remote(s)  # WRONG arg-type
    h.add.remote("x")  # WRONG arg-type
    h.add.remote(1, 2)  # WRONG call-arg
    h.add.remote()  # WRONG call-arg
    h.ad.remote(1)  # WRONG attr-defined
    h.value.remote()  # WRONG attr-defined
"""

CONFIG = f"""\
[mypy]
strict = True
{{plugins}}
mypy_path = {ROOT},{ROOT / "bindings"}
follow_imports = silent

[mypy-cloudpickle.*,uvloop.*,psutil.*,fsspec.*]
ignore_missing_imports = True
"""


def _mypy(tmp_path: Path, plugin: bool) -> tuple[dict[int, set[str]], str]:
    """mypy's error codes on each line of ``calls.py``, and its whole output."""
    (tmp_path / "actors.py").write_text(ACTORS)
    (tmp_path / "calls.py").write_text(CALLS)
    config = tmp_path / "mypy.ini"
    config.write_text(
        CONFIG.format(plugins="plugins = dista_runtime.mypy_plugin" if plugin else "")
    )
    stdout, stderr, _ = mypy_api.run(
        [
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / ("cache-plugin" if plugin else "cache-plain")),
            "--show-error-codes",
            "--no-error-summary",
            "--hide-error-context",
            str(tmp_path / "actors.py"),
            str(tmp_path / "calls.py"),
        ]
    )
    assert stderr == ""
    reported: dict[int, set[str]] = {}
    for line in stdout.splitlines():
        m = re.match(r".*calls\.py:(\d+): error: .*\[([a-z-]+)\]$", line)
        assert m is not None or ": note: " in line, line
        if m is not None:
            reported.setdefault(int(m[1]), set()).add(m[2])
    return reported, stdout


def _marked(tag: str) -> dict[int, set[str]]:
    found: dict[int, set[str]] = {}
    for n, line in enumerate(CALLS.splitlines(), 1):
        m = re.search(rf"\b{tag} ([a-z-]+)", line)
        if m is not None:
            found[n] = {m[1]}
    return found


@pytest.mark.timeout(120)
def test_with_the_plugin_every_call_is_checked(tmp_path: Path) -> None:
    for _ in range(2):  # the second run reads the actors' module from mypy's cache
        reported, stdout = _mypy(tmp_path, plugin=True)
        assert reported == _marked("WRONG"), stdout
        # The plugin's own words: the widened constructor, and its handle-method check.
        assert 'Argument 1 to "Counter.remote" has incompatible type "str"; expected' in (
            stdout
        ), stdout
        assert 'expected "int | ObjectRef[int]"' in stdout, stdout
        assert 'Actor "Counter" has no method "ad"' in stdout, stdout


@pytest.mark.timeout(120)
def test_without_the_plugin_methods_are_any_and_create_is_unknown(tmp_path: Path) -> None:
    """What a checker without the plugin sees (pyright alike): ``Cls.remote`` is unknown
    (an error, unless the class declares it), handle methods take anything and give
    ``ObjectRef[Any]`` (no error, nothing checked)."""
    reported, stdout = _mypy(tmp_path, plugin=False)
    assert reported == _marked("PLAIN"), stdout


def test_the_typing_checks_are_in_the_mypy_run() -> None:
    """``test_mypy_strict`` runs bare ``mypy``: the configuration's ``files`` must include
    ``typing/``, where ``plugin/check_actors.py`` is."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert "typing" in config["files"]
    assert "dista_runtime.mypy_plugin" in config["plugins"]
    assert (ROOT / "typing" / "plugin" / "check_actors.py").is_file()
