"""One end of a Dista connection: bytes in, events out; events in, buffers out.

Theory of operation
-------------------
A `Connection` never touches a socket. The binding feeds it what it reads
(`receive_data`, with ``b""`` for end of stream), drains events (`next_event` or the batched
`next_events`), hands it events to send (`send`) and writes what `data_to_send` returns.

Each side of the connection has a state (`ConnectionState`). The head's side of a link
starts in AWAIT_HELLO in both directions: the peer's first frame must be hello, and the head
may send nothing until it has one. A peer's side starts with our direction in AWAIT_HELLO
(we must send hello first) and, for drivers and clients, theirs in AWAIT_WELCOME (the head
answers with welcome, or an error frame refusing us). Object-server links carry no hello and
start OPEN. In OPEN, every kind is checked against the protocol page's "sent by" column
(`dista_proto._roles`), both when we send (`LocalProtocolError`, nothing queued) and when
we receive (`RemoteProtocolError`).

A receive error moves their side to ERROR and is raised from every later `next_event`; the
head queues an error frame saying what was wrong before raising, so a peer learns why it is
dropped. End of stream between frames is a clean close (`ConnectionClosed`); in the middle
of a frame it is an error.

Memory: the receive side holds at most one incomplete frame. A large frame arriving in
pieces is kept as a list of the pieces and joined once when whole, so a 1-byte-at-a-time
stream costs linear time and a length prefix announcing 1 GiB allocates nothing until the
bytes arrive. The send side copies small payloads into one buffer (fewer writes) and passes
large ones through as views (no copy).
"""

from __future__ import annotations

import enum
import struct
from collections import deque
from typing import Final

from . import frame as F
from ._decode import DECODERS
from ._encode import encode_payload
from ._errors import LocalProtocolError, RemoteProtocolError
from ._events import ConnectionClosed, Error, Event, Hello
from ._roles import Role, allowed_kinds, receives_welcome
from .frame import Bytes

__all__ = ["NEED_DATA", "Connection", "ConnectionState", "NeedData"]


class NeedData(enum.Enum):
    """`next_event` has no whole frame yet: feed more bytes."""

    NEED_DATA = enum.auto()


NEED_DATA: Final = NeedData.NEED_DATA


class ConnectionState(enum.Enum):
    AWAIT_HELLO = "await-hello"
    AWAIT_WELCOME = "await-welcome"
    OPEN = "open"
    CLOSED = "closed"
    ERROR = "error"


_PEER_ROLES: Final = frozenset({Role.DRIVER, Role.WORKER, Role.CLIENT, Role.OBSERVER})
_PREFIX_HEADER: Final = struct.Struct("<IBQQ")
_U32: Final = struct.Struct("<I")
_FULL: Final = F.PREFIX + F.HEADER
#: Payloads at least this large are passed as views (received) or separate buffers (sent).
BIG_PAYLOAD: Final = 64 * 1024
#: A frame at least this large that arrives in pieces is collected as a list of pieces.
_BIG_FRAME: Final = 1 << 20


class Connection:
    """The sans-IO state of one connection, for ``our_role``."""

    def __init__(self, our_role: Role) -> None:
        self.our_role: Final = our_role
        self.their_role: Role | None = None
        self._from_head = False
        self._allowed_in: frozenset[int] = frozenset()
        self._allowed_out: frozenset[int] = frozenset()
        if our_role == Role.HEAD:
            self.our_state = self.their_state = ConnectionState.AWAIT_HELLO
            self._allowed_in = frozenset({F.KIND_HELLO})
        elif our_role in _PEER_ROLES:
            self.their_role = Role.HEAD
            self._from_head = True
            self.our_state = ConnectionState.AWAIT_HELLO
            self._allowed_out = frozenset({F.KIND_HELLO})
            if receives_welcome(our_role):
                self.their_state = ConnectionState.AWAIT_WELCOME
                self._allowed_in = frozenset({F.KIND_WELCOME, F.KIND_ERROR})
            else:
                self.their_state = ConnectionState.OPEN
                self._allowed_in = allowed_kinds(Role.HEAD, our_role)
        elif our_role in (Role.OBJECT_SERVER, Role.FETCHER):
            other = Role.FETCHER if our_role == Role.OBJECT_SERVER else Role.OBJECT_SERVER
            self.their_role = other
            self.our_state = self.their_state = ConnectionState.OPEN
            self._allowed_in = allowed_kinds(other, our_role)
            self._allowed_out = allowed_kinds(our_role, other)
        else:  # pragma: no cover - Role is a closed enum
            raise LocalProtocolError(f"no connection for role {our_role!r}")
        # Receiving: unparsed whole bytes, a partial frame, or the pieces of a large frame.
        self._data: bytes | bytearray = b""
        self._pos = 0
        self._partial = bytearray()
        self._need = 0  # bytes _partial must hold before it is worth parsing
        self._pieces: list[Bytes] | None = None
        self._pieces_size = 0
        self._eof = False
        self._ready: deque[Event] = deque()
        self._error: RemoteProtocolError | None = None
        # Sending: small frames gather in _out; large payloads become their own buffers.
        self._out = bytearray()
        self._buffers: list[Bytes] = []

    # -- receiving ----------------------------------------------------------------------------

    def receive_data(self, data: Bytes) -> None:
        """Buffer bytes read from the peer; ``b""`` means the peer closed its side."""
        if self._eof:
            raise LocalProtocolError("received data after the end of the stream")
        if not data:
            self._eof = True
            return
        if self._error is not None:
            return  # the stream is already broken: don't buffer what follows
        if not isinstance(data, bytes):
            # The caller may reuse its buffer, and a memoryview may not be of bytes: own a copy.
            data = bytes(data)
        if self._pieces is not None:
            self._pieces.append(data)
            self._pieces_size += len(data)
            if self._pieces_size >= self._need:
                self._data = b"".join(self._pieces)
                self._pos = 0
                self._pieces = None
            return
        if self._partial:
            self._partial += data
            if len(self._partial) >= self._need:
                self._data, self._partial = self._partial, bytearray()
                self._pos = 0
            return
        if self._pos < len(self._data):
            # Fed twice without parsing in between: grow one buffer (linear, not quadratic).
            if not isinstance(self._data, bytearray) or self._pos:
                self._data = bytearray(memoryview(self._data)[self._pos :])
                self._pos = 0
            self._data += data
            return
        self._data = data
        self._pos = 0

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
            raise self._error
        out: list[Event] = []
        self._parse_into(out)
        if not out and self._error is not None:
            raise self._error
        return out

    def _idle(self) -> ConnectionClosed | NeedData:
        if self._error is not None:
            raise self._error
        if not self._eof:
            return NEED_DATA
        if self._partial or self._pieces is not None or self._pos < len(self._data):
            error = RemoteProtocolError("the peer closed the stream in the middle of a frame")
            self._fail(error)
            raise error
        self.their_state = ConnectionState.CLOSED
        return ConnectionClosed()

    def _parse(self) -> None:
        out: list[Event] = []
        self._parse_into(out)
        self._ready.extend(out)

    def _parse_into(self, out: list[Event]) -> None:
        if self._error is not None:
            return
        data, pos = self._data, self._pos
        if isinstance(data, bytearray):
            # Only partial frames and double feeds land here: one copy, so events hold bytes.
            data, pos = bytes(memoryview(data)[pos:]), 0
        n = len(data)
        unpack = _PREFIX_HEADER.unpack_from
        decoders = DECODERS
        allowed = self._allowed_in
        from_head = self._from_head
        try:
            while True:
                if n - pos < _FULL:
                    if n - pos >= F.PREFIX:
                        F.frame_length(data[pos : pos + 4])  # a bad length fails at once
                    break
                length, kind, object_id, task_id = unpack(data, pos)
                if length < F.HEADER or length > F.MAX_FRAME:
                    F.frame_length(data[pos : pos + 4])  # raises, saying which bound
                if kind not in allowed:
                    self._refuse(kind)  # at once: never buffer a frame we will refuse
                end = pos + 4 + length
                if end > n:
                    break
                if length - F.HEADER < BIG_PAYLOAD:
                    payload: Bytes = data[pos + _FULL : end]
                else:
                    payload = memoryview(data)[pos + _FULL : end]
                event = decoders[kind](object_id, task_id, payload, from_head)
                pos = end
                out.append(event)
                if kind == F.KIND_HELLO or kind == F.KIND_WELCOME:
                    self._handshake(event)
                    allowed = self._allowed_in
        except RemoteProtocolError as e:
            self._fail(e)
            pos = n
        self._keep_rest(data, pos)

    def _keep_rest(self, data: bytes, pos: int) -> None:
        """Move an incomplete frame's bytes into the partial buffer, or its pieces list."""
        self._data, self._pos = b"", 0
        if pos >= len(data):
            return
        rest = data[pos:]
        if len(rest) < F.PREFIX:
            self._partial = bytearray(rest)
            self._need = F.PREFIX
            return
        length = _U32.unpack_from(rest)[0]  # checked by _parse_into
        if len(rest) < _FULL:
            # Parse again once the header is here: a forbidden kind is refused from it.
            self._partial = bytearray(rest)
            self._need = _FULL
            return
        self._need = F.PREFIX + length
        if self._need >= _BIG_FRAME:
            self._pieces = [rest]
            self._pieces_size = len(rest)
        else:
            self._partial = bytearray(rest)

    def _refuse(self, kind: int) -> None:
        name = F.kind_name(kind)
        if kind not in F.KIND_NAMES:
            raise RemoteProtocolError(f"unknown frame kind {kind}", kind=kind, field="kind")
        if self.their_state == ConnectionState.AWAIT_HELLO:
            raise RemoteProtocolError(f"the first frame must be hello, not {name}", kind=kind)
        if self.their_state == ConnectionState.AWAIT_WELCOME:
            raise RemoteProtocolError(
                f"the head must answer hello with welcome, not {name}", kind=kind
            )
        sender = self.their_role.name.lower() if self.their_role else "peer"
        receiver = self.our_role.name.lower().replace("_", " ")
        raise RemoteProtocolError(f"a {sender} may not send {name} to a {receiver}", kind=kind)

    def _handshake(self, event: Event) -> None:
        if isinstance(event, Hello):
            role = Role(event.role)
            self.their_role = role
            self.their_state = ConnectionState.OPEN
            self._allowed_in = allowed_kinds(role, Role.HEAD) - {F.KIND_HELLO}
            if receives_welcome(role):
                self.our_state = ConnectionState.AWAIT_WELCOME
                self._allowed_out = frozenset({F.KIND_WELCOME, F.KIND_ERROR})
            else:
                self.our_state = ConnectionState.OPEN
                self._allowed_out = allowed_kinds(Role.HEAD, role)
        else:  # welcome
            self.their_state = ConnectionState.OPEN
            self._allowed_in = allowed_kinds(Role.HEAD, self.our_role) - {F.KIND_WELCOME}

    def _fail(self, error: RemoteProtocolError) -> None:
        self._error = error
        self.their_state = ConnectionState.ERROR
        if self.our_role == Role.HEAD and self.our_state != ConnectionState.ERROR:
            # Tell the peer why it is dropped: the one frame the head sends to anyone.
            self._queue(*encode_payload(Error(0, f"protocol error: {error}"), True))
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
        self._queue(*encoded)
        if kind == F.KIND_HELLO:
            self.our_state = ConnectionState.OPEN
            self._allowed_out = allowed_kinds(self.our_role, Role.HEAD) - {F.KIND_HELLO}
        elif kind == F.KIND_WELCOME:
            self.our_state = ConnectionState.OPEN
            assert self.their_role is not None
            self._allowed_out = allowed_kinds(Role.HEAD, self.their_role) - {F.KIND_WELCOME}

    def _refuse_send(self, event: Event) -> None:
        name = F.kind_name(event.kind)
        state = self.our_state
        if state in (ConnectionState.CLOSED, ConnectionState.ERROR):
            why = f"cannot send {name}: the connection is {state.value}"
        elif state == ConnectionState.AWAIT_HELLO and self.our_role == Role.HEAD:
            why = f"cannot send {name} before the peer's hello"
        elif state == ConnectionState.AWAIT_HELLO:
            why = f"the first frame must be hello, not {name}"
        elif state == ConnectionState.AWAIT_WELCOME:
            why = f"the head answers a hello with welcome (or error), not {name}"
        else:
            receiver = self.their_role.name.lower().replace("_", " ") if self.their_role else ""
            why = f"a {self.our_role.name.lower().replace('_', ' ')} may not send {name} to a {receiver}"
        raise LocalProtocolError(why, kind=event.kind)

    def _queue(
        self, kind: int, object_id: int, task_id: int, prefix: bytes, tail: Bytes | None
    ) -> None:
        if tail is not None and isinstance(tail, memoryview):
            tail = F.flat(tail)
        size = len(prefix) + (len(tail) if tail is not None else 0)
        if size > F.MAX_PAYLOAD:
            raise LocalProtocolError(
                f"{F.kind_name(kind)}: a payload of {size} bytes is over MAX_PAYLOAD "
                f"({F.MAX_PAYLOAD}); send large objects in part frames",
                kind=kind,
                field="payload",
            )
        try:
            header = _PREFIX_HEADER.pack(F.HEADER + size, kind, object_id, task_id)
        except struct.error:
            F.append_header(bytearray(), kind, object_id, task_id, size)  # raises, naming it
            raise  # pragma: no cover
        out = self._out
        out += header
        out += prefix
        if tail is not None:
            if len(tail) < BIG_PAYLOAD:
                out += tail
            else:
                self._buffers.append(bytes(out))
                out.clear()
                self._buffers.append(tail)

    def data_to_send(self) -> list[Bytes]:
        """The buffers to write, in order; large payloads are views of the caller's bytes."""
        buffers = self._buffers
        if self._out:
            buffers.append(bytes(self._out))
            self._out.clear()
        self._buffers = []
        return buffers

    def send_failed(self) -> None:
        """The binding could not write: nothing more can be sent."""
        self.our_state = ConnectionState.ERROR
        self._allowed_out = frozenset()

    def close(self) -> None:
        """We are done sending: later sends raise `LocalProtocolError`."""
        if self.our_state != ConnectionState.ERROR:
            self.our_state = ConnectionState.CLOSED
        self._allowed_out = frozenset()
