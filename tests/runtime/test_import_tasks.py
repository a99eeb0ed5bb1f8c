"""``--import`` (`import_tasks`): modules by name, comma-separated or repeated, and a
package with every module in it, subpackages too."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from dista_runtime._cli.process import import_tasks
from dista_runtime._values import registry
from dista_runtime._values.registry import snapshot


def _forget(prefixes: tuple[str, ...]) -> None:
    """Unimport and unregister what a test imported: later tests' local clusters would
    have their workers import these modules, gone with the test's directory."""
    for name in [m for m in sys.modules if m.split(".")[0] in prefixes]:
        del sys.modules[name]
    for name in [n for n in registry._tasks if n.split(".")[0].split(":")[0] in prefixes]:
        del registry._by_hash[registry.name_hash(name)]
        del registry._tasks[name]


TASK = textwrap.dedent(
    """
    import dista_runtime as dista

    @dista.task
    def {name}() -> str:
        return "{name}"
    """
)


def test_a_package_imports_every_module_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "teamtasks"
    (package / "deep").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "deep" / "__init__.py").write_text("")
    (package / "alpha.py").write_text(TASK.format(name="alpha"))
    (package / "deep" / "beta.py").write_text(TASK.format(name="beta"))
    (tmp_path / "single.py").write_text(TASK.format(name="single"))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import_tasks(["teamtasks", "single"])
        names, _ = snapshot()
        assert {"teamtasks.alpha:alpha", "teamtasks.deep.beta:beta", "single:single"} <= names
    finally:
        _forget(("teamtasks", "single"))
    assert not any(n.startswith(("teamtasks", "single")) for n in snapshot()[0])


def test_a_module_of_a_package_that_fails_to_import_fails_the_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "brokentasks"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "bad.py").write_text("import no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ModuleNotFoundError, match="no_such_module_anywhere"):
            import_tasks(["brokentasks"])
    finally:
        _forget(("brokentasks",))
