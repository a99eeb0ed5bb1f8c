"""What a binding uses of the runtime: one public, typed surface, so that no binding
reaches into the runtime's private modules.

Besides this module, a binding builds on `dista_runtime.engine` (carrying out a core's
decisions over its streams), `dista_runtime.execution` (where a worker's tasks run) and
`dista_runtime.loops` (how the runtime finds it by name).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from . import _session
from ._address import format_head, unix_path
from ._context import Context, clear, install
from ._errors import DistaError
from ._memory import allocate, ready
from ._registry import BY_VALUE_ID, PUT_ID, snapshot
from ._session import Session, SessionIO

__all__ = [
    "PORTABLE_TASKS",
    "Context",
    "DistaError",
    "Session",
    "SessionIO",
    "allocate",
    "clear_context",
    "format_head",
    "install_context",
    "install_worker_hooks",
    "ready",
    "registry_snapshot",
    "unix_path",
]

#: Task IDs any worker runs, whatever its registry: by-value functions and `dista.put`.
PORTABLE_TASKS: tuple[int, ...] = (BY_VALUE_ID, PUT_ID)

#: The task names this process knows by name now, and their registry hash.
registry_snapshot = snapshot
#: Make ``context`` this process's (or this thread's) connection to a cluster.
install_context = install
#: Forget the installed context (``clear(context)``: only if it is that one).
clear_context = clear


def install_worker_hooks(
    on_block: Callable[[], AbstractContextManager[object]],
    on_await: Callable[[], AbstractContextManager[object]],
    on_use: Callable[[], None],
) -> None:
    """In a worker process: what a task's session calls around a blocking wait (``on_block``:
    lend its slot), around an ``await`` of a ref (``on_await``), and before every submit
    or wait (``on_use``: stop a task that runs inline)."""
    _session.on_block = on_block
    _session.on_await = on_await
    _session.on_use = on_use
