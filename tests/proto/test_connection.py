"""Connection: the handshake, who may send which kind which way, end of stream, batching,
zero-copy sending and frames that cannot be sent."""

from __future__ import annotations

import gc
import mmap
import random
import struct
from array import array
from typing import Any

import pytest

from dista_proto import (
    NEED_DATA,
    ActorCall,
    Address,
    Connection,
    ConnectionClosed,
    ConnectionState,
    Error,
    Event,
    Fetch,
    Hello,
    LocalProtocolError,
    Part,
    RemoteProtocolError,
    Result,
    Role,
    Status,
    Task,
    TaskAfter,
    Welcome,
    allowed_kinds,
    decode_event,
    encode_event,
    frame,
)

from .test_golden import GOLDEN

D, W, C, O, H = Role.DRIVER, Role.WORKER, Role.CLIENT, Role.OBSERVER, Role.HEAD
S, F = Role.OBJECT_SERVER, Role.FETCHER
MAX_PAYLOAD = 1073741807

HELLOS: dict[Role, Hello] = {
    D: Hello(1, 0xABC),
    W: Hello(2, 0xABC, address=Address("127.0.0.1", 9000)),
    C: Hello(3, 0xABC),
    O: Hello(4, 0),
}
PEERS = [D, W, C, O]


def _sample(kind: int, from_head: bool) -> Event:
    """A valid event of ``kind``, preferring one encoded for this direction."""
    for g in GOLDEN:
        if g.event.kind == kind and from_head in g.directions:
            return g.event
    return next(g.event for g in GOLDEN if g.event.kind == kind)


def _frame(kind: int, from_head: bool) -> bytes:
    for g in GOLDEN:
        if g.event.kind == kind and from_head in g.directions:
            return g.data
    return next(g.data for g in GOLDEN if g.event.kind == kind)


def _events(conn: Connection) -> list[Any]:
    out: list[Any] = []
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            return out
        out.append(event)
        if isinstance(event, ConnectionClosed):
            return out


def _sent(conn: Connection) -> bytes:
    return b"".join(conn.data_to_send())


def _head_after(role: Role) -> Connection:
    """A head connection that has taken ``role``'s hello (and welcomed a driver)."""
    head = Connection(H)
    head.receive_data(encode_event(HELLOS[role]))
    assert _events(head) == [HELLOS[role]]
    if role in (D, C):
        head.send(Welcome(5, 6))
    head.data_to_send()
    return head


def _peer_after(role: Role) -> Connection:
    """A peer connection that said hello (and, as a driver, was welcomed)."""
    peer = Connection(role)
    peer.send(HELLOS[role])
    peer.data_to_send()
    if role in (D, C):
        peer.receive_data(encode_event(Welcome(5, 6), from_head=True))
        assert _events(peer) == [Welcome(5, 6)]
    return peer


def _opened(role: Role) -> Connection:
    if role == H:
        raise AssertionError("use _head_after")
    if role in (S, F):
        return Connection(role)
    return _peer_after(role)


def _error_frame(data: bytes) -> Error:
    event = decode_event(data, from_head=True)
    assert isinstance(event, Error)
    return event


# -- the page's "sent by" column, transcribed by hand ------------------------------------------

# (sender, receiver) pairs per kind, as the page's table says; CLIENT is a driver to the head.
PAGE_SENT_BY: dict[str, set[tuple[Role, Role]]] = {
    "task": {(D, H), (H, W)},
    "result": {(W, H), (H, D)},
    "error": {(W, H), (H, D)},
    "hello": {(D, H), (W, H), (O, H)},
    "welcome": {(H, D)},
    "task-after": {(D, H)},
    "stored": {(W, H)},
    "located": {(H, D)},
    "fetch": {(F, S)},  # "driver or worker to a worker"
    "task-inputs": {(H, W)},
    "release": {(D, H)},
    "free": {(H, W)},
    "stats": {(D, H), (H, D)},
    "holding": {(W, H)},
    "claim": {(D, H)},
    "resumed": {(D, H)},
    "span": {(W, H)},
    "timeline": {(D, H), (H, D)},
    "actor-create": {(D, H), (H, W)},
    "actor-call": {(D, H), (H, W)},
    "actor-kill": {(D, H), (H, W)},
    "checkpoint": {(D, H), (H, W)},
    "checkpointed": {(W, H)},
    "actor-restore": {(H, W)},
    "covered": {(H, D)},
    "status": {(O, H), (H, O)},
    "stop": {(O, H), (H, W)},
    "task-many": {(D, H), (H, W)},
    "drain": {(W, H)},
    "adopt": {(H, W)},
    "adopted": {(W, H)},
    "cancel": {(D, H)},
    "part": {(S, F)},  # "worker to a driver or worker that fetched"
}
# ... and what the page's prose adds:
PAGE_PROSE: dict[str, set[tuple[Role, Role]]] = {
    # "One that sends an empty fetch ... gets the whole object in one result frame, or an
    # error frame if it doesn't fit."
    "result": {(S, F), (D, H)},  # and resuming: "a small result or error back as a result"
    "error": {(S, F), (D, H)},
    # "An observer ... Its timeline frame gets every driver's finished tasks"
    "timeline": {(O, H), (H, O)},
}
# ... and the project's decisions (in _kinds.py): the head may say why it drops anyone, and
# grants a worker's object to a fetcher with a located frame (docs/protocol.md, "Extensions:
# fetch grants").
PROJECT_DECISIONS: dict[str, set[tuple[Role, Role]]] = {
    "error": {(H, W), (H, O)},
    "located": {(H, W)},
    "actor-open": {(D, H)},  # Dista's own kind: an actor's capability
    "actor-name": {(D, H)},  # Dista's own kinds: named actors
    "actor-lookup": {(D, H)},
    "actor-build": {(H, W)},  # Dista's own kind: a build's number, for the fences
    "actor-order": {(D, H)},  # Dista's own kind: where kept calls ran
    "mapped": {(S, F)},  # Dista's own kind: an object sent to a fetcher's mailbox
    "task-names": {(D, H), (W, H)},  # Dista's own kind: the tasks a peer imports
    "labels": {(D, H), (O, H), (H, O)},  # Dista's own kinds, for people: what IDs are called,
    "vitals": {(D, H), (W, H)},  # a process's pid and memory,
    "snapshot": {(O, H), (H, O)},  # and a dashboard's snapshot
}


def _hand_table(sender: Role, receiver: Role) -> set[int]:
    as_driver = {C: D}
    s, r = as_driver.get(sender, sender), as_driver.get(receiver, receiver)
    kinds = set()
    for source in (PAGE_SENT_BY, PAGE_PROSE, PROJECT_DECISIONS):
        for name, pairs in source.items():
            if (s, r) in pairs:
                kinds.add(next(k for k, n in frame.KIND_NAMES.items() if n == name))
    return kinds


LINKS = [
    (D, H),
    (H, D),
    (C, H),
    (H, C),
    (W, H),
    (H, W),
    (O, H),
    (H, O),
    (F, S),
    (S, F),
]
LINK_IDS = [f"{s.name}-to-{r.name}" for s, r in LINKS]


@pytest.mark.parametrize(("sender", "receiver"), LINKS, ids=LINK_IDS)
def test_roles_table_matches_the_page(sender: Role, receiver: Role) -> None:
    assert set(allowed_kinds(sender, receiver)) == _hand_table(sender, receiver)


def test_roles_table_spot_checks() -> None:
    # A few rows read straight off the page.
    assert frame.KIND_TASK in allowed_kinds(D, H)
    assert frame.KIND_TASK in allowed_kinds(H, W)
    assert frame.KIND_TASK not in allowed_kinds(H, D)
    assert frame.KIND_TASK not in allowed_kinds(W, H)
    assert frame.KIND_STORED in allowed_kinds(W, H)
    assert frame.KIND_STORED not in allowed_kinds(H, D)
    assert frame.KIND_COVERED in allowed_kinds(H, D)
    assert frame.KIND_COVERED not in allowed_kinds(H, W)
    assert frame.KIND_STOP in allowed_kinds(O, H)
    assert frame.KIND_STOP in allowed_kinds(H, W)
    assert frame.KIND_STOP not in allowed_kinds(D, H)
    assert frame.KIND_FETCH not in allowed_kinds(D, H)
    assert frame.KIND_PART in allowed_kinds(S, F)
    assert frame.KIND_PART not in allowed_kinds(W, H)
    assert allowed_kinds(D, W) == frozenset()
    assert allowed_kinds(W, W) == frozenset()
    assert allowed_kinds(H, S) == frozenset()


# -- every kind, every link: allowed ones pass, the rest are refused both ways -----------------

LINK_KINDS = [
    pytest.param(s, r, k, id=f"{s.name}-to-{r.name}-{frame.kind_name(k)}")
    for s, r in LINKS
    for k in range(1, 35)
]


@pytest.mark.parametrize(("sender", "receiver", "kind"), LINK_KINDS)
def test_kind_on_link(sender: Role, receiver: Role, kind: int) -> None:
    from_head = sender == H
    event = _sample(kind, from_head)
    data = _frame(kind, from_head)
    tx = _head_after(receiver) if sender == H else _opened(sender)
    rx = _head_after(sender) if receiver == H else _opened(receiver)
    after_handshake = allowed_kinds(sender, receiver) - {frame.KIND_HELLO, frame.KIND_WELCOME}
    if kind in after_handshake:
        tx.send(event)
        sent = _sent(tx)
        assert sent == data
        rx.receive_data(sent)
        assert _events(rx) == [event]
        assert rx.data_to_send() == []
        return
    with pytest.raises(LocalProtocolError) as sending:
        tx.send(event)
    assert sending.value.kind == kind
    assert tx.data_to_send() == []
    rx.receive_data(data)
    with pytest.raises(RemoteProtocolError) as receiving:
        rx.next_event()
    assert receiving.value.kind == kind
    assert frame.kind_name(kind) in str(receiving.value)
    assert rx.their_state == ConnectionState.ERROR
    if receiver == H:
        # The head says why before it drops the peer.
        refusal = _error_frame(_sent(rx))
        assert refusal.object_id == 0
        assert frame.kind_name(kind) in refusal.message
    else:
        assert rx.data_to_send() == []


# -- the handshake ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [k for k in range(1, 35) if k != frame.KIND_HELLO])
def test_head_refuses_any_frame_before_hello(kind: int) -> None:
    head = Connection(H)
    head.receive_data(_frame(kind, False))
    with pytest.raises(RemoteProtocolError) as info:
        head.next_event()
    assert "hello" in str(info.value)
    assert head.their_state == ConnectionState.ERROR
    refusal = _error_frame(_sent(head))
    assert refusal.object_id == 0
    assert "hello" in refusal.message
    assert frame.kind_name(kind) in refusal.message
    # The error sticks, and the head has nothing more to say.
    with pytest.raises(RemoteProtocolError):
        head.next_event()
    with pytest.raises(RemoteProtocolError):
        head.next_events()
    with pytest.raises(LocalProtocolError):
        head.send(Error(0, "again"))
    assert head.data_to_send() == []


@pytest.mark.parametrize("kind", [0, 35, 200, 255])
def test_head_refuses_unknown_kinds_before_hello(kind: int) -> None:
    head = Connection(H)
    head.receive_data(struct.pack("<IBQQ", 17, kind, 0, 0))
    with pytest.raises(RemoteProtocolError) as info:
        head.next_event()
    assert info.value.kind == kind
    assert "unknown" in _error_frame(_sent(head)).message


@pytest.mark.parametrize("role", PEERS)
def test_head_refuses_a_second_hello(role: Role) -> None:
    head = Connection(H)
    head.receive_data(encode_event(HELLOS[role]))
    assert head.next_event() == HELLOS[role]
    head.receive_data(encode_event(HELLOS[role]))
    with pytest.raises(RemoteProtocolError) as info:
        head.next_event()
    assert info.value.kind == frame.KIND_HELLO
    assert "hello" in _error_frame(_sent(head)).message


@pytest.mark.parametrize("role", PEERS)
def test_head_refuses_a_second_hello_in_the_same_read(role: Role) -> None:
    head = Connection(H)
    head.receive_data(encode_event(HELLOS[role]) * 2)
    assert head.next_event() == HELLOS[role]
    with pytest.raises(RemoteProtocolError):
        head.next_event()


@pytest.mark.parametrize("kind", range(1, 35))
def test_head_cannot_send_before_hello(kind: int) -> None:
    head = Connection(H)
    with pytest.raises(LocalProtocolError) as info:
        head.send(_sample(kind, True))
    assert info.value.kind == kind
    assert head.data_to_send() == []
    assert head.our_state == ConnectionState.AWAIT_HELLO


@pytest.mark.parametrize("role", PEERS)
@pytest.mark.parametrize("kind", [k for k in range(1, 35) if k != frame.KIND_HELLO])
def test_peer_must_send_hello_first(role: Role, kind: int) -> None:
    peer = Connection(role)
    with pytest.raises(LocalProtocolError) as info:
        peer.send(_sample(kind, False))
    assert info.value.kind == kind
    assert peer.data_to_send() == []
    peer.send(HELLOS[role])  # still possible afterwards
    assert _sent(peer) == encode_event(HELLOS[role])


@pytest.mark.parametrize("role", PEERS)
@pytest.mark.parametrize("other", PEERS)
def test_peer_hello_must_carry_its_own_role(role: Role, other: Role) -> None:
    if role == other:
        return
    peer = Connection(role)
    with pytest.raises(LocalProtocolError):
        peer.send(HELLOS[other])
    assert peer.data_to_send() == []
    assert peer.our_state == ConnectionState.AWAIT_HELLO


@pytest.mark.parametrize(
    "hello",
    [
        Hello(2, 1),  # a worker's hello without its address
        Hello(1, 1, address=Address("1.2.3.4", 5)),  # a driver's with one
        Hello(2, 1, address=Address("1.2.3.4", 65536)),
        Hello(2, 1, address=Address("1.2.3", 5)),
        Hello(1, 1 << 64),
    ],
)
def test_impossible_hello_is_refused_and_queues_nothing(hello: Hello) -> None:
    peer = Connection(Role(hello.role))
    with pytest.raises(LocalProtocolError):
        peer.send(hello)
    assert peer.data_to_send() == []
    assert peer.our_state == ConnectionState.AWAIT_HELLO


@pytest.mark.parametrize("role", PEERS)
def test_peer_cannot_send_hello_twice(role: Role) -> None:
    peer = Connection(role)
    peer.send(HELLOS[role])
    peer.data_to_send()
    with pytest.raises(LocalProtocolError):
        peer.send(HELLOS[role])
    assert peer.data_to_send() == []


@pytest.mark.parametrize("role", [D, C])
@pytest.mark.parametrize(
    "kind", [k for k in range(1, 35) if k not in (frame.KIND_WELCOME, frame.KIND_ERROR)]
)
def test_driver_accepts_only_welcome_or_error_first(role: Role, kind: int) -> None:
    peer = Connection(role)
    peer.send(HELLOS[role])
    peer.receive_data(_frame(kind, True))
    with pytest.raises(RemoteProtocolError) as info:
        peer.next_event()
    assert "welcome" in str(info.value)
    assert peer.their_state == ConnectionState.ERROR
    assert _sent(peer) == encode_event(HELLOS[role])  # only its own hello: no error frame


@pytest.mark.parametrize("role", [D, C])
def test_driver_handshake_states(role: Role) -> None:
    peer = Connection(role)
    assert (peer.our_state, peer.their_state) == (
        ConnectionState.AWAIT_HELLO,
        ConnectionState.AWAIT_WELCOME,
    )
    head = Connection(H)
    assert (head.our_state, head.their_state) == (
        ConnectionState.AWAIT_HELLO,
        ConnectionState.AWAIT_HELLO,
    )
    peer.send(HELLOS[role])
    assert peer.our_state == ConnectionState.OPEN
    head.receive_data(_sent(peer))
    assert head.next_event() == HELLOS[role]
    assert head.their_role == role
    assert (head.our_state, head.their_state) == (
        ConnectionState.AWAIT_WELCOME,
        ConnectionState.OPEN,
    )
    # Until it welcomes the driver, the head may send welcome or error only.
    with pytest.raises(LocalProtocolError):
        head.send(Result(1, b"x"))
    assert head.data_to_send() == []
    head.send(Welcome(0x123456, 0xDEADBEEF01))
    assert head.our_state == ConnectionState.OPEN
    with pytest.raises(LocalProtocolError):
        head.send(Welcome(1, 2))  # once only
    peer.receive_data(_sent(head))
    assert peer.next_event() == Welcome(0x123456, 0xDEADBEEF01)
    assert peer.their_state == ConnectionState.OPEN
    # A second welcome is refused.
    peer.receive_data(encode_event(Welcome(1, 2), from_head=True))
    with pytest.raises(RemoteProtocolError):
        peer.next_event()


def test_head_refuses_a_driver_with_an_error_frame() -> None:
    # "the head refuses the old one with an error frame rather than give it the new one's
    # objects"
    driver = Connection(D)
    driver.send(Hello(1, 7))
    head = Connection(H)
    head.receive_data(_sent(driver))
    head.next_event()
    head.send(Error(0, "stale epoch"))
    head.close()
    with pytest.raises(LocalProtocolError):
        head.send(Welcome(1, 2))
    driver.receive_data(_sent(head))
    driver.receive_data(b"")
    assert _events(driver) == [Error(0, "stale epoch"), ConnectionClosed()]


def test_driver_pipelines_before_its_welcome() -> None:
    driver = Connection(D)
    driver.send(Hello(1, 7))
    driver.send(Task(1, 2, b"a"))  # no need to wait for the welcome to submit
    head = Connection(H)
    head.receive_data(_sent(driver))
    assert _events(head) == [Hello(1, 7), Task(1, 2, b"a")]


@pytest.mark.parametrize("role", [W, O])
def test_workers_and_observers_get_no_welcome(role: Role) -> None:
    peer = Connection(role)
    assert peer.their_state == ConnectionState.OPEN
    peer.send(HELLOS[role])
    head = Connection(H)
    head.receive_data(_sent(peer))
    assert head.next_event() == HELLOS[role]
    assert head.our_state == ConnectionState.OPEN
    with pytest.raises(LocalProtocolError):
        head.send(Welcome(1, 2))
    assert head.data_to_send() == []
    # The head speaks at once.
    reply = Status("ok") if role == O else Task(1, 2, b"x")
    head.send(reply)
    peer.receive_data(_sent(head))
    assert peer.next_event() == reply
    peer.receive_data(encode_event(Welcome(1, 2), from_head=True))
    with pytest.raises(RemoteProtocolError):
        peer.next_event()


# -- object-server links ---------------------------------------------------------------------


def test_object_server_link_has_no_hello() -> None:
    fetcher, server = Connection(F), Connection(S)
    for conn in (fetcher, server):
        assert (conn.our_state, conn.their_state) == (ConnectionState.OPEN,) * 2
    fetcher.send(Fetch(42, 1 << 20))
    server.receive_data(_sent(fetcher))
    assert server.next_event() == Fetch(42, 1 << 20)
    server.send(Part(42, 6, 0, b"abc"))
    server.send(Part(42, 6, 3, b"def"))
    server.send(Result(43, b"whole"))
    server.send(Error(44, "no such object"))
    fetcher.receive_data(_sent(server))
    fetcher.receive_data(b"")
    assert _events(fetcher) == [
        Part(42, 6, 0, b"abc"),
        Part(42, 6, 3, b"def"),
        Result(43, b"whole"),
        Error(44, "no such object"),
        ConnectionClosed(),
    ]


@pytest.mark.parametrize("role", [F, S])
def test_object_server_link_refuses_hello(role: Role) -> None:
    conn = Connection(role)
    with pytest.raises(LocalProtocolError):
        conn.send(Hello(2, 1, address=Address("1.2.3.4", 5)))
    assert conn.data_to_send() == []
    conn.receive_data(encode_event(Hello(2, 1, address=Address("1.2.3.4", 5))))
    with pytest.raises(RemoteProtocolError):
        conn.next_event()
    assert conn.data_to_send() == []  # only the head sends an error frame on its own


def test_fetch_goes_one_way_only() -> None:
    server = Connection(S)
    with pytest.raises(LocalProtocolError):
        server.send(Fetch(1))
    fetcher = Connection(F)
    with pytest.raises(LocalProtocolError):
        fetcher.send(Result(1, b""))
    fetcher.receive_data(encode_event(Fetch(1)))
    with pytest.raises(RemoteProtocolError):
        fetcher.next_event()


# -- end of stream ---------------------------------------------------------------------------


def test_eof_between_frames_is_a_clean_close() -> None:
    head = _head_after(D)
    head.receive_data(encode_event(Task(1, 2, b"a")))
    head.receive_data(b"")
    assert _events(head) == [Task(1, 2, b"a"), ConnectionClosed()]
    assert head.their_state == ConnectionState.CLOSED
    assert head.next_event() == ConnectionClosed()  # and stays closed
    assert head.data_to_send() == []
    with pytest.raises(LocalProtocolError):
        head.receive_data(b"more")


def test_eof_before_anything_is_a_clean_close() -> None:
    head = Connection(H)
    head.receive_data(b"")
    assert head.next_event() == ConnectionClosed()
    assert head.data_to_send() == []


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 20, 21, 22])
def test_eof_mid_frame_is_an_error(cut: int) -> None:
    data = encode_event(Task(1, 2, b"ab"))  # 23 bytes
    head = _head_after(D)
    head.receive_data(data + data[:cut])
    head.receive_data(b"")
    assert head.next_event() == Task(1, 2, b"ab")
    with pytest.raises(RemoteProtocolError) as info:
        head.next_event()
    assert "middle of a frame" in str(info.value)
    assert head.their_state == ConnectionState.ERROR
    assert "middle of a frame" in _error_frame(_sent(head)).message
    with pytest.raises(RemoteProtocolError):
        head.next_event()


def test_eof_mid_large_frame_is_an_error() -> None:
    head = _head_after(D)
    head.receive_data(struct.pack("<IBQQ", 17 + (2 << 20), 1, 1, 2) + bytes(1000))
    assert head.next_event() is NEED_DATA
    head.receive_data(bytes(1000))
    assert head.next_event() is NEED_DATA
    head.receive_data(b"")
    with pytest.raises(RemoteProtocolError):
        head.next_event()


def test_eof_on_a_peer_mid_frame_is_an_error_without_an_error_frame() -> None:
    peer = _peer_after(W)
    peer.receive_data(encode_event(Task(1, 2, b"ab"), from_head=True)[:10])
    peer.receive_data(b"")
    with pytest.raises(RemoteProtocolError):
        peer.next_event()
    assert peer.data_to_send() == []


# -- batches with an error in them -----------------------------------------------------------

GOOD = [Hello(1, 7), Task(1, 2, b"a"), Task(3, 4, b"b")]


def _batch(bad: bytes, after: bytes = b"") -> bytes:
    return b"".join(encode_event(e) for e in GOOD) + bad + after


@pytest.mark.parametrize(
    "bad",
    [
        struct.pack("<IBQQ", 17, 99, 0, 0),  # unknown kind
        encode_event(Welcome(1, 2), from_head=True),  # a kind a driver may not send
        encode_event(Hello(1, 7)),  # a second hello
        struct.pack("<IBQQ", 18, frame.KIND_RELEASE, 1, 0) + b"x",  # a bad payload
        struct.pack("<I", 3),  # a bad length
        struct.pack("<I", (1 << 30) + 1),
    ],
)
def test_next_events_returns_the_good_frames_then_raises(bad: bytes) -> None:
    head = Connection(H)
    head.receive_data(_batch(bad, encode_event(Task(5, 6, b"never"))))
    assert head.next_events() == GOOD
    with pytest.raises(RemoteProtocolError):
        head.next_events()
    with pytest.raises(RemoteProtocolError):
        head.next_event()
    refusals = head.data_to_send()
    assert len(refusals) == 1
    assert _error_frame(bytes(refusals[0])).message.startswith("protocol error: ")


@pytest.mark.parametrize(
    "bad", [struct.pack("<IBQQ", 17, 99, 0, 0), encode_event(Welcome(1, 2), from_head=True)]
)
def test_next_event_returns_the_good_frames_then_raises(bad: bytes) -> None:
    head = Connection(H)
    head.receive_data(_batch(bad))
    assert [head.next_event() for _ in GOOD] == GOOD
    with pytest.raises(RemoteProtocolError):
        head.next_event()


def test_a_bad_length_fails_as_soon_as_the_prefix_arrives() -> None:
    head = _head_after(D)
    head.receive_data(b"\x05\x00")
    assert head.next_event() is NEED_DATA
    head.receive_data(b"\x00\x00")  # length 5: shorter than a header
    with pytest.raises(RemoteProtocolError):
        head.next_event()


def test_next_events_is_empty_while_data_is_missing() -> None:
    head = _head_after(D)
    assert head.next_events() == []
    head.receive_data(encode_event(Task(1, 2, b"ab"))[:9])
    assert head.next_events() == []
    assert head.next_event() is NEED_DATA


# -- receiving: the caller keeps its buffers ---------------------------------------------------


def _reused_buffer_feed(data: bytes, chunk: int) -> list[Any]:
    """Feed ``data`` the way a binding reusing one receive buffer does (``recv_into``)."""
    head = _head_after(D)
    buf = bytearray(chunk)
    out: list[Any] = []
    for i in range(0, len(data), chunk):
        piece = data[i : i + chunk]
        buf[: len(piece)] = piece
        head.receive_data(memoryview(buf)[: len(piece)])
        out += _events(head)
        buf[:] = bytes(chunk)  # the next recv_into overwrites it
    return out


@pytest.mark.parametrize(
    "size",
    [
        10,
        200_000,  # under 1 MiB: grown in one buffer
        2 << 20,  # collected as pieces; regression: these once kept the caller's buffer
    ],
)
def test_receive_data_does_not_keep_the_callers_buffer(size: int) -> None:
    payload = random.Random(size).randbytes(size)  # not periodic: a reused chunk shows
    data = encode_event(Task(1, 2, payload)) + encode_event(Task(3, 4, b"next"))
    assert _reused_buffer_feed(data, 65536) == [Task(1, 2, payload), Task(3, 4, b"next")]


def test_receive_data_counts_bytes_of_any_memoryview() -> None:
    # Regression: a large frame's pieces were once counted in items, not bytes.
    payload = random.Random(3).randbytes(2 << 20)
    data = encode_event(Task(1, 2, payload))
    head = _head_after(D)
    head.receive_data(data[:100])
    assert head.next_event() is NEED_DATA
    rest = data[100:]
    aligned = len(rest) // 4 * 4
    head.receive_data(memoryview(array("I", rest[:aligned])))
    head.receive_data(rest[aligned:])
    assert head.next_event() == Task(1, 2, payload)


def test_receive_data_takes_bytearrays_and_views() -> None:
    data = encode_event(Task(1, 2, b"abc")) * 3
    head = _head_after(D)
    head.receive_data(bytearray(data[:30]))
    head.receive_data(memoryview(data)[30:50])
    head.receive_data(memoryview(bytearray(data[50:])))
    assert _events(head) == [Task(1, 2, b"abc")] * 3


def test_forbidden_kind_is_refused_from_its_header() -> None:
    # The body of a frame that will be refused is never waited for, let alone buffered.
    head = _head_after(W)
    head.receive_data(struct.pack("<IBQQ", 1 << 30, frame.KIND_TASK, 1, 2))
    with pytest.raises(RemoteProtocolError) as info:
        head.next_event()
    assert info.value.kind == frame.KIND_TASK
    assert "a worker may not send task to a head" in str(info.value)


@pytest.mark.parametrize("cut", [4, 5, 12, 20])
def test_forbidden_kind_is_refused_from_its_header_even_when_split(cut: int) -> None:
    # Regression: a header arriving after its length prefix was once collected whole (up to
    # 1 GiB, before any hello) and refused only then.
    head = Connection(H)  # before hello: nothing but hello is allowed
    header = struct.pack("<IBQQ", 1 << 30, frame.KIND_TASK, 1, 2)
    head.receive_data(header[:cut])
    assert head.next_event() is NEED_DATA
    head.receive_data(header[cut:])
    with pytest.raises(RemoteProtocolError):
        head.next_event()


# -- sending: coalescing and zero copy -------------------------------------------------------


def _header(kind: int, object_id: int, task_id: int, size: int) -> bytes:
    return struct.pack("<IBQQ", 17 + size, kind, object_id, task_id)


@pytest.mark.parametrize("make", [bytes, bytearray, lambda n: memoryview(bytes(n))])
def test_large_payload_is_sent_from_where_it_lies(make: Any) -> None:
    payload = make(65536)
    driver = _peer_after(D)
    driver.send(Task(1, 2, payload))
    buffers = driver.data_to_send()
    assert len(buffers) == 2
    assert buffers[0] == _header(1, 1, 2, 65536)
    assert buffers[-1] is payload


def test_large_payload_of_another_format_is_a_view_over_it() -> None:
    words = array("I", range(20000))  # 80,000 bytes in 20,000 items
    driver = _peer_after(D)
    driver.send(Result(9, memoryview(words)))
    buffers = driver.data_to_send()
    assert buffers[0] == _header(2, 9, 0, 80000)
    view = buffers[-1]
    assert isinstance(view, memoryview)
    assert view.obj is words
    assert view.nbytes == 80000
    assert bytes(view) == words.tobytes()


def test_small_payloads_are_coalesced() -> None:
    payload = bytes(65535)
    driver = _peer_after(D)
    driver.send(Task(1, 2, payload))
    driver.send(Task(3, 4, b"ab"))
    buffers = driver.data_to_send()
    assert len(buffers) == 1
    assert buffers[0] == _header(1, 1, 2, 65535) + payload + _header(1, 3, 4, 2) + b"ab"
    assert driver.data_to_send() == []


def test_large_payloads_split_the_coalesced_stream() -> None:
    big = bytes(range(256)) * 512  # 128 KiB
    driver = _peer_after(D)
    driver.send(Task(1, 2, b"a"))
    driver.send(ActorCall(3, 4, 5, big))
    driver.send(Task(6, 7, b"b"))
    buffers = driver.data_to_send()
    assert len(buffers) == 3
    assert buffers[0] == (
        _header(1, 1, 2, 1) + b"a" + _header(20, 3, 4, 8 + len(big)) + struct.pack("<Q", 5)
    )
    assert buffers[1] is big
    assert buffers[2] == _header(1, 6, 7, 1) + b"b"


def test_large_received_payload_is_a_view() -> None:
    payload = bytes(range(256)) * 256  # 64 KiB
    head = _head_after(D)
    head.receive_data(encode_event(Task(1, 2, payload)) + encode_event(Task(3, 4, b"x")))
    big, small = _events(head)
    assert isinstance(big.argument, memoryview)
    assert big.argument == payload
    assert isinstance(small.argument, bytes)


# -- impossible frames -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        Task(1 << 64, 0, b"x"),
        Task(-1, 0, b"x"),
        Task(0, 1 << 64, b"x"),
        Task(0, 1 << 64, bytes(100_000)),
        TaskAfter(1, 2, (1 << 64,)),
        TaskAfter(1, 2, (1, 2)),  # two inputs without gather
        TaskAfter(1, 2, (1,), results=0),
        ActorCall(1, 2, 1 << 64, b""),
        Part(1, 10, 8, b"abc"),
        Part(1, (1 << 40) + 1, 0, b""),
        Status("text from a driver"),
    ],
)
def test_impossible_event_is_refused_and_queues_nothing(event: Event) -> None:
    driver = _peer_after(D)
    driver.send(Task(7, 7, b"before"))
    with pytest.raises(LocalProtocolError):
        driver.send(event)
    assert _sent(driver) == encode_event(Task(7, 7, b"before"))
    driver.send(Task(8, 8, b"after"))
    assert _sent(driver) == encode_event(Task(8, 8, b"after"))


def _with_map(size: int, check: Any) -> None:
    """Run ``check`` on a memoryview of an anonymous map of ``size`` bytes, then unmap it.

    The map costs no memory until its pages are touched, so a test can hold 1 GiB.
    """
    huge = mmap.mmap(-1, size)
    try:
        check(memoryview(huge))
    finally:
        gc.collect()  # tracebacks and cycles may still hold views of the map
        huge.close()


def test_payload_over_max_payload_is_refused_without_touching_it() -> None:
    def check(view: memoryview) -> None:
        driver = _peer_after(D)
        with pytest.raises(LocalProtocolError) as info:
            driver.send(Task(1, 2, view))
        assert "MAX_PAYLOAD" in str(info.value)
        assert driver.data_to_send() == []
        # A prefix counts too: 8 bytes of actor ID and MAX_PAYLOAD - 7 of argument.
        with pytest.raises(LocalProtocolError):
            driver.send(ActorCall(1, 2, 3, view[: MAX_PAYLOAD - 7]))
        assert driver.data_to_send() == []
        with pytest.raises(LocalProtocolError):
            encode_event(Task(1, 2, view))
        del info

    _with_map(MAX_PAYLOAD + 1, check)


def test_payload_of_exactly_max_payload_is_passed_through() -> None:
    def check(view: memoryview) -> None:
        worker = _peer_after(W)
        worker.send(Result(1, view))
        buffers = worker.data_to_send()
        assert len(buffers) == 2
        assert buffers[0] == bytes.fromhex("00000040 02 0100000000000000 0000000000000000")
        assert buffers[1] is view
        call = view[: MAX_PAYLOAD - 8]
        head = _head_after(W)
        head.send(ActorCall(1, 2, 3, call))
        buffers = head.data_to_send()
        assert buffers[0] == bytes.fromhex(
            "00000040 14 0100000000000000 0200000000000000 0300000000000000"
        )
        assert buffers[1] is call

    _with_map(MAX_PAYLOAD, check)


def test_non_contiguous_payload_is_sent_whole_or_refused_cleanly() -> None:
    # Regression: a strided view once raised TypeError with its header already queued.
    driver = _peer_after(D)
    strided = memoryview(b"abcdef")[::2]
    try:
        driver.send(Task(1, 2, strided))
    except LocalProtocolError:
        assert driver.data_to_send() == []
    else:
        assert _sent(driver) == _header(1, 1, 2, 3) + b"ace"


def test_large_non_contiguous_payload_is_sent_whole() -> None:
    source = bytes(range(256)) * 1024  # 256 KiB; every other byte is 128 KiB
    driver = _peer_after(D)
    driver.send(Task(1, 2, memoryview(source)[::2]))
    assert _sent(driver) == _header(1, 1, 2, len(source) // 2) + source[::2]


def test_encode_event_of_a_non_contiguous_payload() -> None:
    # Regression: encode_event once raised TypeError from memoryview.cast("B").
    strided = memoryview(b"abcdef")[::2]
    try:
        data = encode_event(Task(1, 2, strided))
    except LocalProtocolError:
        return
    assert data == _header(1, 1, 2, 3) + b"ace"


# -- closing ---------------------------------------------------------------------------------


def test_close_refuses_later_sends() -> None:
    driver = _peer_after(D)
    driver.send(Task(1, 2, b"a"))
    driver.close()
    assert driver.our_state == ConnectionState.CLOSED
    with pytest.raises(LocalProtocolError) as info:
        driver.send(Task(3, 4, b"b"))
    assert "closed" in str(info.value)
    assert _sent(driver) == encode_event(Task(1, 2, b"a"))  # what was queued still goes


def test_send_failed_refuses_later_sends() -> None:
    driver = _peer_after(D)
    driver.send_failed()
    assert driver.our_state == ConnectionState.ERROR
    with pytest.raises(LocalProtocolError):
        driver.send(Task(3, 4, b"b"))
    assert driver.data_to_send() == []


def test_head_sends_nothing_more_after_refusing() -> None:
    head = _head_after(W)
    head.receive_data(struct.pack("<IBQQ", 17, 77, 0, 0))
    with pytest.raises(RemoteProtocolError):
        head.next_event()
    assert head.our_state == ConnectionState.CLOSED
    assert _error_frame(_sent(head)).object_id == 0
    with pytest.raises(LocalProtocolError):
        head.send(Task(1, 2, b""))
    assert head.data_to_send() == []


def test_a_head_whose_write_failed_queues_no_error_frame() -> None:
    head = _head_after(W)
    head.send_failed()
    head.receive_data(struct.pack("<IBQQ", 17, 77, 0, 0))
    with pytest.raises(RemoteProtocolError):
        head.next_event()
    assert head.data_to_send() == []
