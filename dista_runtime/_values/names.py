"""What this process calls the IDs it sends: the labels its driver tells the head.

Tasks, actor classes and their methods travel as 64-bit hashes; a person reads
``module.function``. Every name this process learns (a task registered, an actor class
defined, a function pickled to travel by value, an actor created) is added here with a
generation count; a session tells its head what is new at its next flush
(`Session.decisions`), and all of it again after each hello (`dista_proto._telling`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

__all__ = [
    "LABEL_ATTRIBUTE",
    "MAX_NAMES",
    "add",
    "entries",
    "generation",
    "label_of",
    "qualified",
]

#: The most labels a process keeps (its head keeps as many, from every driver).
MAX_NAMES: Final = 1 << 16

_lock = threading.Lock()
_labels: dict[int, str] = {}
_generation = 0


#: The attribute a function Dista makes to run a user's (a pool's chunk of calls) carries
#: its label in: the user's function's name, not the wrapper's.
LABEL_ATTRIBUTE: Final = "__dista_label__"


def label_of(fn: Callable[..., Any] | type) -> str:
    """``module.qualname`` of a function or class (a partial: of its function), or the
    label it carries (`LABEL_ATTRIBUTE`)."""
    own = getattr(fn, LABEL_ATTRIBUTE, None)
    return own if isinstance(own, str) else qualified(fn)


def qualified(fn: Callable[..., Any] | type) -> str:
    """``module.qualname`` of a function or class (a partial: of its function)."""
    target = getattr(fn, "func", fn)
    module = getattr(target, "__module__", None) or "?"
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}.{qualname}"


def add(ident: int, label: str) -> None:
    """``ident`` is called ``label`` (the first label given for an ID stays)."""
    global _generation
    if ident in _labels:
        return
    with _lock:
        if ident not in _labels and len(_labels) < MAX_NAMES:
            _labels[ident] = label
            _generation += 1


def generation() -> int:
    """A count that changes whenever a label is added."""
    return _generation


def entries() -> list[tuple[int, str]]:
    with _lock:
        return list(_labels.items())
