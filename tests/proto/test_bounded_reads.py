"""Bounded reads from the first byte (issue 10).

A frame's header says how long its body is; nothing may be sized from that length before
the header's kind is known to be one the sender may send now, and then only up to what
that kind can hold: a hello is at most 42 bytes, a release exactly 17, a part what the
fetcher asked for, a task up to MAX_FRAME and only once the peer said hello. An announcement
over the limit is refused from the 21 bytes of prefix and header alone, naming the kind, the
length and the limit, on both receive paths, and nothing near its size is allocated: no
`allocate` call, no part sink call, no Python allocation (tracemalloc).

Then the other half of the issue: a hello and a bad frame in one read make the head answer
the hello on a link its connection has already closed; the answer is dropped, silently.
"""

from __future__ import annotations

import struct
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from dista_proto import (
    Close,
    Connection,
    Fetch,
    Head,
    Hello,
    RemoteProtocolError,
    Role,
    Stats,
    Welcome,
    Write,
    decode_event,
    encode_event,
)
from dista_proto import frame as F
from dista_proto._events import Address, Error, Event
from dista_proto._fetcher import Fetcher
from dista_proto._kinds import HELLO_PAYLOAD, body_limits
from dista_proto._links import Links

GIB = 1 << 30
#: Anything allocated while refusing a header must stay far below the announced size.
MOST_ALLOCATED = 2 << 20
DRIVER_HELLO = encode_event(Hello(F.ROLE_DRIVER, 0xABC))
HELLO_LIMIT = F.HEADER + 1 + 8 + 16 + 16  # role, registry, a resume pair and its secret
SERVER = Address("10.0.0.1", 7000)


def header(kind: int, length: int, object_id: int = 1, task_id: int = 0) -> bytes:
    """The 21 bytes of prefix and header announcing a body of ``length`` bytes."""
    return struct.pack("<IBQQ", length, kind, object_id, task_id)


class Spy:
    """An allocator that records what it is asked for, and never gives a buffer."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def __call__(self, n: int) -> bytearray:
        self.asked.append(n)
        raise MemoryError(f"the test's allocator refuses {n} bytes")


@contextmanager
def allocates_little() -> Iterator[None]:
    """Fail if Python allocated anything near the announced size meanwhile."""
    tracemalloc.start()
    try:
        yield
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MOST_ALLOCATED, f"{peak} bytes allocated at the peak"


def feed_into(conn: Connection, data: bytes, step: int) -> None:
    """The receive-into path, ``step`` bytes a read."""
    view = memoryview(data)
    while view:
        buffer = conn.get_buffer()
        n = min(len(buffer), len(view), step)
        buffer[:n] = view[:n]
        conn.buffer_updated(n)
        view = view[n:]


def feed_data(conn: Connection, data: bytes, step: int) -> None:
    for i in range(0, len(data), step):
        conn.receive_data(data[i : i + step])


FEEDS: dict[str, Callable[[Connection, bytes, int], None]] = {
    "into": feed_into,
    "data": feed_data,
}


def refusal(conn: Connection, data: bytes, feed: str, step: int) -> RemoteProtocolError:
    """Feed ``data``; the error it raises, which must come with its last byte, not before."""
    feeder = FEEDS[feed]
    feeder(conn, data[:-1], step)
    assert conn.next_events() == []  # nothing refused before the whole header is here
    feeder(conn, data[-1:], 1)
    with pytest.raises(RemoteProtocolError) as info:
        conn.next_events()
    return info.value


# -- the limits ---------------------------------------------------------------------------------


def test_the_limits_are_the_pages_payloads() -> None:
    # The page's 25-byte resume hello, and our extension's secret after it.
    assert HELLO_PAYLOAD == 25 + 16
    to_head = body_limits(Role.DRIVER, Role.HEAD)
    from_head = body_limits(Role.HEAD, Role.DRIVER)
    assert to_head[F.KIND_HELLO] == HELLO_LIMIT == 58
    assert from_head[F.KIND_WELCOME] == 17 + 16 + 16
    for kind in (F.KIND_RELEASE, F.KIND_CLAIM, F.KIND_RESUMED, F.KIND_CANCEL, F.KIND_STATS):
        assert to_head[kind] == 17, F.kind_name(kind)
    assert to_head[F.KIND_CHECKPOINT] == 17 + 8
    assert from_head[F.KIND_STATS] == 17 + 40
    # A located frame, and a grant's fetch token after it.
    assert from_head[F.KIND_LOCATED] == from_head[F.KIND_COVERED] + 4 + 16 == 17 + 12 + 16
    for kind in (F.KIND_TASK, F.KIND_TASK_AFTER, F.KIND_TASK_MANY, F.KIND_ACTOR_CALL):
        assert to_head[kind] == F.MAX_FRAME, F.kind_name(kind)
    assert to_head[F.KIND_WELCOME] == to_head[F.KIND_FREE] == to_head[0] == to_head[255] == 0
    worker = body_limits(Role.WORKER, Role.HEAD)
    assert worker[F.KIND_SPAN] == 17 + 24
    assert worker[F.KIND_STORED] == worker[F.KIND_DRAIN] + 8 == 17 + 8
    observer = body_limits(Role.OBSERVER, Role.HEAD)
    assert observer[F.KIND_STATUS] == observer[F.KIND_STOP] == 17
    assert body_limits(Role.HEAD, Role.OBSERVER)[F.KIND_STATUS] == F.MAX_FRAME
    assert (
        body_limits(Role.FETCHER, Role.OBJECT_SERVER)[F.KIND_FETCH] == 17 + 8 + 16
    )  # the part, a token
    # A fetcher that asked for no part size yet takes parts of PART_SIZE.
    assert body_limits(Role.OBJECT_SERVER, Role.FETCHER)[F.KIND_PART] == 17 + 16 + F.PART_SIZE


@pytest.mark.parametrize(
    "hello",
    [
        Hello(F.ROLE_DRIVER, 1, resume=None),
        Hello(F.ROLE_WORKER, 1, Address("10.1.2.3", 7001)),
        Hello(F.ROLE_OBSERVER, 0),
        Hello(F.ROLE_CLIENT, 5),
    ],
)
def test_every_hello_fits_its_limit(hello: Hello) -> None:
    from dista_proto._events import Resume

    for event in (hello, Hello(F.ROLE_DRIVER, 1, resume=Resume(7, 1 << 62))):
        data = encode_event(event)
        assert len(data) - F.PREFIX <= HELLO_LIMIT
        head = Connection(Role.HEAD)
        feed_into(head, data, 5)
        assert head.next_events() == [event]


# -- a head link before hello ---------------------------------------------------------------


@pytest.mark.parametrize("feed", ["into", "data"])
@pytest.mark.parametrize("step", [1, 7, 21])
def test_a_1_gib_hello_is_refused_from_its_header(feed: str, step: int) -> None:
    spy = Spy()
    head = Connection(Role.HEAD)
    head.land(None, spy)
    with allocates_little():
        error = refusal(head, header(F.KIND_HELLO, GIB), feed, step)
    message = str(error)
    assert "hello" in message and str(GIB) in message and str(HELLO_LIMIT) in message
    assert error.kind == F.KIND_HELLO and error.field == "length"
    assert spy.asked == []
    # The head says why, in its one error frame.
    (frame,) = head.data_to_send()
    assert isinstance(decode_event(frame, from_head=True), Error)
    assert str(GIB) in decode_event(frame, from_head=True).message  # type: ignore[attr-defined]


@pytest.mark.parametrize("feed", ["into", "data"])
def test_a_hello_one_byte_over_its_limit_is_refused(feed: str) -> None:
    head = Connection(Role.HEAD)
    data = header(F.KIND_HELLO, HELLO_LIMIT + 1) + bytes(HELLO_LIMIT + 1 - F.HEADER)
    FEEDS[feed](head, data, 1 << 16)
    with pytest.raises(
        RemoteProtocolError, match=f"{HELLO_LIMIT + 1} bytes.*limit of {HELLO_LIMIT}"
    ):
        head.next_events()


@pytest.mark.parametrize("feed", ["into", "data"])
@pytest.mark.parametrize("kind", [F.KIND_TASK, F.KIND_RESULT, F.KIND_ACTOR_CREATE, 0, 200])
def test_a_1_gib_frame_before_hello_is_refused_from_its_header(feed: str, kind: int) -> None:
    spy = Spy()
    head = Connection(Role.HEAD)
    head.land(None, spy)
    with allocates_little():
        error = refusal(head, header(kind, GIB), feed, 3)
    expected = "unknown frame kind" if kind not in F.KIND_NAMES else "first frame must be hello"
    assert expected in str(error)
    assert spy.asked == []


@pytest.mark.parametrize("feed", ["into", "data"])
@pytest.mark.parametrize(
    ("kind", "limit"),
    [
        (F.KIND_RELEASE, 17),
        (F.KIND_STATS, 17),
        (F.KIND_CANCEL, 17),
        (F.KIND_CHECKPOINT, 25),
        (F.KIND_RESUMED, 17),
        (F.KIND_TIMELINE, 17),
    ],
)
def test_fixed_size_kinds_after_hello_are_bounded(feed: str, kind: int, limit: int) -> None:
    spy = Spy()
    head = Connection(Role.HEAD)
    head.land(None, spy)
    FEEDS[feed](head, DRIVER_HELLO, 64)
    assert len(head.next_events()) == 1
    with allocates_little():
        error = refusal(head, header(kind, GIB), feed, 5)
    name = F.kind_name(kind)
    assert str(error).startswith(f"{name}: ") and f"limit of {limit} " in str(error)
    assert spy.asked == []


def test_a_large_task_after_hello_still_lands_in_place() -> None:
    """The zero-copy path is kept for what may be large: allocate is asked for the task."""
    spy = Spy()
    head = Connection(Role.HEAD)
    head.land(None, spy)
    feed_into(head, DRIVER_HELLO + header(F.KIND_TASK, GIB), 1 << 16)
    assert [type(e) for e in head.next_events()] == [Hello]
    assert spy.asked == [GIB - F.HEADER]


def test_a_driver_awaiting_welcome_takes_only_a_welcome_sized_one() -> None:
    driver = Connection(Role.DRIVER)
    driver.send(Hello(F.ROLE_DRIVER, 1))
    with allocates_little():
        error = refusal(driver, header(F.KIND_WELCOME, GIB), "into", 4)
    assert "welcome" in str(error) and "limit of 49" in str(error)  # with a secret
    driver = Connection(Role.DRIVER)
    driver.send(Hello(F.ROLE_DRIVER, 1))
    feed_into(driver, encode_event(Welcome(3, 4), from_head=True), 9)
    assert driver.next_events() == [Welcome(3, 4)]


# -- the head's links (`Head` over `Links`) ----------------------------------------------------


def _head(spy: Spy) -> tuple[Head, int]:
    head = Head(epoch=1, first_number=1, allocate=spy)
    return head, head.connection_made(0)


def _into_head(head: Head, link: int, data: bytes, step: int) -> None:
    view = memoryview(data)
    while view:
        buffer = head.get_buffer(link)
        n = min(len(buffer), len(view), step)
        buffer[:n] = view[:n]
        head.buffer_updated(link, n, 0)
        view = view[n:]


def _closed(head: Head, link: int) -> str:
    """The reason the head closes ``link`` with (it must close it)."""
    closes = [d for d in head.decisions() if isinstance(d, Close)]
    assert [c.link for c in closes] == [link]
    return closes[0].reason


@pytest.mark.parametrize("kind", [F.KIND_HELLO, F.KIND_TASK])
@pytest.mark.parametrize("step", [1, 21])
def test_a_head_refuses_a_1_gib_header_before_hello(kind: int, step: int) -> None:
    spy = Spy()
    head, link = _head(spy)
    with allocates_little():
        _into_head(head, link, header(kind, GIB), step)
        reason = _closed(head, link)
    assert reason.startswith("protocol error: ")
    if kind == F.KIND_HELLO:
        assert str(GIB) in reason and f"limit of {HELLO_LIMIT}" in reason
    else:
        assert "the first frame must be hello, not task" in reason
    assert spy.asked == []


def test_a_head_refuses_a_1_gib_header_through_receive_data() -> None:
    head = Head(epoch=1, first_number=1)
    link = head.connection_made(0)
    with allocates_little():
        head.receive_data(link, header(F.KIND_HELLO, GIB)[:10], 0)
        assert head.decisions() == []
        head.receive_data(link, header(F.KIND_HELLO, GIB)[10:], 0)
        assert f"limit of {HELLO_LIMIT}" in _closed(head, link)


# -- part frames ------------------------------------------------------------------------------


@pytest.mark.parametrize("feed", ["into", "data"])
def test_a_part_over_the_part_asked_for_is_refused(feed: str) -> None:
    fetcher = Connection(Role.FETCHER)
    sink_calls: list[tuple[int, ...]] = []

    def sink(*args: int) -> memoryview | None:
        sink_calls.append(args)
        return None

    spy = Spy()
    fetcher.land(sink, spy)
    fetcher.send(Fetch(9, 4096))
    limit = F.HEADER + F.PART_HEADER + 4096
    part = header(F.KIND_PART, limit + 1, 9)
    with allocates_little():
        error = refusal(fetcher, part, feed, 8)
    assert str(error).startswith("part: ")
    assert f"{limit + 1} bytes" in str(error) and f"limit of {limit} " in str(error)
    assert "4096" in str(error)
    assert sink_calls == [] and spy.asked == []


def test_a_part_of_the_size_asked_for_still_lands() -> None:
    fetcher = Connection(Role.FETCHER)
    landed = bytearray(1 << 17)
    fetcher.land(lambda oid, size, offset, n: memoryview(landed)[offset : offset + n])
    fetcher.send(Fetch(9, 1 << 16))
    data = bytes(range(256)) * 512
    frames = bytearray()
    F.append_parts(frames, 9, data, 1 << 16)
    feed_into(fetcher, bytes(frames), 1 << 20)
    events = fetcher.next_events()
    assert len(events) == 2 and bytes(landed) == data


def test_the_largest_part_asked_for_bounds_parts() -> None:
    fetcher = Connection(Role.FETCHER)
    fetcher.send(Fetch(1, 1000))
    fetcher.send(Fetch(2, 0))  # the whole object in a result frame: no part size
    fetcher.send(Fetch(3, 5000))
    fetcher.send(Fetch(4, 10))
    frames = bytearray()
    F.append_parts(frames, 3, bytes(5000), 5000)
    fetcher.receive_data(bytes(frames))
    assert len(fetcher.next_events()) == 1
    with pytest.raises(RemoteProtocolError, match=r"limit of 5033 .*5000 bytes"):
        fetcher.receive_data(header(F.KIND_PART, 5034, 3))
        fetcher.next_events()


def test_a_fetchers_links_refuse_a_part_over_the_size_asked() -> None:
    links = Links()
    spy = Spy()
    fetcher = Fetcher(links, 4096, spy)
    fetcher.request(9, SERVER)
    link = 1
    links.connected(link)
    links.decisions()
    attack = header(F.KIND_PART, F.HEADER + F.PART_HEADER + (64 << 20), 9) + struct.pack(
        "<QQ", 1 << 39, 0
    )
    with allocates_little():
        buffer = links.get_buffer(link)
        buffer[: len(attack)] = attack
        events, error = links.buffer_updated(link, len(attack))
    assert events == [] and error is not None
    assert f"limit of {F.HEADER + F.PART_HEADER + 4096} " in error
    assert spy.asked == []
    assert fetcher.lost(link, f"protocol error: {error}")[0][0] == 9


# -- a hello and a bad frame in one read ------------------------------------------------------


@pytest.mark.parametrize("into", [True, False])
@pytest.mark.parametrize(
    "bad",
    [
        header(F.KIND_HELLO, GIB),  # a second hello
        header(F.KIND_RELEASE, 100),  # a release too long
        b"\x00\x00\x00\x00",  # a length under 17
        encode_event(Welcome(1, 2), from_head=True),  # a welcome to the head
    ],
    ids=["second-hello", "long-release", "short-length", "welcome-to-head"],
)
def test_a_hello_and_a_bad_frame_in_one_read_end_quietly(into: bool, bad: bytes) -> None:
    head = Head(epoch=7, first_number=3)
    link = head.connection_made(0)
    data = DRIVER_HELLO + encode_event(Stats()) + bad
    if into:
        _into_head(head, link, data, len(data))
    else:
        head.receive_data(link, data, 0)  # raised "cannot send welcome" before
    decisions = head.decisions()
    writes = [d for d in decisions if isinstance(d, Write)]
    closes = [d for d in decisions if isinstance(d, Close)]
    assert [c.link for c in closes] == [link]
    assert closes[0].reason.startswith("protocol error: ")
    # Only the error frame goes out: the welcome and the stats reply were dropped.
    sent: list[Event] = []
    for write in writes:
        sent += [decode_event(b, from_head=True) for b in _frames(b"".join(write.buffers))]
    assert [type(e) for e in sent] == [Error]
    assert head.drivers == 0


def _frames(data: bytes) -> list[bytes]:
    out = []
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from("<I", data, pos)
        out.append(data[pos : pos + 4 + length])
        pos += 4 + length
    return out
