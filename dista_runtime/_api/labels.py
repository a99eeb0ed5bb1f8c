"""What the timeline calls one task: a per-call name (``f.options(name=...)``) or, for a
callable run undecorated (`remote_call`: an executor's, a pool's), its function's name.

The head's timeline records carry task IDs, and every task travelling by value shares one
("by-value task"); they also carry their object ID, so this process keeps a name per object
it submitted with one, which `chrome_trace` shows before any name by task ID. The newest
`KEPT` names are kept (the head's timeline holds 100,000 records): a name older than that
falls back to the task ID's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Final

__all__ = ["KEPT", "label", "label_of"]

KEPT: Final = 100_000
_lock = threading.Lock()
_labels: OrderedDict[int, str] = OrderedDict()


def label(object_id: int, name: str) -> None:
    """The timeline shows task ``object_id`` (its first result) as ``name``."""
    with _lock:
        _labels[object_id] = name
        if len(_labels) > KEPT:
            _labels.popitem(last=False)


def label_of(object_id: int) -> str | None:
    """The name `label` gave task ``object_id``, if this process still keeps it."""
    return _labels.get(object_id)
