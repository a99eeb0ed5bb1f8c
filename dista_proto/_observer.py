"""The observer: `dista status`, `timeline` and `stop` as a role machine like the others.

Theory of operation
-------------------
Link `HEAD_LINK` is the head. `start` says hello (an observer's hello carries no registry
that matters); `ask` sends a question: status, timeline, or stop; or a dashboard's labels
and snapshots (Dista's kinds, docs/protocol.md "Extensions: the dashboard"). Each answer
the head sends becomes an `Answered` decision, in the order asked. An error frame from the head is
its refusal (`Refused`); a lost connection ends the observer (`Exit`), as does the head's
answer to stop, which is to close. An observer owns no objects and takes no tasks.
"""

from __future__ import annotations

from . import frame as F
from ._conventions import HEAD_LINK
from ._decisions import Answered, Decision, Exit, Refused
from ._errors import LocalProtocolError
from ._events import Error, Event, Hello, Labels, Snapshot, Status, Stop, Timeline
from ._links import Links
from ._roles import Role
from .frame import Bytes

__all__ = ["Observer"]

_QUESTIONS = (Status, Timeline, Stop, Labels, Snapshot)
_ANSWERS = (Status, Timeline, Labels, Snapshot)


class Observer:
    def __init__(self) -> None:
        self._links = Links()
        self.closed_reason: str = ""

    # -- the binding's side -------------------------------------------------------------------

    def start(self, now: int) -> None:
        """The connection to the head is up: say hello."""
        self._links.open(Role.OBSERVER, HEAD_LINK)
        self._links.send(HEAD_LINK, Hello(F.ROLE_OBSERVER))

    def ask(self, request: Status | Timeline | Stop | Labels | Snapshot, now: int) -> None:
        """Ask the head ``request``; its answer comes as `Answered` (stop: the head closes).
        A dashboard asks labels and snapshots (Dista's kinds 42 and 44) again and again."""
        if not isinstance(request, _QUESTIONS):
            raise LocalProtocolError(
                f"an observer asks status, timeline, stop, labels or snapshot, not {request}"
            )
        self._links.send(HEAD_LINK, request)

    def connection_made(self, now: int) -> int:
        """A peer connected to us: an observer listens for nobody (it dials the head), so
        this is its caller's mistake."""
        raise LocalProtocolError("an observer takes no incoming connections: it only dials")

    def receive_data(self, link: int, data: Bytes, now: int) -> None:
        events, error = self._links.receive(link, data)
        self._received(events, error, now)

    def get_buffer(self, link: int, sizehint: int = -1) -> memoryview:
        """Where to read ``link``'s next bytes (`Connection.get_buffer`)."""
        return self._links.get_buffer(link, sizehint)

    def buffer_updated(self, link: int, nbytes: int, now: int) -> None:
        """`receive_data` for ``nbytes`` read into the view `get_buffer` gave."""
        events, error = self._links.buffer_updated(link, nbytes)
        self._received(events, error, now)

    def connection_lost(self, link: int, now: int) -> None:
        self._links.forget(link)
        self.closed_reason = self.closed_reason or "the head closed the connection"
        self._links.queue(Exit(self.closed_reason))

    def decisions(self) -> list[Decision]:
        return self._links.decisions()

    def next_deadline(self) -> int | None:
        """When `on_timer` has work to do: never, for now (no timeouts of its own)."""
        return None

    def on_timer(self, now: int) -> None:
        """Time passed (see `next_deadline`)."""

    # -- answers ----------------------------------------------------------------------------

    def _received(self, events: list[Event], error: str | None, now: int) -> None:
        for event in events:
            if isinstance(event, Error):
                self.closed_reason = f"the head refused: {event.message}"
                self._links.queue(Refused(event.message))
            elif isinstance(event, _ANSWERS):
                self._links.queue(Answered(event))
        if error is not None:
            self._links.close(HEAD_LINK, f"protocol error: {error}")
            self.connection_lost(HEAD_LINK, now)
