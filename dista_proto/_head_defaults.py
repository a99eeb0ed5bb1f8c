"""The head's default settings: what `Head` takes when its binding says nothing.

Each is a keyword of `Head` (and most a `dista head` flag or a ``DISTA_*`` variable in the
runtime); they live apart from the head so that the router stays a router.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "HELLO_DEADLINE_NS",
    "HELLO_IDLE_NS",
    "INLINE_CAP_BYTES",
    "LIVENESS_NS",
    "MAX_RETRIES",
    "NO_WORKER_GRACE_NS",
    "PREFETCH",
    "RECOVERY_GRACE_NS",
    "TIMELINE_CAP",
    "WORKER_SLOTS",
]

#: The default cap on timeline records the head keeps; the oldest are dropped first.
TIMELINE_CAP: Final = 100_000
#: How long tasks wait for a worker with their driver's registry before they fail.
NO_WORKER_GRACE_NS: Final = 10_000_000_000
#: Tasks each worker gets at once: more than one hides the round trip between a result and
#: the next task.
WORKER_SLOTS: Final = 2
#: Extra tasks a worker may get when they are known to be short (see `_durations`).
PREFETCH: Final = 32
#: Times a task is retried after losing its worker (a task ID may carry its own limit).
MAX_RETRIES: Final = 3
#: A link that has not said hello this long after connecting is closed.
HELLO_DEADLINE_NS: Final = 10_000_000_000
#: A link that has not said hello and read nothing this long is closed.
HELLO_IDLE_NS: Final = 5_000_000_000
#: Bytes of inline results the head keeps for one driver; past it, its results are stored on
#: workers (DISTA_HEAD_INLINE_CAP).
INLINE_CAP_BYTES: Final = 256 << 20
#: A worker the head has not heard from for this long is lost (workers beat every 5 s).
LIVENESS_NS: Final = 30_000_000_000
#: How long a claim waits for the worker holding its object to rejoin, a holding for its
#: driver to claim it, a silent worker's objects for it to come back, and an away driver
#: to resume.
RECOVERY_GRACE_NS: Final = 30_000_000_000
