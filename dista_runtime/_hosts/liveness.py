"""How long silence, lost heads and drains may last: the recovery settings, read in one way.

Kept apart from the hosts so that reading them imports nothing else: a head must not import
the worker's machinery (a gevent worker patches its process before that machinery loads).
"""

from __future__ import annotations

import os
from typing import Final

__all__ = [
    "DRAIN_ENV",
    "LIVENESS_ENV",
    "MIN_LIVENESS_S",
    "RECONNECT_ENV",
    "RECOVERY_ENV",
    "check_all",
    "check_liveness",
    "drain_timeout",
    "heartbeat_ns",
    "liveness_s",
    "reconnect_timeout",
    "seconds_env",
]

#: Seconds after which a head treats a worker it has not heard from as lost (the head
#: reads it; a worker beats several times within it).
LIVENESS_ENV: Final = "DISTA_LIVENESS_TIMEOUT"
DEFAULT_LIVENESS_S: Final = 30.0
#: The shortest liveness timeout a head takes. Workers beat every second, faster when their
#: own DISTA_LIVENESS_TIMEOUT is short: below about 5 s, give the workers the same setting.
MIN_LIVENESS_S: Final = 2.0
#: Seconds a draining worker waits for its objects to be adopted before it leaves anyway.
DRAIN_ENV: Final = "DISTA_DRAIN_TIMEOUT"
#: Seconds a driver or worker dials a lost head again before it gives up.
RECONNECT_ENV: Final = "DISTA_RECONNECT_TIMEOUT"
DEFAULT_RECONNECT_S: Final = 60.0
#: Seconds what a lost peer left behind waits for it at the head (`dista head
#: --recovery-grace`, which wins over it).
RECOVERY_ENV: Final = "DISTA_RECOVERY_GRACE"
DEFAULT_DRAIN_S: Final = 120.0


def seconds_env(env: str, default: float) -> float:
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
    return seconds_env(LIVENESS_ENV, DEFAULT_LIVENESS_S)


def heartbeat_ns() -> int:
    """How often this worker tells the head it is alive: every second (a 25-byte frame), or
    a sixth of this process's liveness timeout if that is shorter, so that a head given a
    short timeout by flag alone (its workers not told) still hears them in time."""
    liveness = liveness_s()
    beat = 1.0 if liveness == 0 else min(1.0, liveness / 6)
    return int(beat * 1e9)


def check_liveness(seconds: float) -> float:
    """A head's liveness timeout: 0 (off) or at least `MIN_LIVENESS_S`."""
    if seconds != 0 and seconds < MIN_LIVENESS_S:
        raise ValueError(
            f"the liveness timeout must be 0 (off) or at least {MIN_LIVENESS_S:g} s, not "
            f"{seconds:g} (workers beat every second)"
        )
    return seconds


def check_all() -> None:
    """Read every setting now, so that a bad one is a clear error at start, not a
    traceback when it is first needed (a drain, a lost head)."""
    from .._net.limits import fetch_grant_wait_ns, keepalive_interval
    from .._session.budget import inflight_budget

    check_liveness(liveness_s())
    drain_timeout()
    reconnect_timeout()
    keepalive_interval()
    fetch_grant_wait_ns()
    inflight_budget()  # a task's session is a driver: workers read it too


def reconnect_timeout() -> float:
    """``DISTA_RECONNECT_TIMEOUT`` (60 s if unset)."""
    return seconds_env(RECONNECT_ENV, DEFAULT_RECONNECT_S)


def drain_timeout() -> float:
    """``DISTA_DRAIN_TIMEOUT`` (120 s if unset)."""
    return seconds_env(DRAIN_ENV, DEFAULT_DRAIN_S)
