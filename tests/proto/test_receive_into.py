"""The receive-into path (`Connection.get_buffer` / `buffer_updated`) against `receive_data`.

The property: for any stream of bytes, cut into any reads, the receive-into path yields the
events `receive_data` yields, then the same error or clean close. Streams are random frame
sequences: the golden corpus on head links; on fetcher links, results, errors and part
frames of several objects interleaved, parts of objects nobody asked for, and damaged part
headers (offsets out of order or past the end, sizes that change or are over MAX_OBJECT).
At the fetcher's level, what each request ends with (the object's bytes, or why not) must
be the same both ways, and nothing may be written outside the buffers the fetcher gave.

Then the mechanics: a large part lands in the object's own buffer (the fetched value *is*
the buffer the allocator returned), a large result in a buffer from ``allocate``, the view
offered never reaches past the frame, and the resource guarantees of `receive_data` (a
1 GiB prefix allocates nothing, a byte at a time costs linear time) hold here too.
"""

from __future__ import annotations

import dataclasses
import random
import struct
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from dista_proto import (
    NEED_DATA,
    Address,
    Connection,
    ConnectionClosed,
    Error,
    Fetch,
    Hello,
    LocalProtocolError,
    RemoteProtocolError,
    Result,
    Role,
    Status,
    Task,
    encode_event,
)
from dista_proto import frame as F
from dista_proto._connection import READ_SIZE
from dista_proto._fetcher import Fetcher
from dista_proto._links import Links

from .test_golden import GOLDEN

PROPERTY = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SERVER = Address("10.0.0.1", 7000)
GUARD = 0xEE
GUARD_BYTES = 64
HELLO = encode_event(Hello(1, 0xABC))

# -- feeding both ways -------------------------------------------------------------------------


def _normal(event: Any) -> Any:
    """An event as comparable plain data: every buffer field as bytes."""
    if isinstance(event, ConnectionClosed):
        return ("closed",)
    values = []
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        if isinstance(value, bytes | bytearray | memoryview):
            value = bytes(value)
        values.append(value)
    return (type(event).__name__, *values)


def _cuts(data: bytes, rng: random.Random, most: int) -> list[bytes]:
    """``data`` cut at random points into pieces of at most ``most`` bytes."""
    out = []
    pos = 0
    while pos < len(data):
        n = rng.randint(1, most) if rng.random() < 0.8 else rng.randint(1, 8)
        out.append(data[pos : pos + n])
        pos += n
    return out


def _read_cap(rng: random.Random, size: int) -> int:
    """The most one read takes: tiny reads only for short streams (they cost time)."""
    caps = [7, 1000, 1 << 16, 1 << 30] if size < 50_000 else [5000, 1 << 16, 1 << 30]
    return rng.choice(caps)


class IntoReader:
    """Plays a socket for the receive-into path: at most ``cap`` bytes per read."""

    def __init__(self, conn: Connection, rng: random.Random, cap: int) -> None:
        self.conn = conn
        self.rng = rng
        self.cap = cap

        self.offered: set[int] = set()  # id() of every buffer a view was offered into

    def take(self, room: int, left: int) -> int:
        """How much one read takes: often all it may, or one byte short of filling the view."""
        roll = self.rng.random()
        if roll < 0.2 and 1 < room <= self.cap:
            return min(room - 1, left)
        if roll < 0.3:
            return 1
        return min(room, left, self.rng.randint(1, self.cap))

    def feed(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        while view:
            buffer = self.conn.get_buffer(-1)
            assert len(buffer) > 0
            self.offered.add(id(buffer.obj))
            n = self.take(len(buffer), len(view))
            buffer[:n] = view[:n]
            self.conn.buffer_updated(n)
            view = view[n:]


def _outcome(conn: Connection, chunks: list[bytes], feed: Callable[[bytes], None]) -> Any:
    """Feed every chunk, then EOF; the events and how it ended, as plain data."""
    events: list[Any] = []
    end = "open"
    try:
        for chunk in chunks:
            feed(chunk)
            events += [_normal(e) for e in conn.next_events()]
        conn.receive_data(b"")
        while (event := conn.next_event()) is not NEED_DATA:
            events.append(_normal(event))
            if isinstance(event, ConnectionClosed):
                end = "closed"
                break
    except RemoteProtocolError as e:
        end = f"error: {e}"
    return events, end


def both_ways(
    make: Callable[[], Connection], data: bytes, seed: int, most: int = 1 << 17
) -> tuple[Any, Any]:
    rng = random.Random(seed)
    chunks = _cuts(data, rng, most)
    old = make()
    into = make()
    reader = IntoReader(into, rng, _read_cap(rng, len(data)))
    return _outcome(old, chunks, old.receive_data), _outcome(into, chunks, reader.feed)


# -- head links: the golden corpus ----------------------------------------------------------------


def _head() -> Connection:
    conn = Connection(Role.HEAD)
    conn.receive_data(HELLO)
    assert isinstance(conn.next_event(), Hello)
    return conn


@PROPERTY
@given(
    st.lists(st.sampled_from([g.data for g in GOLDEN]), max_size=30),
    st.integers(0, 2**32),
    st.booleans(),
)
def test_head_links_see_the_same_events(frames: list[bytes], seed: int, truncate: bool) -> None:
    data = b"".join(frames)
    if truncate and data:
        data = data[: random.Random(seed).randrange(len(data))]
    old, into = both_ways(_head, data, seed)
    assert into == old


@PROPERTY
@given(st.binary(max_size=600), st.integers(0, 2**32))
def test_garbage_ends_the_same_way(data: bytes, seed: int) -> None:
    old, into = both_ways(_head, data, seed, most=64)
    assert into == old


def test_large_task_argument_on_a_head_link() -> None:
    """Frames over the reused buffer grow it (no allocator on head links): same event."""
    for size in (READ_SIZE - 100, READ_SIZE + 5, 3 << 20):
        argument = bytes(random.Random(size).getrandbits(8) for _ in range(64)) * (size // 64)
        data = encode_event(Task(1 << 40 | 1, 7, argument)) + encode_event(
            Task(1 << 40 | 2, 7, b"x")
        )
        for seed in range(3):
            old, into = both_ways(_head, data, seed, most=1 << 20)
            assert into == old
            assert [e[0] for e in into[0]] == ["Task", "Task", "closed"][: len(into[0])]


# -- fetcher links: parts of several objects, damaged headers -------------------------------------


def _part(oid: int, size: int, offset: int, data: bytes) -> bytes:
    """A part frame as it lies on the wire, whatever its fields (no checks)."""
    body = struct.pack("<BQQ", F.KIND_PART, oid, 0) + struct.pack("<QQ", size, offset) + data
    return struct.pack("<I", len(body)) + body


@st.composite
def answers(draw: st.DrawFn) -> tuple[list[int], bytes, dict[int, bytes]]:
    """(object IDs asked for, an object server's answer stream, each object's bytes)."""
    count = draw(st.integers(1, 4))
    oids = [1 << 40 | (i + 1) for i in range(count)]
    asked = [oid for oid in oids if draw(st.booleans())] or oids[:1]
    objects: dict[int, bytes] = {}
    queues: list[list[bytes]] = []
    for oid in oids:
        # Mostly small enough to run quickly; now and then over 1 MiB, which is allocated.
        size = draw(st.sampled_from([0, 1, 100, 70_000, 200_000, 300_001] * 3 + [1_200_000]))
        rng = random.Random(draw(st.integers(0, 2**32)))
        value = rng.randbytes(size)
        objects[oid] = value
        kind = draw(st.sampled_from(["parts", "parts", "parts", "result", "error"]))
        if kind == "result":
            queues.append([encode_event(Result(oid, value))])
            continue
        if kind == "error":
            queues.append([encode_event(Error(oid, "not here"))])
            continue
        step = draw(st.sampled_from([1000, 65_536, 70_000, 150_000, 1 << 20]))
        frames = [
            _part(oid, size, offset, value[offset : offset + step])
            for offset in range(0, max(size, 1), step)
        ]
        damage = draw(
            st.sampled_from(
                ["none"] * 4 + ["skip", "repeat", "resize", "shift", "overrun", "huge"]
            )
        )
        if damage != "none" and frames:
            at = draw(st.integers(0, len(frames) - 1))
            offset = at * step
            chunk = value[offset : offset + step]
            if damage == "skip" and len(frames) > 1:
                del frames[at]
            elif damage == "repeat":
                frames.insert(at, frames[at])
            elif damage == "resize":
                frames[at] = _part(oid, size + 1, offset, chunk)
            elif damage == "shift":
                frames[at] = _part(oid, size, offset + 1, chunk)
            elif damage == "overrun":
                chunk = chunk or b"x"
                frames[at] = _part(oid, size, size - len(chunk) + 1, chunk)
            elif damage == "huge":
                frames[at] = _part(oid, F.MAX_OBJECT + 1, offset, chunk)
        queues.append(frames)
    # Interleave the objects' frames, each object's in its own order.
    stream = []
    while any(queues):
        q = draw(st.sampled_from([q for q in queues if q]))
        stream.append(q.pop(0))
    if draw(st.booleans()):
        stream.insert(draw(st.integers(0, len(stream))), encode_event(Task(1, 2, b"no")))
    return asked, b"".join(stream), objects


class Guarded:
    """An allocator whose buffers sit between guard bytes that must stay untouched."""

    def __init__(self) -> None:
        self.given: list[tuple[bytearray, int]] = []

    def __call__(self, n: int) -> memoryview:
        raw = bytearray([GUARD]) * (n + 2 * GUARD_BYTES)
        self.given.append((raw, n))
        return memoryview(raw)[GUARD_BYTES : GUARD_BYTES + n]

    def check(self) -> None:
        for raw, n in self.given:
            assert raw[:GUARD_BYTES] == bytes([GUARD]) * GUARD_BYTES
            assert raw[GUARD_BYTES + n :] == bytes([GUARD]) * GUARD_BYTES


def _fetch(asked: list[int], chunks: list[bytes], into: IntoReader | None) -> Any:
    links = Links()
    allocate = Guarded()
    fetcher = Fetcher(links, 4096, allocate)
    for oid in asked:
        fetcher.request(oid, SERVER)
    link = 1
    links.connected(link)
    conn = links.conn(link)
    assert conn is not None
    done: list[Any] = []
    error = None
    for chunk in chunks:
        if into is None:
            pieces = [links.receive(link, chunk)]
        else:
            pieces = []
            view = memoryview(chunk)
            while view and error is None:
                buffer = links.get_buffer(link)
                n = into.take(len(buffer), len(view))
                buffer[:n] = view[:n]
                view = view[n:]
                pieces.append(links.buffer_updated(link, n))
                error = pieces[-1][1]
        for events, why in pieces:
            done += [
                (oid, None if v is None else bytes(v), w)
                for oid, v, w in fetcher.receive(link, events)
            ]
            error = error or why
        if error is not None:
            done += fetcher.lost(link, f"protocol error: {error}")
            break
    allocate.check()
    return sorted(done, key=lambda d: d[0]), error


@PROPERTY
@given(answers(), st.integers(0, 2**32))
def test_fetchers_end_the_same_way(
    answer: tuple[list[int], bytes, dict[int, bytes]], seed: int
) -> None:
    asked, stream, objects = answer
    rng = random.Random(seed)
    chunks = _cuts(stream, rng, 1 << 17)
    old = _fetch(asked, chunks, None)
    reader = IntoReader(Connection(Role.FETCHER), rng, _read_cap(rng, len(stream)))
    into = _fetch(asked, chunks, reader)
    assert into == old
    for oid, value, why in into[0]:
        if value is not None:
            assert value == objects[oid] and not why


@PROPERTY
@given(answers(), st.integers(0, 2**32))
def test_fetcher_connections_see_the_same_events(
    answer: tuple[list[int], bytes, dict[int, bytes]], seed: int
) -> None:
    """The same, one level down: a connection with a part sink that keeps every object."""
    asked, stream, _ = answer
    old, into = both_ways(_keeping_fetcher(asked, permissive=seed % 3 == 0), stream, seed)
    assert into == old


def _keeping_fetcher(
    asked: list[int], landed: list[bytearray] | None = None, permissive: bool = False
) -> Callable[[], Connection]:
    """A fetcher's connection whose part sink keeps the objects in ``asked``.

    Each object's buffer goes to ``landed``. A ``permissive`` sink checks nothing: it gives
    any part of an object asked for a fresh buffer (the connection must still check).
    """

    def make() -> Connection:
        conn = Connection(Role.FETCHER)
        parts: dict[int, F.Parts[bytearray]] = {}

        def allocate(n: int) -> bytearray:
            buffer = bytearray(n)
            if landed is not None:
                landed.append(buffer)
            return buffer

        def sink(oid: int, size: int, offset: int, n: int) -> memoryview | None:
            if oid not in asked:
                return None
            if permissive:
                return memoryview(allocate(n))
            try:
                return parts.setdefault(oid, F.Parts(allocate)).reserve(size, offset, n)
            except (RemoteProtocolError, MemoryError):
                return None

        conn.land(sink, bytearray)
        return conn

    return make


def test_every_cut_through_a_part_header() -> None:
    """A read may end anywhere in a landing part's prefix, header and part fields."""
    value = random.Random(12).randbytes(230_000)
    head = encode_event(Error(9, "first"))
    # The second part is too small to land from its header: only the first one can.
    stream = (
        head
        + _part(7, len(value), 0, value[:200_000])
        + _part(7, len(value), 200_000, value[200_000:])
    )
    for cut in range(len(head), len(head) + 60):
        for second in (cut + 1, cut + 17, cut + 100_000):
            chunks = [stream[:cut], stream[cut:second], stream[second:]]
            old = _keeping_fetcher([7])()
            landed: list[bytearray] = []
            into = _keeping_fetcher([7], landed)()
            reader = IntoReader(into, random.Random(cut), 1 << 16)
            assert _outcome(into, chunks, reader.feed) == _outcome(old, chunks, old.receive_data)
            # Reads shorter than the first part: its bytes were read into the object's buffer.
            assert len(landed) == 1 and id(landed[0]) in reader.offered


@pytest.mark.parametrize(
    ("size", "offset"), [(F.MAX_OBJECT + 1, 0), (1_100_000, 1), ((1 << 20) + 10, 0)]
)
def test_a_damaged_large_part_fails_the_link_the_same_way(size: int, offset: int) -> None:
    """Over 1 MiB, a part the sink can't take lands in a buffer from allocate, then fails."""
    stream = _part(7, size, offset, bytes(1_100_000)) + encode_event(Error(7, "after"))
    for seed in range(3):
        old, into = both_ways(_keeping_fetcher([7]), stream, seed)
        assert into == old
        if size != (1 << 20) + 10:
            assert into[1].startswith("error: part")


# -- the mechanics ----------------------------------------------------------------------------------


def _fetcher(allocate: Callable[[int], Any] = bytearray) -> tuple[Links, Fetcher, Connection]:
    links = Links()
    fetcher = Fetcher(links, F.PART_SIZE, allocate)
    fetcher.request(7, SERVER)
    links.connected(1)
    conn = links.conn(1)
    assert conn is not None
    return links, fetcher, conn


def test_a_large_part_lands_in_the_objects_own_buffer() -> None:
    buffers: list[bytearray] = []

    def allocate(n: int) -> bytearray:
        buffers.append(bytearray(n))
        return buffers[-1]

    links, fetcher, _conn = _fetcher(allocate)
    size = 3 << 20
    value = random.Random(1).randbytes(size)
    stream = _part(7, size, 0, value[: 2 << 20]) + _part(7, size, 2 << 20, value[2 << 20 :])
    pos = 0
    offered = []
    done = []
    while pos < len(stream):
        buffer = links.get_buffer(1)
        offered.append(len(buffer))
        n = min(len(buffer), len(stream) - pos, 1 << 18)
        buffer[:n] = stream[pos : pos + n]
        pos += n
        events, error = links.buffer_updated(1, n)
        assert error is None
        done += fetcher.receive(1, events)
    assert len(buffers) == 1  # one allocation, the object's
    assert done == [(7, buffers[0], "")] and done[0][1] is buffers[0]
    assert buffers[0] == value
    # Once a part's header is in, the view offered is the rest of that part, never more.
    assert max(offered) <= 2 << 20


def test_a_large_result_lands_in_a_buffer_from_allocate() -> None:
    buffers: list[bytearray] = []

    def allocate(n: int) -> bytearray:
        buffers.append(bytearray(n))
        return buffers[-1]

    _links, fetcher, conn = _fetcher(allocate)
    value = random.Random(2).randbytes(5 << 20)
    stream = encode_event(Result(7, value))
    reader = IntoReader(conn, random.Random(3), 1 << 20)
    reader.feed(stream)
    done = fetcher.receive(1, conn.next_events())
    assert len(buffers) == 1
    ((oid, got, why),) = done
    assert oid == 7 and why == "" and got == value
    assert isinstance(got, memoryview) and got.obj is buffers[0]


def test_a_part_nobody_asked_for_is_received_as_usual_and_ignored() -> None:
    _links, fetcher, conn = _fetcher()
    other = random.Random(4).randbytes(200_000)
    reader = IntoReader(conn, random.Random(5), 1 << 16)
    reader.feed(_part(8, len(other), 0, other))
    events = conn.next_events()
    assert [_normal(e) for e in events] == [("Part", 8, len(other), 0, other)]
    assert fetcher.receive(1, events) == []


def test_a_part_past_the_end_is_a_clean_protocol_error() -> None:
    for offset, size in [(1, 200_000), (0, F.MAX_OBJECT + 1), (150_000, 200_000)]:
        *_, conn = _fetcher()
        reader = IntoReader(conn, random.Random(6), 1 << 16)
        reader.feed(_part(7, size, offset, bytes(200_000)))
        with pytest.raises(RemoteProtocolError):
            conn.next_events()
            conn.next_events()
        # Whatever follows a broken stream is taken and dropped.
        reader.feed(b"more bytes")
        with pytest.raises(RemoteProtocolError):
            conn.next_events()


def test_a_part_out_of_order_fails_only_its_object() -> None:
    links, fetcher, conn = _fetcher()
    fetcher.request(8, SERVER)
    good = random.Random(7).randbytes(100_000)
    stream = (
        _part(7, 300_000, 100_000, bytes(100_000))  # the first part must be at 0
        + _part(8, len(good), 0, good)
    )
    reader = IntoReader(conn, random.Random(8), 1 << 16)
    done = []
    view = memoryview(stream)
    while view:
        buffer = links.get_buffer(1)
        n = min(len(buffer), len(view))
        buffer[:n] = view[:n]
        view = view[n:]
        events, error = links.buffer_updated(1, n)
        assert error is None
        done += fetcher.receive(1, events)
    del reader
    assert [(oid, v is None) for oid, v, _ in done] == [(7, True), (8, False)]
    assert "out of order" in done[0][2] and bytes(done[1][1] or b"") == good


def test_small_frames_land_in_one_reused_buffer_and_leave_as_bytes() -> None:
    conn = _head()
    frames = b"".join(encode_event(Task(1 << 40 | i, 9, b"argument")) for i in range(1, 1001))
    seen = set()
    rng = random.Random(9)
    view = memoryview(frames)
    while view:
        buffer = conn.get_buffer(-1)
        seen.add(id(buffer.obj))
        n = min(len(buffer), len(view), rng.randint(1, 4000))
        buffer[:n] = view[:n]
        conn.buffer_updated(n)
        view = view[n:]
    events = conn.next_events()
    assert len(events) == 1000
    assert all(isinstance(e, Task) and type(e.argument) is bytes for e in events)
    # The small first buffer, then the one a full read grows it to, reused from then on.
    assert len(seen) <= 2


def test_a_quiet_link_keeps_a_small_buffer() -> None:
    # 10,000 links that said hello and sent a request each must not hold 256 KiB each.
    conn = Connection(Role.HEAD)
    hello = encode_event(Hello(Role.OBSERVER, 0))
    for data in (hello, encode_event(Status())):
        buffer = conn.get_buffer(-1)
        assert len(buffer) <= 4096
        buffer[: len(data)] = data
        conn.buffer_updated(len(data))
    assert [type(e) for e in conn.next_events()] == [Hello, Status]
    assert len(conn.get_buffer(-1)) <= 4096


def test_buffer_updated_is_checked() -> None:
    conn = _head()
    with pytest.raises(LocalProtocolError):
        conn.buffer_updated(1)  # no buffer was asked for
    buffer = conn.get_buffer(-1)
    with pytest.raises(LocalProtocolError):
        conn.buffer_updated(len(buffer) + 1)
    conn.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        conn.get_buffer(-1)


def test_receive_data_and_receive_into_mix() -> None:
    frames = [encode_event(Fetch(i, 100)) for i in range(1, 40)]
    data = b"".join(frames)
    for cut in range(0, len(data), 7):
        conn = Connection(Role.OBJECT_SERVER)
        if cut:
            conn.receive_data(data[:cut])
        IntoReader(conn, random.Random(cut), 50).feed(data[cut:])
        assert [e.object_id for e in conn.next_events() if isinstance(e, Fetch)] == list(
            range(1, 40)
        )


def test_end_of_stream_in_a_landing_part_is_an_error() -> None:
    *_, conn = _fetcher()
    IntoReader(conn, random.Random(10), 1 << 16).feed(_part(7, 200_000, 0, bytes(100_000))[:-10])
    assert conn.next_events() == []
    conn.receive_data(b"")
    with pytest.raises(RemoteProtocolError, match="middle of a frame"):
        conn.next_event()


def test_a_1_gib_prefix_allocates_nothing_on_the_receive_into_path() -> None:
    conn = _head()
    conn.get_buffer(-1)  # the reused buffer exists before measuring
    conn.buffer_updated(0)
    tracemalloc.start()
    try:
        IntoReader(conn, random.Random(11), 1 << 16).feed(
            struct.pack("<IBQQ", 1 << 30, 1, 1, 2) + bytes(1000)
        )
        assert conn.next_events() == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.timeout(120)
def test_a_byte_at_a_time_costs_linear_time_on_the_receive_into_path() -> None:
    argument = bytes(range(256)) * ((2 << 20) // 256)
    data = encode_event(Task(1, 2, argument))
    conn = _head()
    start = time.perf_counter()
    get, updated = conn.get_buffer, conn.buffer_updated
    for i in range(len(data)):
        get(-1)[0] = data[i]
        updated(1)
    elapsed = time.perf_counter() - start
    assert conn.next_events() == [Task(1, 2, argument)]
    assert elapsed < 15.0


# -- whole clusters ---------------------------------------------------------------------------------


def test_simulated_clusters_read_into_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's seeds, with every head, worker and driver reading through get_buffer."""
    from dista_proto import Driver, Head, Worker
    from tests.sim.support.scenario import run_seed

    rng = random.Random(13)

    def into(self: Any, link: int, data: Any, now: int) -> None:
        view = memoryview(data)
        while view:
            buffer = self.get_buffer(link)
            n = min(len(buffer), len(view), rng.choice([1, 5, 100, 1 << 20]))
            buffer[:n] = view[:n]
            view = view[n:]
            self.buffer_updated(link, n, now)

    monkeypatch.setattr(Worker, "receive_data", into)
    monkeypatch.setattr(Driver, "receive_data", into)
    monkeypatch.setattr(Head, "receive_data", into)
    for seed in range(60):
        run_seed(seed)
