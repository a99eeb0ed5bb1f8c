"""Task IDs and the registry hash: stable numbers the head and workers agree on.

A task's ID is a u64 hash of ``module:qualname`` in its low 60 bits; the top 4 bits carry its
retry limit after a lost worker (see `dista_proto.retry_limit`: 0 is the head's default, n is
n - 1 retries). The registry hash covers every registered name, so the head sends a driver's
work only to workers that registered the same tasks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Final

import dista_proto as dp

__all__ = [
    "ACTOR_BY_VALUE_NAME",
    "BY_VALUE_NAME",
    "MAX_RETRIES_LIMIT",
    "PUT_NAME",
    "method_id",
    "name_hash",
    "registry_hash",
    "task_id",
]

#: The highest per-task retry limit the task ID can carry.
MAX_RETRIES_LIMIT: Final = 14
#: The well-known name that functions travelling by value run under.
BY_VALUE_NAME: Final = "dista:by-value"
#: The well-known name of `dista.put`'s task: its argument is an encoded value, which the
#: worker keeps as the task's result, as it came.
PUT_NAME: Final = "dista:put"
#: The well-known type name of actors whose class travels by value (from ``__main__``).
ACTOR_BY_VALUE_NAME: Final = "dista:actor-by-value"


def name_hash(name: str) -> int:
    digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & dp.TASK_ID_MASK


def task_id(name: str, max_retries: int | None = None) -> int:
    """The u64 task ID for ``name``, carrying ``max_retries`` (None: the head's default)."""
    if max_retries is not None and not 0 <= max_retries <= MAX_RETRIES_LIMIT:
        raise ValueError(f"max_retries must be in [0, {MAX_RETRIES_LIMIT}], not {max_retries}")
    return dp.with_retry_limit(name_hash(name), max_retries)


def registry_hash(names: Iterable[str]) -> int:
    """One u64 for a set of task names; the same set gives the same hash in every process."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(set(names)):
        h.update(name.encode())
        h.update(b"\0")
    return int.from_bytes(h.digest(), "little")


def method_id(method: str) -> int:
    """The task ID of an actor's method ``method``: from its name alone, since the worker
    knows the actor's class (a class sent by value may not keep its qualified name)."""
    return name_hash(f"dista:method:{method}")
