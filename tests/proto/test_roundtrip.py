"""Property tests: every event survives encoding and decoding, and a Connection reassembles
the same events from its byte stream however the stream is cut."""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from dista_proto import (
    HELLO_SECRET,
    NEED_DATA,
    ActorBuild,
    ActorCall,
    ActorCreate,
    ActorKill,
    ActorLookup,
    ActorName,
    ActorOpen,
    ActorOrder,
    ActorRestore,
    Address,
    Adopt,
    Adopted,
    Cancel,
    Checkpoint,
    Checkpointed,
    Claim,
    Connection,
    ConnectionClosed,
    Covered,
    Drain,
    Error,
    Event,
    Fetch,
    Free,
    HeadStats,
    Hello,
    Holding,
    HoldingEntry,
    InlineInput,
    Labels,
    Located,
    LocatedInput,
    Mapped,
    Part,
    Release,
    Result,
    Resume,
    Resumed,
    Role,
    Snapshot,
    Span,
    Stats,
    Status,
    Stop,
    Stored,
    Task,
    TaskAfter,
    TaskInputs,
    TaskMany,
    TaskNames,
    Timeline,
    TimelineRecord,
    Vitals,
    Welcome,
    allowed_kinds,
    decode_event,
    encode_event,
    frame,
)

U64_MAX = (1 << 64) - 1
MAX_OBJECT = 1 << 40

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

u64 = st.integers(0, U64_MAX)
ids = st.one_of(st.integers(0, 1 << 20), u64)
blobs = st.binary(max_size=40)
texts = st.text(max_size=30)
#: Actor names: 1 to 255 bytes of UTF-8 (no lone surrogates: those are not UTF-8).
names = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=60)

#: A secret or a fetch token (16 bytes), or none.
secrets = st.just(b"") | st.binary(min_size=16, max_size=16)

addresses = st.builds(
    lambda a, b, c, d, port: Address(f"{a}.{b}.{c}.{d}", port),
    *(st.integers(0, 255) for _ in range(4)),
    st.integers(0, 0xFFFF),
)


@st.composite
def hellos(draw: st.DrawFn) -> Hello:
    role = draw(st.sampled_from([1, 2, 3, 4]))
    registry = draw(u64)
    if role == frame.ROLE_WORKER:
        return Hello(role, registry, address=draw(addresses))
    # Our extension: a driver or client may ask for a secret (HELLO_SECRET), and a
    # driver's resume so marked may carry its secret.
    mark = draw(st.sampled_from([0, HELLO_SECRET])) if role != frame.ROLE_OBSERVER else 0
    if role == frame.ROLE_DRIVER:
        secret = draw(secrets) if mark else b""
        resume = draw(st.none() | st.builds(Resume, u64, u64, st.just(secret)))
        return Hello(role, registry, resume=resume, mark=mark)
    return Hello(role, registry, mark=mark)


def _inputs(item: st.SearchStrategy[Any]) -> Callable[[bool], st.SearchStrategy[Any]]:
    def inputs(gather: bool) -> st.SearchStrategy[Any]:
        if gather:
            return st.lists(item, max_size=5).map(tuple)
        return st.tuples(item)

    return inputs


@st.composite
def task_afters(draw: st.DrawFn) -> TaskAfter:
    gather = draw(st.booleans())
    return TaskAfter(
        draw(ids),
        draw(ids),
        draw(_inputs(ids)(gather)),
        gather,
        draw(st.none() | blobs),
        draw(st.none() | st.integers(1, U64_MAX)),
    )


task_input = st.one_of(st.builds(InlineInput, ids, blobs), st.builds(LocatedInput, ids, addresses))


@st.composite
def task_inputs(draw: st.DrawFn) -> TaskInputs:
    gather = draw(st.booleans())
    return TaskInputs(
        draw(ids),
        draw(ids),
        draw(_inputs(task_input)(gather)),
        gather,
        draw(st.none() | blobs),
        draw(st.none() | st.integers(1, U64_MAX)),
    )


@st.composite
def parts(draw: st.DrawFn) -> Part:
    data = draw(blobs)
    offset = draw(st.integers(0, MAX_OBJECT - len(data)))
    size = draw(st.integers(offset + len(data), MAX_OBJECT))
    return Part(draw(ids), size, offset, data)


records = st.builds(TimelineRecord, *([u64] * 9), addresses)


def strategy(kind: int, from_head: bool) -> st.SearchStrategy[Any]:
    """Valid events of ``kind`` for frames travelling from the head (or towards it)."""
    table: dict[int, Callable[[], st.SearchStrategy[Any]]] = {
        frame.KIND_TASK: lambda: st.builds(Task, ids, ids, blobs),
        frame.KIND_RESULT: lambda: st.builds(Result, ids, blobs),
        frame.KIND_ERROR: lambda: st.builds(Error, ids, texts),
        frame.KIND_HELLO: hellos,
        frame.KIND_WELCOME: lambda: st.builds(Welcome, u64, u64, secrets),
        frame.KIND_TASK_AFTER: task_afters,
        frame.KIND_STORED: lambda: st.builds(Stored, ids, u64),
        frame.KIND_LOCATED: lambda: st.builds(Located, ids, addresses, secrets),
        frame.KIND_FETCH: lambda: st.builds(
            Fetch, ids, st.sampled_from([0, 1]) | u64, secrets, st.sampled_from([0]) | u64
        ),
        frame.KIND_TASK_INPUTS: task_inputs,
        frame.KIND_RELEASE: lambda: st.builds(Release, ids),
        frame.KIND_FREE: lambda: st.builds(Free, ids),
        frame.KIND_STATS: lambda: (
            st.builds(Stats, st.builds(HeadStats, u64, u64, u64, u64, u64))
            if from_head
            else st.just(Stats())
        ),
        frame.KIND_HOLDING: lambda: st.builds(
            Holding, st.lists(st.builds(HoldingEntry, ids, addresses), max_size=4).map(tuple)
        ),
        frame.KIND_CLAIM: lambda: st.builds(Claim, ids),
        frame.KIND_RESUMED: lambda: st.just(Resumed()),
        frame.KIND_SPAN: lambda: st.builds(Span, ids, u64, u64, u64),
        frame.KIND_TIMELINE: lambda: (
            st.builds(Timeline, st.lists(records, max_size=3).map(tuple))
            if from_head
            else st.just(Timeline())
        ),
        frame.KIND_ACTOR_CREATE: lambda: (
            st.builds(ActorCreate, ids, ids, blobs)
            if from_head
            else st.builds(ActorCreate, ids, ids, blobs, u64)
        ),
        frame.KIND_ACTOR_CALL: lambda: st.builds(ActorCall, ids, ids, ids, blobs),
        frame.KIND_ACTOR_KILL: lambda: st.builds(ActorKill, ids),
        frame.KIND_CHECKPOINT: lambda: (
            st.builds(
                Checkpoint,
                ids,
                u64,
                st.none(),
                st.none() | st.integers(0, (1 << 63) - 1),  # an i64 on the wire
            )
            if from_head
            else st.builds(Checkpoint, ids, u64, ids, st.none())
        ),
        frame.KIND_CHECKPOINTED: lambda: st.builds(
            Checkpointed, ids, ids, st.none() | st.text(min_size=1, max_size=30)
        ),
        frame.KIND_ACTOR_RESTORE: lambda: st.builds(ActorRestore, ids, ids, u64),
        frame.KIND_COVERED: lambda: st.builds(Covered, ids, u64),
        frame.KIND_STATUS: lambda: (
            st.builds(Status, st.text(max_size=200)) if from_head else st.just(Status())
        ),
        frame.KIND_STOP: lambda: st.just(Stop()),
        frame.KIND_TASK_MANY: lambda: st.builds(
            TaskMany, ids, ids, st.integers(1, U64_MAX), blobs
        ),
        frame.KIND_DRAIN: lambda: st.just(Drain()),
        frame.KIND_ADOPT: lambda: st.builds(Adopt, ids, addresses),
        frame.KIND_ADOPTED: lambda: st.one_of(
            st.builds(Adopted, ids, addresses), st.builds(Adopted, ids, st.none(), texts)
        ),
        frame.KIND_CANCEL: lambda: st.builds(Cancel, ids),
        frame.KIND_PART: parts,
        frame.KIND_MAPPED: lambda: st.builds(
            Mapped, ids, st.integers(1, frame.MAX_OBJECT), st.binary(min_size=16, max_size=16)
        ),
        frame.KIND_ACTOR_OPEN: lambda: st.builds(
            ActorOpen, ids, st.binary(min_size=16, max_size=16)
        ),
        frame.KIND_ACTOR_NAME: lambda: st.builds(ActorName, ids, ids, names),
        frame.KIND_ACTOR_LOOKUP: lambda: st.builds(ActorLookup, ids, names),
        frame.KIND_ACTOR_ORDER: lambda: st.builds(
            ActorOrder, ids, st.lists(st.tuples(ids, ids), max_size=5).map(tuple)
        ),
        frame.KIND_ACTOR_BUILD: lambda: st.builds(
            ActorBuild, ids, st.integers(1, 2**64 - 1), st.integers(0, 2**64 - 1)
        ),
        frame.KIND_TASK_NAMES: lambda: st.builds(
            TaskNames,
            st.sets(st.integers(0, 2**64 - 1), max_size=20).map(lambda s: tuple(sorted(s))),
        ),
        frame.KIND_LABELS: lambda: st.builds(
            Labels,
            st.lists(
                st.tuples(
                    st.integers(0, 2**64 - 1),
                    st.text(st.characters(categories=["L", "N", "P"]), min_size=1, max_size=50),
                ),
                max_size=10,
            ).map(tuple),
            st.integers(0, 2**64 - 1),
        ),
        frame.KIND_VITALS: lambda: st.builds(Vitals, *[st.integers(0, 2**64 - 1)] * 5),
        frame.KIND_SNAPSHOT: lambda: (
            st.builds(
                Snapshot,
                st.integers(0, 2**64 - 1),
                st.text(max_size=100),
                st.binary(max_size=3).map(lambda b: b * 61),
            )
            if from_head
            else st.builds(Snapshot, st.integers(0, 2**64 - 1))
        ),
    }
    return table[kind]()


KIND_DIRECTIONS = [
    pytest.param(kind, from_head, id=f"{frame.kind_name(kind)}-{'from' if from_head else 'to'}")
    for kind in range(1, 34)
    for from_head in (False, True)
]


def test_strategies_cover_every_kind() -> None:
    assert set(frame.KIND_NAMES) == {*range(1, 35), *range(36, 45)}
    for kind in frame.KIND_NAMES:
        strategy(kind, False)
        strategy(kind, True)


@pytest.mark.parametrize(("kind", "from_head"), KIND_DIRECTIONS)
def test_roundtrip(kind: int, from_head: bool) -> None:
    @SETTINGS
    @given(strategy(kind, from_head))
    def check(event: Event) -> None:
        assert event.kind == kind
        data = encode_event(event, from_head=from_head)
        assert data[4] == kind
        assert int.from_bytes(data[:4], "little") == len(data) - 4
        decoded = decode_event(data, from_head=from_head)
        assert type(decoded) is type(event)
        assert decoded == event
        # and the bytes are canonical: encoding the decoded event gives them again
        assert encode_event(decoded, from_head=from_head) == data

    check()


def _pair_for(kind: int, from_head: bool) -> tuple[Role | None, Role]:
    """A (sender, receiver) link on which ``kind`` travels in this direction."""
    if from_head:
        for peer in (Role.DRIVER, Role.WORKER, Role.OBSERVER):
            if kind in allowed_kinds(Role.HEAD, peer):
                return Role.HEAD, peer
        if kind in allowed_kinds(Role.OBJECT_SERVER, Role.FETCHER):
            return None, Role.FETCHER  # object-server links decode as "not from the head"
        return None, Role.HEAD
    for peer in (Role.DRIVER, Role.WORKER, Role.OBSERVER):
        if kind in allowed_kinds(peer, Role.HEAD):
            return peer, Role.HEAD
    for sender, receiver in (
        (Role.FETCHER, Role.OBJECT_SERVER),
        (Role.OBJECT_SERVER, Role.FETCHER),
    ):
        if kind in allowed_kinds(sender, receiver):
            return sender, receiver
    return None, Role.HEAD


HELLOS = {
    Role.DRIVER: Hello(1, 0xABC),
    Role.WORKER: Hello(2, 0xABC, address=Address("127.0.0.1", 9000)),
    Role.CLIENT: Hello(3, 0xABC),
    Role.OBSERVER: Hello(4, 0),
}


def _opened(sender: Role, receiver: Role, *, finish: bool = True) -> Connection:
    """A connection for ``sender`` with the handshake towards ``receiver`` done.

    Without ``finish``, the sender's own handshake frame (hello, or welcome) is left unsent.
    """
    conn = Connection(sender)
    if sender == Role.HEAD:
        conn.receive_data(encode_event(HELLOS[receiver]))
        assert conn.next_event() == HELLOS[receiver]
        if receiver in (Role.DRIVER, Role.CLIENT) and finish:
            conn.send(Welcome(7, 8))
    elif sender in HELLOS and finish:
        conn.send(HELLOS[sender])
    conn.data_to_send()
    return conn


def _travelling() -> list[Any]:
    return [p for p in KIND_DIRECTIONS if _pair_for(*p.values)[0] is not None]


@pytest.mark.parametrize(("kind", "from_head"), _travelling())
def test_connection_send_agrees_with_encode_event(kind: int, from_head: bool) -> None:
    """The bytes a Connection queues for an event are the codec's whole frame."""
    sender_role, receiver = _pair_for(kind, from_head)
    assert sender_role is not None

    @SETTINGS
    @given(strategy(kind, from_head))
    def check(event: Event) -> None:
        if isinstance(event, Hello) and event.role != sender_role:
            return
        conn = _opened(sender_role, receiver, finish=not isinstance(event, Hello | Welcome))
        conn.send(event)
        assert b"".join(conn.data_to_send()) == encode_event(event, from_head=from_head)

    check()


# -- a Connection reassembles a stream however it is cut ------------------------------------

LINKS = [
    (Role.DRIVER, Role.HEAD),
    (Role.CLIENT, Role.HEAD),
    (Role.WORKER, Role.HEAD),
    (Role.OBSERVER, Role.HEAD),
    (Role.HEAD, Role.DRIVER),
    (Role.HEAD, Role.CLIENT),
    (Role.HEAD, Role.WORKER),
    (Role.HEAD, Role.OBSERVER),
    (Role.FETCHER, Role.OBJECT_SERVER),
    (Role.OBJECT_SERVER, Role.FETCHER),
]


def _link_events(sender: Role, receiver: Role) -> st.SearchStrategy[list[Any]]:
    from_head = sender == Role.HEAD
    kinds = sorted(allowed_kinds(sender, receiver) - {frame.KIND_HELLO, frame.KIND_WELCOME})
    return st.lists(st.one_of(*(strategy(k, from_head) for k in kinds)), max_size=8)


def _stream(sender: Role, receiver: Role, events: list[Event]) -> tuple[bytes, list[Event]]:
    """Everything ``sender`` writes from the start, and the events it should decode to."""
    expected: list[Event] = []
    conn = Connection(sender)
    if sender == Role.HEAD:
        conn.receive_data(encode_event(HELLOS[receiver]))
        conn.next_event()
        if receiver in (Role.DRIVER, Role.CLIENT):
            conn.send(Welcome(0x123, 0x456))
            expected.append(Welcome(0x123, 0x456))
    elif sender in HELLOS:
        conn.send(HELLOS[sender])
        expected.append(HELLOS[sender])
    for event in events:
        conn.send(event)
    expected += events
    return b"".join(conn.data_to_send()), expected


def _receiver(role: Role) -> Connection:
    conn = Connection(role)
    if role in HELLOS:
        conn.send(HELLOS[role])
        conn.data_to_send()
    return conn


def _drain(conn: Connection, out: list[Any]) -> None:
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            return
        out.append(event)
        if isinstance(event, ConnectionClosed):
            return


def _feed(role: Role, chunks: list[bytes]) -> list[Any]:
    conn = _receiver(role)
    out: list[Any] = []
    for chunk in chunks:
        if not chunk:
            continue  # b"" would mean the end of the stream
        conn.receive_data(chunk)
        _drain(conn, out)
    conn.receive_data(b"")
    _drain(conn, out)
    return out


@pytest.mark.parametrize(
    ("sender", "receiver"), [pytest.param(s, r, id=f"{s.name}-to-{r.name}") for s, r in LINKS]
)
def test_connection_reassembles_any_split(sender: Role, receiver: Role) -> None:
    @SETTINGS
    @given(_link_events(sender, receiver), st.lists(st.integers(0, 10_000), max_size=12))
    def check(events: list[Event], cuts: list[int]) -> None:
        data, expected = _stream(sender, receiver, events)
        closed = [*expected, ConnectionClosed()]
        # whole
        assert _feed(receiver, [data]) == closed
        # a byte at a time
        assert _feed(receiver, [data[i : i + 1] for i in range(len(data))]) == closed
        # at random cut points
        points = sorted({min(c, len(data)) for c in cuts})
        pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
        assert _feed(receiver, [p for p in pieces if p]) == closed
        # with the batched fast path
        conn = _receiver(receiver)
        if data:
            conn.receive_data(data)
        assert conn.next_events() == expected
        assert conn.next_event() is NEED_DATA

    check()


def test_connection_reassembles_large_payloads_in_pieces() -> None:
    big = bytes(range(256)) * 1024 * 5  # 1.25 MiB: past the collect-as-pieces threshold
    mid = bytes(range(256)) * 300  # 75 KiB: a view, not a copy
    events: list[Event] = [Task(1, 2, big), Task(3, 4, b"small"), Task(5, 6, mid)]
    data, expected = _stream(Role.DRIVER, Role.HEAD, events)
    for step in (1000, 65536, 333_333, len(data)):
        got = _feed(Role.HEAD, [data[i : i + step] for i in range(0, len(data), step)])
        assert got == [*expected, ConnectionClosed()]


# -- buffers of any shape --------------------------------------------------------------------


def test_task_argument_may_be_a_memoryview_of_any_format() -> None:
    words = array("I", [1, 2, 3])
    event = Task(1, 2, memoryview(words))
    data = encode_event(event)
    assert data == encode_event(Task(1, 2, words.tobytes()))
    assert decode_event(data) == Task(1, 2, words.tobytes())
    conn = _opened(Role.DRIVER, Role.HEAD)
    conn.send(event)
    assert b"".join(conn.data_to_send()) == data


def test_task_after_value_may_be_a_memoryview_of_any_format() -> None:
    # Regression: the value's length was once its item count, so the frame didn't decode.
    words = array("I", [1, 2])
    event = TaskAfter(1, 2, (3,), value=memoryview(words))
    assert decode_event(encode_event(event)) == TaskAfter(1, 2, (3,), value=words.tobytes())


def test_inline_input_may_be_a_memoryview_of_any_format() -> None:
    # Regression: the input's length was once its item count, so the frame didn't decode.
    words = array("I", [1, 2])
    event = TaskInputs(1, 2, (InlineInput(3, memoryview(words)),))
    assert decode_event(encode_event(event, from_head=True), from_head=True) == TaskInputs(
        1, 2, (InlineInput(3, words.tobytes()),)
    )
