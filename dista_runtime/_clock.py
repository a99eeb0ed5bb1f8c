"""The runtime's one clock: monotonic for every deadline, the wall clock for stamps only.

Every ``now`` the runtime gives a core, and every stamp it passes one (a task's start and
end), is `now()`: monotonic nanoseconds, which no NTP step, suspended laptop or operator's
``date -s`` moves. The cores' deadlines (liveness, grace, hello, drain, heartbeats) are
computed from those stamps, and so follow the same clock as the loop timers that wake them.

People read stamps on the wall clock (a timeline, a trace): `wall_offset_ns` is read once,
when a core is built, and the core adds it where a stamp leaves it (`dista_proto._core`).
A step of the wall clock after that shifts no stamp: the timeline stays consistent with
itself, off by the step until the process restarts, which is the lesser evil.
"""

from __future__ import annotations

import time

__all__ = ["now", "wall_offset_ns"]

#: Monotonic nanoseconds: every ``now`` given to a core, every stamp passed to one.
now = time.monotonic_ns


def wall_offset_ns() -> int:
    """Wall-clock minus monotonic nanoseconds, now: what turns a stamp into wall time."""
    return time.time_ns() - time.monotonic_ns()
