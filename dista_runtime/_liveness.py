"""How long silence and drains may last: the settings the head and workers share.

Kept apart from the hosts so that reading them imports nothing else: a head must not import
the worker's machinery (a gevent worker patches its process before that machinery loads).
"""

from __future__ import annotations

import os
from typing import Final

__all__ = [
    "DRAIN_ENV",
    "LIVENESS_ENV",
    "drain_timeout",
    "heartbeat_ns",
    "liveness_s",
]

#: Seconds after which a head treats a worker it has not heard from as lost (the head
#: reads it; a worker beats several times within it).
LIVENESS_ENV: Final = "DISTA_LIVENESS_TIMEOUT"
DEFAULT_LIVENESS_S: Final = 30.0
#: Seconds a draining worker waits for its objects to be adopted before it leaves anyway.
DRAIN_ENV: Final = "DISTA_DRAIN_TIMEOUT"
DEFAULT_DRAIN_S: Final = 120.0


def _seconds(env: str, default: float) -> float:
    raw = os.environ.get(env, "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{env} must be a number of seconds, not {raw!r}") from None
    if value < 0:
        raise ValueError(f"{env} must be at least 0 seconds, not {raw!r}")
    return value


def liveness_s() -> float:
    """``DISTA_LIVENESS_TIMEOUT`` (30 s if unset; 0 turns liveness checks off)."""
    return _seconds(LIVENESS_ENV, DEFAULT_LIVENESS_S)


def heartbeat_ns() -> int:
    """How often this worker tells the head it is alive: a sixth of the liveness timeout,
    at most 5 s, so a few lost or late beats never make a live worker look silent."""
    liveness = liveness_s()
    beat = 5.0 if liveness == 0 else min(5.0, liveness / 6)
    return int(beat * 1e9)


def drain_timeout() -> float:
    """``DISTA_DRAIN_TIMEOUT`` (120 s if unset)."""
    return _seconds(DRAIN_ENV, DEFAULT_DRAIN_S)
