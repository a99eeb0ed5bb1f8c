"""The shape every role machine shares: what a runtime feeds a core, and what it takes back.

Theory of operation
-------------------
`Head`, `Worker`, `Driver` and `Observer` are each a `Core`. A runtime holds one and, for
every input, calls one method with the time (``now``), then, in one place, takes the
core's `decisions` and carries them out in order, and keeps one timer at the core's
`next_deadline`, calling `on_timer` when it passes (aioquic's ``transmit``,
``get_timer`` and ``handle_timer``). Inputs:

- a peer connected to us: `connection_made` gives its link number (a driver or an
  observer listens for nobody: they refuse it with `LocalProtocolError`);
- bytes arrived on a link: `receive_data`, or read into place: `get_buffer` then
  `buffer_updated`;
- a link ended: `connection_lost`;
- time passed: `on_timer`.

``now`` and every deadline are nanoseconds of one monotonic clock: a core only subtracts
and compares them, so a wall clock stepped by hours (NTP, a suspended laptop, an operator)
changes no timeout. The wall clock appears only in stamps that leave a core for people
(a worker's spans, the head's timeline records): a core given ``wall_offset_ns`` (wall
minus monotonic, read once by its runtime) adds it to a stamp where it leaves, once.
"""

from __future__ import annotations

from typing import Protocol

from ._decisions import Decision
from .frame import Bytes

__all__ = ["Core", "to_wall"]


class Core(Protocol):
    """A role machine as its runtime drives it (see the module docstring)."""

    def connection_made(self, now: int) -> int:
        """A peer connected: the link number to use for it from now on."""
        ...

    def receive_data(self, link: int, data: Bytes, now: int) -> None:
        """Bytes read from ``link`` (b"" for its end)."""
        ...

    def get_buffer(self, link: int, sizehint: int = -1) -> memoryview:
        """Where to read ``link``'s next bytes; `buffer_updated` takes them."""
        ...

    def buffer_updated(self, link: int, nbytes: int, now: int) -> None:
        """``nbytes`` were read into the view `get_buffer` gave for ``link``."""
        ...

    def connection_lost(self, link: int, now: int) -> None:
        """``link`` ended, whoever closed it."""
        ...

    def decisions(self) -> list[Decision]:
        """What to do now, in order: everything decided since the last call."""
        ...

    def next_deadline(self) -> int | None:
        """When `on_timer` has work to do (monotonic nanoseconds, as ``now``), or None."""
        ...

    def on_timer(self, now: int) -> None:
        """Time passed: do what was due by ``now``."""
        ...


def to_wall(stamp: int, wall_offset_ns: int) -> int:
    """A monotonic ``stamp`` as wall-clock nanoseconds; 0 (unknown) stays 0."""
    return stamp + wall_offset_ns if stamp else 0
