"""The links a role machine holds, and the decisions queued for its binding.

Every role machine owns a set of `Connection`s keyed by link number. Sending marks a link
dirty; `decisions()` turns every dirty link's buffers into one `Write` (so a burst of frames
becomes one write), after the other decisions queued before it, in order. Bytes come in
with `receive` or, read into place, with `get_buffer` and `buffer_updated`.

Sending to a link that is gone, or whose connection has closed its side (it refused the
peer, or the binding could not write), drops the frame: a role machine handling the good
frames that came before a bad one in the same read may still answer them.
"""

from __future__ import annotations

from typing import Final

from ._connection import READ_SIZE, Connection, ConnectionState
from ._decisions import Close, Decision, Write
from ._encode import Encoded
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import Event
from ._roles import Role
from .frame import Bytes

__all__ = ["Links"]

_DONE: Final = (ConnectionState.CLOSED, ConnectionState.ERROR)


class Links:
    """Link bookkeeping shared by `Head`, `Worker` and `Driver`."""

    def __init__(self) -> None:
        self._conns: dict[int, Connection] = {}
        self._dirty: dict[int, None] = {}  # insertion-ordered set
        self._queued: list[Decision] = []
        self._next_link = 1
        self._connecting: set[int] = set()  # links whose writes wait for `connected`
        self._scrap: memoryview | None = None  # where bytes for a gone link are read to

    def open(self, role: Role, link: int | None = None, *, connecting: bool = False) -> int:
        if link is None:
            link = self._next_link
            self._next_link += 1
        self._conns[link] = Connection(role)
        if connecting:
            self._connecting.add(link)
        return link

    def connected(self, link: int) -> None:
        if link in self._connecting:
            self._connecting.discard(link)
            self._dirty[link] = None

    def conn(self, link: int) -> Connection | None:
        return self._conns.get(link)

    def send(self, link: int, event: Event) -> None:
        conn = self._conns.get(link)
        if conn is None:
            return  # the link is gone; whatever it was owed is moot
        try:
            conn.send(event)
        except LocalProtocolError:
            if self._refused(conn):
                return
            raise
        self._dirty[link] = None

    def send_encoded(self, link: int, encoded: Encoded) -> None:
        """`send` of a frame already encoded (`Connection.send_encoded`)."""
        conn = self._conns.get(link)
        if conn is None:
            return
        try:
            conn.send_encoded(encoded)
        except LocalProtocolError:
            if self._refused(conn):
                return
            raise
        self._dirty[link] = None

    @staticmethod
    def _refused(conn: Connection) -> bool:
        """Whether a refused send is moot: the connection refused the peer (a bad frame
        after good ones in the same read: the head already queued its error frame and
        closed its side) or could not write, so what the core still answers is moot."""
        return conn.our_state in _DONE

    def receive(self, link: int, data: Bytes) -> tuple[list[Event], str | None]:
        """The events in ``link``'s bytes, and the protocol error that ended it, if any.

        Good frames before a bad one are still returned. On an error the connection has
        queued any error frame it owes; the caller closes the link after the events.
        End of stream is not data: bindings report it as the link being lost.
        """
        conn = self._conns.get(link)
        if conn is None or not data:
            return [], None
        conn.receive_data(data)
        return self._events(link, conn)

    def get_buffer(self, link: int, sizehint: int = -1) -> memoryview:
        """Where to read ``link``'s next bytes; then call `buffer_updated` with the count."""
        conn = self._conns.get(link)
        if conn is None:
            if self._scrap is None:
                self._scrap = memoryview(bytearray(READ_SIZE))
            return self._scrap  # the link is gone: its bytes are dropped
        return conn.get_buffer(sizehint)

    def buffer_updated(self, link: int, nbytes: int) -> tuple[list[Event], str | None]:
        """`receive` for ``nbytes`` read into the view `get_buffer` gave."""
        conn = self._conns.get(link)
        if conn is None:
            return [], None
        conn.buffer_updated(nbytes)
        return self._events(link, conn)

    def _events(self, link: int, conn: Connection) -> tuple[list[Event], str | None]:
        try:
            events = conn.next_events()
        except RemoteProtocolError as e:
            self._dirty[link] = None
            return [], str(e)
        if conn.their_state is ConnectionState.ERROR:
            try:
                conn.next_events()
            except RemoteProtocolError as e:
                self._dirty[link] = None
                return events, str(e)
        return events, None

    def close(self, link: int, reason: str) -> None:
        conn = self._conns.pop(link, None)
        if conn is None:
            return
        conn.forget_partial()
        if link not in self._connecting:
            self._flush(link, conn)
        self._connecting.discard(link)
        self._dirty.pop(link, None)
        self._queued.append(Close(link, reason))

    def forget(self, link: int) -> None:
        """The binding lost the link: drop it without a close decision."""
        conn = self._conns.pop(link, None)
        if conn is not None:
            conn.forget_partial()  # a frame announced and never finished leaves the cap
        self._dirty.pop(link, None)
        self._connecting.discard(link)

    def queue(self, decision: Decision) -> None:
        self._flush_all()
        self._queued.append(decision)

    def _flush(self, link: int, conn: Connection) -> None:
        buffers = conn.data_to_send()
        if buffers:
            self._queued.append(Write(link, buffers))

    def _flush_all(self) -> None:
        waiting = self._connecting
        for link in self._dirty:
            conn = self._conns.get(link)
            if conn is not None and link not in waiting:
                self._flush(link, conn)
        if waiting:
            self._dirty = {link: None for link in self._dirty if link in waiting}
        else:
            self._dirty.clear()

    def decisions(self) -> list[Decision]:
        """Everything queued since the last call, in order, with writes coalesced."""
        self._flush_all()
        out, self._queued = self._queued, []
        return out
