"""Which binding runs Dista in this process: chosen by name at run time, as anyio chooses
its backend, so that the runtime imports no binding by name.

``dista.init(loop=...)``, ``DISTA_LOOP`` and every CLI role's ``--loop`` name one of
`LOOPS`. Without a name, the process's own loop decides: a gevent-patched process gets
gevent, a call from inside trio gets the anyio binding on trio, anything else asyncio
(with uvloop when it is installed), each only when its binding is installed (`available`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Final, TypeVar

from ._errors import DistaError

if TYPE_CHECKING:
    from ._net.loop import Background, Latch, Loop

__all__ = ["LOOPS", "available", "background", "binding", "choose", "run"]

T = TypeVar("T")

#: Loop names, and the binding package that runs each.
_PACKAGES: Final = {
    "asyncio": "dista_asyncio",
    "anyio": "dista_anyio",
    "trio": "dista_anyio",
    "gevent": "dista_gevent",
}
LOOPS: Final = tuple(_PACKAGES)
#: What the runtime calls on a binding (docs/bindings.md): a role's main (``run``) and a
#: loop for blocking callers (``background``); an async one also waits for a latch
#: (``wait``: what ``await ref`` does on its loop).
_API: Final = ("background", "run")


def _load(name: str) -> ModuleType | None:
    try:
        module = _import(name)
    except ImportError:
        return None
    return module if all(hasattr(module, f) for f in _API) else None


def _import(name: str) -> ModuleType:
    return importlib.import_module(_PACKAGES[name])


def available(name: str) -> bool:
    """Whether the binding for loop ``name`` is installed and complete."""
    return name in _PACKAGES and _load(name) is not None


def _detected() -> str:
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("socket"):
        return "gevent"
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_root_task()
        except RuntimeError:
            pass  # trio is imported, but this is not a trio run
        else:
            return "trio"  # the anyio binding, on trio's loop
    return "asyncio"


def choose(loop: str | None = None) -> str:
    """The loop's name: ``loop``, else ``DISTA_LOOP``, else the process's own (see above)."""
    name = loop or os.environ.get("DISTA_LOOP") or ""
    if name:
        if name not in _PACKAGES:
            raise DistaError(f"unknown loop {name!r}: choose one of {', '.join(LOOPS)}")
        return name
    detected = _detected()
    return detected if available(detected) else "asyncio"


def binding(loop: str | None = None) -> ModuleType:
    """The binding package that runs loop ``loop`` (see `choose`)."""
    name = choose(loop)
    try:
        module = _import(name)
    except ImportError as e:
        missing = f"it needs {e.name}, " if e.name and e.name != _PACKAGES[name] else ""
        raise DistaError(
            f"Dista's {name} binding ({_PACKAGES[name]}) is not available in this "
            f"installation ({missing}pip install 'dista[{name}]'), or use loop='asyncio' "
            "(DISTA_LOOP=asyncio, --loop asyncio)"
        ) from None
    if not all(hasattr(module, f) for f in _API):
        raise DistaError(f"{_PACKAGES[name]} is not a complete Dista binding: use loop='asyncio'")
    return module


def run(
    start: Callable[[Loop], Latch[T]],
    stop: Callable[[], object] | None = None,
    loop: str | None = None,
) -> T:
    """A role's main on loop ``loop`` (see `choose`): ``start`` begins it on the loop, and
    the loop runs until the latch it gives is settled; SIGINT and SIGTERM call ``stop``."""
    name = choose(loop)
    result: T = binding(name).run(start, stop, loop=name)
    return result


def background(loop: str | None = None) -> Background:
    """A loop of ``loop`` (see `choose`) serving blocking callers (`dista.init`)."""
    name = choose(loop)
    served: Background = binding(name).background(loop=name)
    return served
