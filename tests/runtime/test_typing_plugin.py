"""The mypy plugin widens ``.remote`` to take refs, and only refs of the right type.

Top-level arguments and, two levels down, the items of lists, tuples, sets and dicts.

A guard against the plugin turning into "accept anything": mypy runs (in-process) on a
small file with the plugin on, and must report exactly the wrong calls.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parent.parent.parent

SOURCE = """\
from typing import TypeVar, assert_type
from dista_runtime import ObjectRef, task

T = TypeVar("T")
N = TypeVar("N", bound=int)

@task
def add(a: int, b: int) -> int:
    return a + b

@task(num_returns=2)
def split(x: float, *rest: int, **named: str) -> tuple[int, str]:
    return 0, ""

@task
def ident(x: T) -> T:
    return x

@task
def total(values: list[int]) -> int:
    return sum(values)

@task
def grid(rows: list[list[int]], named: dict[str, int] | None = None) -> int:
    return 0

@task
def bump(x: N) -> N:
    return x

def right(
    r: ObjectRef[int], f: ObjectRef[float], s: ObjectRef[str],
    refs: list[ObjectRef[int]], either: list[int | ObjectRef[int]],
) -> None:
    add.remote(r, 3)
    add.remote(a=r, b=3)
    add.remote(add.remote(1, 2), r)
    split.remote(f, r, 2, k=s, j="v")
    split.remote(r)
    assert_type(ident.remote(r), ObjectRef[int])
    assert_type(bump.remote(r), ObjectRef[int])
    total.remote([r, r])
    total.remote([r, 3])
    total.remote(refs)
    total.remote(either)
    grid.remote([[r, 1], refs], {"k": r})

def wrong(
    r: ObjectRef[int], f: ObjectRef[float], s: ObjectRef[str],
    strs: list[ObjectRef[str]], bools: list[bool],
) -> None:
    add.remote(s, 3)  # WRONG arg-type
    add.remote(a=1, b=s)  # WRONG arg-type
    add.remote(f, 3)  # WRONG arg-type
    add.remote("x", 3)  # WRONG arg-type
    add.remote(r)  # WRONG call-arg
    add.remote(r, 3, c=r)  # WRONG call-arg
    split.remote(s)  # WRONG arg-type
    split.remote(f, s)  # WRONG arg-type
    split.remote(f, k=r)  # WRONG arg-type
    add(r, 3)  # WRONG arg-type
    bump.remote(s)  # WRONG type-var
    total.remote([s])  # WRONG list-item
    total.remote(["x"])  # WRONG list-item
    total.remote(strs)  # WRONG arg-type
    total.remote((r, 3))  # WRONG arg-type
    total.remote(bools)  # WRONG arg-type
    grid.remote([(r, 1)])  # WRONG arg-type
    grid.remote([], {"k": s})  # WRONG dict-item
"""

CONFIG = f"""\
[mypy]
strict = True
plugins = dista_runtime.mypy_plugin
mypy_path = {ROOT},{ROOT / "bindings"}
follow_imports = silent

[mypy-cloudpickle.*,uvloop.*,psutil.*]
ignore_missing_imports = True
"""


@pytest.mark.timeout(60)
def test_plugin_accepts_right_refs_and_rejects_wrong_ones(tmp_path: Path) -> None:
    checked = tmp_path / "calls.py"
    checked.write_text(SOURCE)
    config = tmp_path / "mypy.ini"
    config.write_text(CONFIG)
    stdout, stderr, status = mypy_api.run(
        [
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--show-error-codes",
            "--no-error-summary",
            "--hide-error-context",
            str(checked),
        ]
    )
    assert stderr == ""
    reported: dict[int, set[str]] = {}
    for line in stdout.splitlines():
        m = re.match(r".*calls\.py:(\d+): error: .*\[([a-z-]+)\]$", line)
        assert m is not None or ": note: " in line, line
        if m is not None:
            reported.setdefault(int(m[1]), set()).add(m[2])
    expected = {
        n: {line.rsplit("WRONG ", 1)[1]}
        for n, line in enumerate(SOURCE.splitlines(), 1)
        if "# WRONG" in line
    }
    assert reported == expected, stdout
    assert status == 1
    # The messages name the widened type: the plugin ran (not merely a lenient mypy).
    assert 'expected "int | ObjectRef[int]"' in stdout, stdout
    # Nested refs: the covariant reading of list[int], then the exact check of the values.
    assert 'expected "Sequence[int | ObjectRef[int]] | ObjectRef[list[int]]"' in stdout, stdout
    assert 'expected "list[int]" (refs read as their values)' in stdout, stdout


NAMED = """\
import dista_runtime as dista
from dista_runtime import ObjectRef

@dista.task
def add(a: int, b: int) -> int:
    return a + b

@dista.actor
class Counter:
    def bump(self, k: int) -> int:
        return k

class Ledger(dista.Actor):
    def __init__(self, owner: str) -> None:
        self.owner = owner

    def deposit(self, amount: int, *, note: str = "") -> int:
        return amount

def calls(s: ObjectRef[str], n: ObjectRef[int]) -> None:
    add.remote("x", 2)
    add.remote(1)
    h = Counter.remote()
    h.bump.remote(s)
    h.bump.remote(1, j=2)
    Ledger.remote(n)
    ledger = Ledger.remote(owner=s)  # a keyword ref: fine with the plugin
    ledger.remote(Ledger.deposit, n, note=n)
    ledger.remote(Ledger.deposit, amount=n)  # fine
    ledger.remote(Counter.bump, 1)
"""


@pytest.mark.timeout(60)
def test_messages_name_the_task_or_method_and_its_declared_types(tmp_path: Path) -> None:
    checked = tmp_path / "named.py"
    checked.write_text(NAMED)
    config = tmp_path / "mypy.ini"
    config.write_text(CONFIG)
    stdout, _, status = mypy_api.run(
        ["--config-file", str(config), "--cache-dir", str(tmp_path / "cache"), str(checked)]
    )
    assert status == 1
    for said in (
        (
            'Argument 1 to "add.remote" has incompatible type "str"; expected "int | ObjectRef[int]"'
        ),
        'Missing positional argument "b" in call to "add.remote"',
        (
            'Argument 1 to "h.bump.remote" has incompatible type "ObjectRef[str]"; '
            'expected "int | ObjectRef[int]"'
        ),
        'Unexpected keyword argument "j" for "h.bump.remote"',
        (
            'Argument 1 to "Ledger.remote" has incompatible type "ObjectRef[int]"; '
            'expected "str | ObjectRef[str]"'
        ),
        (
            'Argument "note" to "Ledger.deposit.remote" has incompatible type "ObjectRef[int]"; '
            'expected "str | ObjectRef[str]"'
        ),
        '"Counter.bump" is not a method of actor "Ledger": h.remote takes one of its own',
    ):
        assert said in stdout, stdout
    assert "RemoteFunction" not in stdout and "ActorMethod" not in stdout, stdout
    assert stdout.count(": error:") == 7, stdout  # and none for the keyword refs
