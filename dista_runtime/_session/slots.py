"""What a session keeps per object it holds, and what it needs of its binding: shared by
`_session` (tasks and refs) and `_session_actors` (actors), so neither imports the other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

from dista_proto.frame import Bytes

__all__ = ["FAILED", "LOCATED", "PENDING", "VALUE", "SessionIO", "Slot"]

PENDING: Final = 0
LOCATED: Final = 1
VALUE: Final = 2
FAILED: Final = 3


class SessionIO(Protocol):
    """What the binding provides: a way onto its I/O thread."""

    def schedule_flush(self) -> None:
        """Soon, on the I/O thread, call `Session.flush` and carry out what it returns."""

    def in_io_thread(self) -> bool: ...


class Slot:
    """One object a session holds: its state, its value or failure, who waits for it."""

    __slots__ = ("callbacks", "fetching", "state", "value", "waiters")

    def __init__(self) -> None:
        self.state = PENDING
        self.value: Bytes | str | None = None
        self.fetching = False
        #: Who waits for its value (located, it is fetched for them), and who waits only
        #: for it to be done (`dista.wait`: located is done, and the value stays where it
        #: lies); None until someone does.
        self.callbacks: list[Callable[[], object]] = []
        self.waiters: list[Callable[[], object]] | None = None
