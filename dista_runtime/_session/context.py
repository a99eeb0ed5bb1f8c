"""The process's current connection to a cluster: set by `init`, or by a worker for its tasks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._errors import DistaError

if TYPE_CHECKING:
    from .session import Session

__all__ = ["Context", "clear", "current", "install", "session"]


@dataclass
class Context:
    session: Session
    names: frozenset[str]  # tasks the workers know by registry ID
    address: tuple[str, int]
    close: list[Callable[[], object]] = field(default_factory=list)


_lock = threading.Lock()
_current: Context | None = None


def install(context: Context) -> None:
    global _current
    with _lock:
        if _current is not None and not _current.session.closed:
            raise DistaError("dista is already initialised in this process: call shutdown() first")
        _current = context


def clear(context: Context | None = None) -> None:
    global _current
    with _lock:
        if context is None or _current is context:
            _current = None


def current() -> Context | None:
    return _current


#: Set by `dista run`: start the local cluster on first use instead of failing.
auto_init: Callable[[], object] | None = None


def session() -> Context:
    context = _current
    if context is None and auto_init is not None:
        auto_init()
        context = _current
    if context is None:
        raise DistaError(
            "dista is not initialised: call dista.init() (a local cluster) or "
            "dista.init(address='host:port') first"
        )
    if context.session.closed:
        raise DistaError(f"the Dista session is closed ({context.session.closed}): call init()")
    return context
