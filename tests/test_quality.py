"""The checks every change must pass: core purity, types, lint and formatting."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"socket", "asyncio", "selectors", "ssl", "threading", "time", "random", "os"}


def test_core_imports_nothing_impure() -> None:
    offenders = []
    for path in sorted((ROOT / "dista_proto").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [
                f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"
                for name in names
                if name.split(".")[0] in FORBIDDEN
            ]
    assert offenders == []


BINDINGS = {"dista_asyncio", "dista_anyio", "dista_gevent"}


def _imported(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_layers_the_runtime_imports_no_binding_and_bindings_only_its_public_modules() -> None:
    """The runtime picks its binding by name at run time (`dista_runtime.loops`); bindings
    are siblings that never import each other, and use only the runtime's public modules
    (`binding`, `engine`, `execution`, `loops`), never its private ones."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / "dista_runtime").rglob("*.py"))
        for line, name in _imported(path)
        if name.split(".")[0] in BINDINGS
    ]
    for binding in sorted((ROOT / "bindings").iterdir()):
        offenders += [
            f"{path.relative_to(ROOT)}:{line} imports {name}"
            for path in sorted(binding.rglob("*.py"))
            for line, name in _imported(path)
            if name.split(".")[0] in BINDINGS - {binding.name}
            or (
                name.split(".")[0] == "dista_runtime"
                and any(part.startswith("_") for part in name.split(".")[1:])
            )
        ]
    assert offenders == []


#: The wall clock's readers: only `dista_runtime._clock` may read it (the wall offset for
#: stamps); every deadline follows the monotonic clock (docs/protocol.md, "Time").
WALL_CLOCK = {"time", "time_ns", "gmtime", "localtime", "ctime"}


def _reads_wall_clock(node: ast.AST) -> bool:
    """``time.time()``, ``time.time_ns()``... or ``from time import time``..."""
    if isinstance(node, ast.Attribute):
        return (
            isinstance(node.value, ast.Name)
            and node.value.id == "time"
            and node.attr in WALL_CLOCK
        )
    return (
        isinstance(node, ast.ImportFrom)
        and node.module == "time"
        and any(alias.name in WALL_CLOCK for alias in node.names)
    )


def test_the_runtime_reads_the_wall_clock_in_one_place() -> None:
    paths = [
        path
        for folder in ("dista_runtime", "bindings")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ROOT / "dista_runtime" / "_clock.py"
    ]
    offenders = [
        f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        for path in paths
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if _reads_wall_clock(node)
    ]
    assert offenders == []


#: The most lines of code a binding may have (not counting blank lines, comments and
#: docstrings): a binding adapts a loop; what is not about its loop is the runtime's. Its
#: `Backend`'s static methods are declared with the contract's types (each a ``def`` that
#: calls the binding's function: pyright's --verifytypes counts a ``staticmethod(f)``
#: assigned in the class as an untyped override), about ten lines of each binding's.
BINDING_LINES = 260


def code_lines(path: Path) -> int:
    """Lines of code in ``path``: not blank, not a comment, not part of a docstring."""
    text = path.read_text()
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(text, str(path))):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            end = body[0].end_lineno or body[0].lineno
            docstrings.update(range(body[0].lineno, end + 1))
    return sum(
        1
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.strip().startswith("#") and number not in docstrings
    )


def test_bindings_are_thin_and_know_no_protocol() -> None:
    """Each binding is at most BINDING_LINES lines of code, and imports nothing of the
    protocol (`dista_proto`): no frame kind, no protocol rule can be written there."""
    sizes = {
        binding.name: sum(code_lines(p) for p in binding.rglob("*.py"))
        for binding in sorted((ROOT / "bindings").iterdir())
        if binding.is_dir()
    }
    assert {name: n for name, n in sizes.items() if n > BINDING_LINES} == {}
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / "bindings").rglob("*.py"))
        for line, name in _imported(path)
        if name.split(".")[0] == "dista_proto"
    ]
    assert offenders == []


def _run(tool: str, *args: str) -> None:
    exe = shutil.which(tool, path=str(Path(sys.executable).parent)) or shutil.which(tool)
    if exe is None:
        pytest.fail(f"{tool} is not installed: pip install -e '.[test]'")
    result = subprocess.run(
        [exe, *args], check=False, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict() -> None:
    _run("mypy")


def test_ruff_check() -> None:
    _run("ruff", "check", ".")


def test_ruff_format() -> None:
    _run("ruff", "format", "--check", ".")


#: The most lines a module may have (STYLE.md §2: h11's largest is 659).
MODULE_LINES = 600
#: The most methods a class of the core may have, with those of its bases in the core: a
#: larger one is several objects held by a router (STYLE.md §11).
CLASS_METHODS = 60


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _listed(what: str, offenders: list[str]) -> str:
    return f"{len(offenders)} {what}:\n  " + "\n  ".join(offenders)


@pytest.mark.parametrize("package", ["dista_proto", "dista_runtime", "bindings"])
def test_modules_are_small(package: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {n} lines"
        for path in _modules(package)
        if (n := len(path.read_text().splitlines())) > MODULE_LINES
    ]
    assert offenders == [], _listed(f"over {MODULE_LINES} lines", offenders)


def _class_methods(paths: list[Path]) -> dict[tuple[Path, str], set[str]]:
    """Every class of these modules, by module and name: the methods it and its bases among
    them define (a base named in the same module first, else the one of that name)."""
    own: dict[tuple[Path, str], tuple[set[str], list[str]]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                defs = {
                    n.name
                    for n in node.body
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                }
                bases = [ast.unparse(b).split(".")[-1].split("[")[0] for b in node.bases]
                own[path, node.name] = (defs, bases)

    def resolve(path: Path, name: str) -> tuple[Path, str] | None:
        if (path, name) in own:
            return path, name
        return next((key for key in own if key[1] == name), None)

    def methods(key: tuple[Path, str], seen: frozenset[tuple[Path, str]]) -> set[str]:
        defs, bases = own[key]
        found = set(defs)
        for base in bases:
            base_key = resolve(key[0], base)
            if base_key is not None and base_key not in seen:
                found |= methods(base_key, seen | {key})
        return found

    return {key: methods(key, frozenset()) for key in own}


def test_class_methods_counts_bases(tmp_path: Path) -> None:
    """The counter itself: a class's methods include its bases' among the modules, once
    each, resolved across modules; bases from elsewhere (Exception) add none."""
    (tmp_path / "a.py").write_text(
        "class Base(Exception):\n    def f(self): ...\n    def g(self): ...\n"
    )
    (tmp_path / "b.py").write_text(
        "from a import Base\nclass Mixin:\n    @property\n    def h(self): ...\n"
        "class Leaf(Base, Mixin):\n    def f(self): ...\n    async def i(self): ...\n"
    )
    found = _class_methods(sorted(tmp_path.glob("*.py")))
    assert found[tmp_path / "b.py", "Leaf"] == {"f", "g", "h", "i"}
    assert found[tmp_path / "a.py", "Base"] == {"f", "g"}


def test_core_classes_are_small() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {name} has {len(methods)} methods"
        for (path, name), methods in _class_methods(_modules("dista_proto")).items()
        if len(methods) > CLASS_METHODS
    ]
    assert offenders == [], _listed(f"over {CLASS_METHODS} methods, bases' included", offenders)


@pytest.mark.parametrize("package", ["dista_proto", "dista_runtime", "bindings"])
def test_core_has_no_not_implemented_stubs(package: str) -> None:
    """A class that calls up to its subclass through ``raise NotImplementedError`` is a
    tower (STYLE.md §11): hold the part instead."""
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in _modules(package)
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Raise)
        and node.exc is not None
        and ast.unparse(node.exc).removesuffix("()") == "NotImplementedError"
    ]
    assert offenders == [], _listed("raise NotImplementedError (hold the part instead)", offenders)


# -- the import graph -------------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    """One edge of the import graph: where the statement is, and what it says."""

    path: Path
    line: int
    text: str


#: Each package's name and folder: the core, the runtime (its wings are subpackages), and
#: each binding.
def _packages(root: Path) -> list[tuple[str, Path]]:
    bindings = sorted(p for p in (root / "bindings").iterdir() if (p / "__init__.py").exists())
    return [
        ("dista_proto", root / "dista_proto"),
        ("dista_runtime", root / "dista_runtime"),
        *((b.name, b) for b in bindings),
    ]


def _module_files(packages: list[tuple[str, Path]]) -> dict[str, Path]:
    """Every module by dotted name (a package by its own name, for its ``__init__.py``)."""
    found = {}
    for name, folder in packages:
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((name, *parts))] = path
    return found


def _is_face(path: Path) -> bool:
    """A package's ``__init__.py`` that merely re-exports: it defines no public name of its
    own (only imports, ``__all__`` and private helpers such as a `__module__` fixer)."""
    if path.name != "__init__.py":
        return False
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        else:
            continue  # a docstring, an import, a call of a private helper
        if any(n != "__all__" and not n.startswith("_") for n in names):
            return False
    return True


def _imported_names(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """What one statement imports, as dotted names: relative imports resolved, and
    ``from pkg import name`` as ``pkg.name`` (kept only if that is a module; see below)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    source = node.module or ""
    if node.level:
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - (node.level - 1)])
        source = f"{base}.{source}" if source else base
    return [f"{source}.{alias.name}" for alias in node.names]


def import_graph(root: Path) -> dict[str, dict[str, Import]]:
    """The import graph of every package under ``root``, from the source: every ``import``
    and ``from ... import`` anywhere in a module (TYPE_CHECKING blocks and function bodies
    included), each to the deepest module it names. Edges into a face (`_is_face`) are left
    out: a package's front is not a layer of its own."""
    modules = _module_files(_packages(root))
    graph: dict[str, dict[str, Import]] = {name: {} for name in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for name in _imported_names(module, path, node):
                while name not in modules and "." in name:
                    name = name.rpartition(".")[0]  # `pkg.attr` is an import of `pkg`
                if name not in modules or name == module or _is_face(modules[name]):
                    continue
                where = Import(path.relative_to(root), node.lineno, ast.unparse(node))
                graph[module].setdefault(name, where)
    return graph


def import_circles(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """The strongly connected parts of ``graph`` with more than one module (Tarjan's
    algorithm, iterative): each is one or more circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    circles.append(sorted(part))
    return circles


def _describe(graph: dict[str, dict[str, Import]], circle: list[str]) -> str:
    edges = [
        f"    {a} -> {b}  ({i.path}:{i.line}: {i.text})"
        for a in circle
        for b, i in sorted(graph[a].items())
        if b in circle
    ]
    return f"circle through {', '.join(circle)}:\n" + "\n".join(edges)


def test_import_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The graph builder itself: relative, TYPE_CHECKING and function-local imports count,
    ``from pkg import mod`` is an edge to the module, and a face is no node to reach."""
    pkg = tmp_path / "dista_proto"
    pkg.mkdir()
    (tmp_path / "dista_runtime").mkdir()
    (tmp_path / "bindings").mkdir()
    (tmp_path / "dista_runtime" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from ._a import A\n__all__ = ['A']\n")
    (pkg / "_a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._b import B\nA = 1\n"
    )
    (pkg / "_b.py").write_text("def f():\n    from dista_proto import _c\nB = 2\n")
    (pkg / "_c.py").write_text("from . import _a, A\nimport dista_proto\n")
    graph = import_graph(tmp_path)
    assert set(graph["dista_proto._a"]) == {"dista_proto._b"}
    assert set(graph["dista_proto._b"]) == {"dista_proto._c"}
    assert set(graph["dista_proto._c"]) == {"dista_proto._a"}  # not the face
    assert import_circles(graph) == [["dista_proto._a", "dista_proto._b", "dista_proto._c"]]
    (pkg / "_c.py").write_text("import dista_proto\n")  # only the face
    assert import_circles(import_graph(tmp_path)) == []
    (pkg / "__init__.py").write_text("from ._a import A\nB = A\n")  # no longer a face
    assert import_circles(import_graph(tmp_path)) == [
        ["dista_proto", "dista_proto._a", "dista_proto._b", "dista_proto._c"]
    ]


def test_no_import_circles() -> None:
    """No module reaches itself through imports, in any package: the graph an import-graph
    tool draws, TYPE_CHECKING imports included (a circle there is still one to a reader)."""
    graph = import_graph(ROOT)
    circles = [_describe(graph, circle) for circle in import_circles(graph)]
    assert circles == [], _listed("import circles", circles)


#: The runtime's wings from the top down (issue 23): a module imports only from its own
#: tier or the ones below. "" is `dista_runtime/__init__.py`; the fronts nothing inside
#: imports are on top, and `loops` (which binding runs) sits just above the network wing.
WING_TIERS = (
    ("", "binding", "cli", "joblib", "mypy_plugin"),
    ("_cli", "_joblib", "_mypy", "_pools"),
    ("_api", "_dashboard"),
    ("_hosts",),
    ("_local", "_session", "_execution"),
    ("_tls", "_values", "loops"),
    ("_net",),
    ("_errors", "_clock", "logs"),
)


def _wing(module: str) -> str | None:
    """The runtime wing (or front) ``module`` belongs to; None outside the runtime."""
    if module != "dista_runtime" and not module.startswith("dista_runtime."):
        return None
    return module.split(".")[1] if "." in module else ""


def test_runtime_wings_import_one_way() -> None:
    tier = {wing: n for n, wings in enumerate(WING_TIERS) for wing in wings}
    graph = import_graph(ROOT)
    unplaced = sorted({w for m in graph if (w := _wing(m)) is not None and w not in tier})
    assert unplaced == [], f"place these in WING_TIERS: {unplaced}"
    offenders = [
        f"{i.path}:{i.line}: {i.text}  ({_wing(a) or 'dista_runtime'} imports {_wing(b)})"
        for a, targets in sorted(graph.items())
        for b, i in sorted(targets.items())
        if (wa := _wing(a)) is not None and (wb := _wing(b)) is not None and tier[wb] < tier[wa]
    ]
    assert offenders == [], _listed("imports up the wing order", offenders)


def test_the_runtime_front_stays_small() -> None:
    """A newcomer sees the fronts and the wings, not a flat folder: at most 16 modules
    directly in dista_runtime/ (there were 54), the rest in wings (subpackages)."""
    flat = sorted(p.name for p in (ROOT / "dista_runtime").glob("*.py"))
    assert len(flat) <= 16, flat
    wings = sorted(
        p.name for p in (ROOT / "dista_runtime").iterdir() if (p / "__init__.py").exists()
    )
    assert all(w.startswith("_") for w in wings), f"wings are private: {wings}"
