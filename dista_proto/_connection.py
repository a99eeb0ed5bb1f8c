"""One end of a Dista connection: bytes in, events out; events in, buffers out.

Theory of operation
-------------------
A `Connection` never touches a socket. The binding feeds it what it reads
(`receive_data`, with ``b""`` for end of stream), drains events (`next_event` or the batched
`next_events`), hands it events to send (`send`) and writes what `data_to_send` returns.

Each side of the connection has a state (`ConnectionState`; where they start and what
moves them is `dista_proto._state`). The head's side of a link starts in AWAIT_HELLO in both
directions: the peer's first frame must be hello, and the head may send nothing until it has
one. A peer's side starts with our direction in AWAIT_HELLO (we must send hello first) and,
for drivers and clients, theirs in AWAIT_WELCOME (the head answers with welcome, or an error
frame refusing us). Object-server links carry no hello and start OPEN. In OPEN, every kind
is checked against the protocol page's "sent by" column (`dista_proto._roles`), both when we
send (`LocalProtocolError`, nothing queued) and when we receive (`RemoteProtocolError`).

A receive error moves their side to ERROR and is raised from every later `next_event`; the
head queues an error frame saying what was wrong before raising, so a peer learns why it is
dropped. End of stream between frames is a clean close (`ConnectionClosed`); in the middle
of a frame it is an error.

This module holds the states, the handshake and the checks; the bytes live in one helper
per side, each with its own theory of operation: `dista_proto._incoming` (`receive_data`,
bounded memory, the frame loop both receive paths use, and `get_buffer`/`buffer_updated`
with payloads landing in place; `dista_proto._sinks` says where) and `dista_proto._codec`
(`send`'s frames: small ones copied together, large payloads passed as views). The
receive helpers are handed the connection and see it as a
`dista_proto._receiver.Receiver`, so they never import this module.
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Final

from . import frame as F
from ._codec import Outgoing, encode_payload
from ._encode import Encoded
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import ConnectionClosed, Error, Event, Fetch, Hello
from ._incoming import NOT_OFFERED, READ_SIZE, Incoming, ReceiveInto, feed_into
from ._kinds import DECODERS, part_limit
from ._partials import PartialCap
from ._roles import Role
from ._sinks import Allocate, PartSink, sink_decoders
from ._state import (
    ConnectionState,
    after_hello,
    after_welcome,
    receive_refusal,
    send_refusal,
    sent_hello,
    sent_welcome,
    start,
)
from .frame import Bytes

__all__ = [
    "NEED_DATA",
    "READ_SIZE",
    "Allocate",
    "Connection",
    "ConnectionState",
    "NeedData",
    "PartSink",
]


class NeedData(enum.Enum):
    """`next_event` has no whole frame yet: feed more bytes."""

    NEED_DATA = enum.auto()


NEED_DATA: Final = NeedData.NEED_DATA

#: Kinds whose sending changes the connection's state (see `Connection._sent`).
_SENT_CHANGES_STATE: Final = frozenset({F.KIND_HELLO, F.KIND_WELCOME, F.KIND_FETCH})


class Connection:
    """The sans-IO state of one connection, for ``our_role``."""

    def __init__(self, our_role: Role) -> None:
        self.our_role: Final = our_role
        # What they may send is the largest body each kind byte may announce now (0: the
        # kind may not come), so a header is checked, kind and length, with one lookup, and
        # nothing is sized from a length before it passed (`dista_proto._state`).
        self.their_role: Role | None
        self.our_state: ConnectionState
        self.their_state: ConnectionState
        self.their_role, self.our_state, self.their_state, self._limits, self._allowed_out = start(
            our_role
        )
        self._from_head = self.their_role == Role.HEAD
        self._part_asked = 0  # the largest part a fetcher asked for (0: none yet)
        self._eof = False
        self._ready: deque[Event] = deque()
        self._error: RemoteProtocolError | None = None
        # Where large payloads land (`land`): the decoders ask a part sink for its view.
        self._decoders = DECODERS
        self._sink: PartSink | None = None
        self._allocate: Allocate | None = None
        # The bytes: receive_data's, the receive-into path's (from the first get_buffer on),
        # and what send queued. Plain objects held, not base classes: mypyc compiles each
        # module alone, and a helper that needs the connection's state is handed it.
        self._incoming = Incoming()
        self._into: ReceiveInto | None = None
        self._outgoing = Outgoing()
        # The head's cap on partly received large frames, and what this link reserved.
        self._partials: PartialCap | None = None
        self._reserved = 0

    # -- receiving ----------------------------------------------------------------------------

    def land(self, parts: PartSink | None = None, allocate: Allocate | None = None) -> None:
        """Say where large payloads land: part frames' object bytes in the view ``parts``
        gives for each (both receive paths), other frames of 1 MiB or more, received with
        `get_buffer`, in a buffer from ``allocate``. None for either: as usual.

        A view of the wrong size or a read-only one is ignored (the part is received as
        usual); `allocate` raising MemoryError leaves the frame to the usual path too.
        """
        self._sink = parts
        self._allocate = allocate
        self._decoders = DECODERS if parts is None else sink_decoders(parts)

    def share_partials(self, cap: PartialCap) -> None:
        """Count this link's large frames in progress against ``cap`` (`dista_proto._partials`)."""
        self._partials = cap

    def forget_partial(self) -> None:
        """The frame in progress, if reserved, is whole or gone: its bytes leave the cap."""
        if self._reserved:
            assert self._partials is not None
            self._partials.release(self._reserved)
            self._reserved = 0

    def _partial(self, kind: int, length: int) -> bool:
        """A frame announcing ``length`` bytes (`BIG_FRAME` or more) is in progress: reserve
        it under the shared cap, or fail the connection saying so (False)."""
        partials = self._partials
        if partials is None:
            return True
        self.forget_partial()
        refusal = partials.reserve(length)
        if refusal is None:
            self._reserved = length
            return True
        self._fail(
            RemoteProtocolError(f"{F.kind_name(kind)}: {refusal}", kind=kind, field="length")
        )
        return False

    def receive_data(self, data: Bytes) -> None:
        """Buffer bytes read from the peer; ``b""`` means the peer closed its side."""
        if self._eof:
            raise LocalProtocolError("received data after the end of the stream")
        if not data:
            self._eof = True
            return
        if self._into is not None:
            feed_into(self, data)
            return
        if self._error is not None:
            return  # the stream is already broken: don't buffer what follows
        self._incoming.add(data)
        if self._reserved and not self._incoming.in_pieces():
            self.forget_partial()  # the large frame is whole

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """A writable view for the next bytes read from the peer (the receive-into path).

        Read at most ``len(view)`` bytes into it, then call `buffer_updated` with how many,
        before asking for another buffer. ``sizehint`` is ignored (as asyncio allows): the
        view is the free part of the reused buffer, or the rest of a payload landing in
        place, which is never more than the frame's own bytes.
        """
        if self._eof:
            raise LocalProtocolError("received data after the end of the stream")
        into = self._into
        if into is None:
            into = self._start_into()
        if self._error is not None:
            return into.offer_scrap()  # the stream is broken: take what follows, and drop it
        return into.offer()

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written into the view `get_buffer` returned: take them."""
        into = self._into
        if into is None:
            raise LocalProtocolError(NOT_OFFERED)
        into.updated(self, nbytes)

    def next_event(self) -> Event | ConnectionClosed | NeedData:
        """The next event, `NEED_DATA`, or `ConnectionClosed` once the peer has closed."""
        if not self._ready:
            self._parse()
            if not self._ready:
                return self._idle()
        return self._ready.popleft()

    def next_events(self) -> list[Event]:
        """Every event that whole frames carry right now (maybe none): the fast path.

        After the last event, `next_event` says whether more data is needed or the peer
        closed; a protocol error after some good frames is raised by the next call.
        """
        if self._ready:
            events = list(self._ready)
            self._ready.clear()
            return events
        if self._error is not None:
            raise self._broken()
        if self._into is not None:
            return []  # parsed as the bytes arrived
        out: list[Event] = []
        self._incoming.parse(self, out)
        error = self._failure()  # parsing may have failed: not the `_error` checked above
        if not out and error is not None:
            raise self._broken()
        return out

    def in_frame(self) -> bool:
        """Whether a frame has begun arriving and not ended."""
        into = self._into
        return self._incoming.in_frame() or (into is not None and into.in_frame())

    def _failure(self) -> RemoteProtocolError | None:
        return self._error

    def _idle(self) -> ConnectionClosed | NeedData:
        if self._error is not None:
            raise self._broken()
        if not self._eof:
            return NEED_DATA
        if self._incoming.in_frame() or (self._into is not None and self._into.in_frame()):
            error = RemoteProtocolError("the peer closed the stream in the middle of a frame")
            self._fail(error)
            raise self._broken()
        self.their_state = ConnectionState.CLOSED
        return ConnectionClosed()

    def _parse(self) -> None:
        out: list[Event] = []
        self._incoming.parse(self, out)
        self._ready.extend(out)

    def _start_into(self) -> ReceiveInto:
        """Switch to the receive-into path, taking over what `receive_data` left unparsed."""
        into = self._into = ReceiveInto()
        rest = self._incoming.take()
        if rest and self._error is None:
            feed_into(self, rest)
        return into

    # -- the handshake and the checks, for both receive paths ---------------------------------

    def _refuse(self, kind: int, length: int) -> None:
        """Raise the error a header announcing ``length`` bytes of ``kind`` deserves."""
        raise receive_refusal(
            kind,
            length,
            self._limits[kind],
            self._part_asked,
            self.their_state,
            self.their_role,
            self.our_role,
        )

    def _handshake(self, event: Event) -> None:
        self.their_state = ConnectionState.OPEN
        if isinstance(event, Hello):
            role = Role(event.role)
            self.their_role = role
            self.our_state, self._allowed_out, self._limits = after_hello(role)
        else:  # welcome
            self._limits = after_welcome(self.our_role)

    def _broken(self) -> RemoteProtocolError:
        """The stream's error, anew: raising the kept one would chain each raise's frames
        (and so this connection and its buffers) to it, a cycle only a full collection
        frees."""
        error = self._error
        assert error is not None
        return RemoteProtocolError(str(error), kind=error.kind, field=error.field)

    def _fail(self, error: RemoteProtocolError) -> None:
        self._error = error.with_traceback(None)
        self.their_state = ConnectionState.ERROR
        if self.our_role == Role.HEAD and self.our_state != ConnectionState.ERROR:
            # Tell the peer why it is dropped: the one frame the head sends to anyone.
            self._outgoing.queue(*encode_payload(Error(0, f"protocol error: {error}"), True))
            self.our_state = ConnectionState.CLOSED
            self._allowed_out = frozenset()

    # -- sending ------------------------------------------------------------------------------

    def send(self, event: Event) -> None:
        """Queue ``event``; raise `LocalProtocolError`, queueing nothing, if it can't go."""
        kind = event.kind
        if kind not in self._allowed_out:
            self._refuse_send(event)
        encoded = encode_payload(event, self.our_role == Role.HEAD)
        if isinstance(event, Hello) and event.role != self.our_role:
            raise LocalProtocolError(
                f"hello: role {event.role} on a {self.our_role.name.lower()}'s connection",
                kind=kind,
                field="role",
            )
        self._outgoing.queue(*encoded)
        if kind in _SENT_CHANGES_STATE:  # one lookup on the common path
            self._sent(event)

    def send_encoded(self, encoded: Encoded) -> None:
        """`send` for a frame already encoded (`_encode.result_frame`, `actor_call_frame`):
        the head forwards each actor call and its answer this way, with no event made for
        it (a frozen event costs half a microsecond). Never a kind that changes state."""
        kind = encoded[0]
        if kind not in self._allowed_out:
            raise send_refusal(kind, self.our_state, self.our_role, self.their_role)
        assert kind not in _SENT_CHANGES_STATE
        self._outgoing.queue(*encoded)

    def _sent(self, event: Event) -> None:
        """What sending a hello, a welcome or a fetch changes."""
        if isinstance(event, Hello):
            self.our_state = ConnectionState.OPEN
            self._allowed_out = sent_hello(self.our_role)
        elif isinstance(event, Fetch):
            # A fetcher's part frames carry at most the largest part it asked for; an empty
            # fetch (part 0) asks for a result frame instead.
            if event.part > self._part_asked:
                self._part_asked = event.part
                self._limits[F.KIND_PART] = part_limit(event.part)
        else:  # welcome
            self.our_state = ConnectionState.OPEN
            assert self.their_role is not None
            self._allowed_out = sent_welcome(self.their_role)

    def _refuse_send(self, event: Event) -> None:
        raise send_refusal(event.kind, self.our_state, self.our_role, self.their_role)

    def data_to_send(self) -> list[Bytes]:
        """The buffers to write, in order; large payloads are views of the caller's bytes."""
        return self._outgoing.take()

    def send_failed(self) -> None:
        """The binding could not write: nothing more can be sent."""
        self.our_state = ConnectionState.ERROR
        self._allowed_out = frozenset()

    def close(self) -> None:
        """We are done sending: later sends raise `LocalProtocolError`."""
        if self.our_state != ConnectionState.ERROR:
            self.our_state = ConnectionState.CLOSED
        self._allowed_out = frozenset()
