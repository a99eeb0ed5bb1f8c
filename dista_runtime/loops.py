"""Which binding runs Dista in this process: chosen by name at run time, as anyio chooses
its backend, so that the runtime imports no binding by name.

``dista.init(loop=...)``, ``DISTA_LOOP`` and every CLI role's ``--loop`` name one of
`LOOPS`. Without a name, the process's own loop decides: a gevent-patched process gets
gevent, a call from inside trio gets the anyio binding on trio, anything else asyncio
(with uvloop when it is installed), each only when its binding is installed (`available`).

A binding package names its `Backend` subclass ``backend_class`` (anyio's convention);
`backend` loads it and checks it by type: a subclass of `Backend` with no abstract method
left and a `Loop` class. Anything else is not a binding, and says so.
"""

from __future__ import annotations

import importlib
import inspect
import os
import signal
import sys
from collections.abc import Callable
from typing import Final, TypeVar

from ._errors import DistaError
from ._net.contract import Backend, Background, Loop
from ._net.latch import Latch

__all__ = ["LOOPS", "available", "background", "backend", "choose", "run"]

T = TypeVar("T")

#: Loop names, and the binding package that runs each.
_PACKAGES: Final = {
    "asyncio": "dista_asyncio",
    "anyio": "dista_anyio",
    "trio": "dista_anyio",
    "gevent": "dista_gevent",
}
LOOPS: Final = tuple(_PACKAGES)


def _load(name: str) -> type[Backend] | None:
    """Loop ``name``'s backend class, if its package is installed and names a complete
    one; ImportError if the package (or what it needs) is not installed."""
    found = getattr(importlib.import_module(_PACKAGES[name]), "backend_class", None)
    if (
        isinstance(found, type)
        and issubclass(found, Backend)
        and not inspect.isabstract(found)
        and isinstance(getattr(found, "loop_type", None), type)
    ):
        return found
    return None


def available(name: str) -> bool:
    """Whether the binding for loop ``name`` is installed and complete."""
    try:
        return name in _PACKAGES and _load(name) is not None
    except ImportError:
        return False


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


def backend(loop: str | None = None) -> type[Backend]:
    """The backend of the binding that runs loop ``loop`` (see `choose`)."""
    name = choose(loop)
    try:
        found = _load(name)
    except ImportError as e:
        missing = f"it needs {e.name}, " if e.name and e.name != _PACKAGES[name] else ""
        raise DistaError(
            f"Dista's {name} binding ({_PACKAGES[name]}) is not available in this "
            f"installation ({missing}pip install 'dista[{name}]'), or use loop='asyncio' "
            "(DISTA_LOOP=asyncio, --loop asyncio)"
        ) from None
    if found is None:
        raise DistaError(f"{_PACKAGES[name]} is not a complete Dista binding: use loop='asyncio'")
    return found


def run(
    start: Callable[[Loop], Latch[T]],
    stop: Callable[[], object] | None = None,
    loop: str | None = None,
    *,
    on_sigterm: Callable[[], object] | None = None,
) -> T:
    """A role's main on loop ``loop`` (see `choose`): ``start`` begins it on the loop, and
    the loop runs until the latch it gives is settled; SIGINT and SIGTERM call ``stop``
    (SIGTERM calls ``on_sigterm`` instead, if given)."""
    name = choose(loop)
    if stop is None:
        return backend(name).run(start, None, loop=name)
    stops: dict[int, Callable[[], object]] = {
        signal.SIGINT: stop,
        signal.SIGTERM: on_sigterm or stop,
    }
    return backend(name).run(start, lambda signum: stops[signum](), loop=name)


def background(loop: str | None = None) -> Background:
    """A loop of ``loop`` (see `choose`) serving blocking callers (`dista.init`)."""
    name = choose(loop)
    return backend(name).background(loop=name)
