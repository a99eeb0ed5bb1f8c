"""Fuzzing the receive side: whatever bytes arrive, only `RemoteProtocolError` escapes.

A seeded `random.Random` loop gives the volume (over 100,000 inputs, mutated from the golden
frames); hypothesis gives the shrinking. Two resource checks close the file: a length prefix
announcing 1 GiB allocates nothing, and a frame fed a byte at a time costs linear time.
"""

from __future__ import annotations

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
    Event,
    Hello,
    RemoteProtocolError,
    Role,
    Task,
    Welcome,
    decode_event,
    encode_event,
)

from .test_golden import GOLDEN

CORPUS: list[bytes] = [g.data for g in GOLDEN]
HELLOS: dict[Role, Hello] = {
    Role.DRIVER: Hello(1, 0xABC),
    Role.WORKER: Hello(2, 0xABC, address=Address("127.0.0.1", 9000)),
    Role.CLIENT: Hello(3, 0xABC),
    Role.OBSERVER: Hello(4, 0),
}
HELLO_FRAMES = [encode_event(h) for h in HELLOS.values()]
BOUNDARY_U32 = [0, 1, 16, 17, 18, 1 << 20, (1 << 30) - 1, 1 << 30, (1 << 30) + 1, 0xFFFFFFFF]
BOUNDARY_U64 = [0, 1, 2, 3, 9, 12, 20, 84, 1 << 32, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- the harness -----------------------------------------------------------------------------


def _run_connection(conn: Connection, chunks: list[bytes], eof: bool) -> list[Any]:
    """Feed ``chunks`` (then EOF), draining events; only RemoteProtocolError may escape."""
    events: list[Any] = []
    try:
        for chunk in chunks:
            if chunk:
                conn.receive_data(chunk)
            events += conn.next_events()
            _drain(conn, events)
        if eof:
            conn.receive_data(b"")
        _drain(conn, events)
    except RemoteProtocolError as e:
        _check_failed(conn, e)
    for event in events:
        assert isinstance(event, Event | ConnectionClosed)
    return events


def _drain(conn: Connection, events: list[Any]) -> None:
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            return
        events.append(event)
        if isinstance(event, ConnectionClosed):
            return


def _check_failed(conn: Connection, error: RemoteProtocolError) -> None:
    assert str(error)
    with pytest.raises(RemoteProtocolError):
        conn.next_event()  # the error sticks
    out = b"".join(conn.data_to_send())
    if conn.our_role == Role.HEAD:
        # the last frame the head queued is one error frame saying why
        event = decode_event(_last_frame(out), from_head=True)
        assert isinstance(event, Error)
        assert event.object_id == 0
        assert event.message.startswith("protocol error: ")


def _last_frame(stream: bytes) -> bytes:
    pos, last = 0, b""
    while pos < len(stream):
        (length,) = struct.unpack_from("<I", stream, pos)
        last = stream[pos : pos + 4 + length]
        pos += 4 + length
    assert pos == len(stream)
    return last


def _decode(data: bytes, from_head: bool) -> None:
    try:
        event = decode_event(data, from_head=from_head)
    except RemoteProtocolError as e:
        assert str(e)
        return
    assert isinstance(event, Event)


def _head(after_hello: Role | None) -> tuple[Connection, bytes]:
    conn = Connection(Role.HEAD)
    return conn, b"" if after_hello is None else encode_event(HELLOS[after_hello])


def _peer(role: Role) -> Connection:
    conn = Connection(role)
    if role in HELLOS:
        conn.send(HELLOS[role])
        conn.data_to_send()
    return conn


# -- mutations -------------------------------------------------------------------------------


def _flip_bits(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8)
    return bytes(buf)


def _set_byte(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    buf[rng.randrange(len(buf))] = rng.randrange(256)
    return bytes(buf)


def _set_kind(rng: random.Random, data: bytes) -> bytes:
    if len(data) < 5:
        return data
    return data[:4] + bytes([rng.randrange(256)]) + data[5:]


def _set_length(rng: random.Random, data: bytes) -> bytes:
    value = rng.choice(BOUNDARY_U32) if rng.random() < 0.5 else rng.randrange(1 << 32)
    return struct.pack("<I", value) + data[4:]


def _nudge_length(rng: random.Random, data: bytes) -> bytes:
    (length,) = struct.unpack_from("<I", data)
    value = max(0, min(0xFFFFFFFF, length + rng.randint(-3, 3)))
    return struct.pack("<I", value) + data[4:]


def _set_u64(rng: random.Random, data: bytes) -> bytes:
    """Overwrite 8 payload bytes (counts, lengths, sizes) with a boundary value."""
    if len(data) < 29:
        return data
    pos = rng.randrange(21, len(data) - 7)
    return data[:pos] + struct.pack("<Q", rng.choice(BOUNDARY_U64)) + data[pos + 8 :]


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def _extend(rng: random.Random, data: bytes) -> bytes:
    return data + rng.randbytes(rng.randint(1, 16))


def _delete(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data))
    return data[:i] + data[i + 1 :]


def _insert(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data) + 1)
    return data[:i] + bytes([rng.randrange(256)]) + data[i:]


def _splice(rng: random.Random, data: bytes) -> bytes:
    other = rng.choice(CORPUS)
    return data[: rng.randrange(len(data) + 1)] + other[rng.randrange(len(other)) :]


def _random(rng: random.Random, data: bytes) -> bytes:
    return rng.randbytes(rng.randint(0, 80))


def _huge(rng: random.Random, data: bytes) -> bytes:
    length = rng.choice([(1 << 30) - rng.randrange(4), 1 << 30, (1 << 30) + 1, 0xFFFFFFFF])
    return struct.pack("<IBQQ", length, rng.randrange(1, 35), 1, 2) + rng.randbytes(
        rng.randint(0, 64)
    )


MUTATORS: list[Callable[[random.Random, bytes], bytes]] = [
    _flip_bits,
    _flip_bits,
    _set_byte,
    _set_kind,
    _set_length,
    _nudge_length,
    _set_u64,
    _set_u64,
    _truncate,
    _extend,
    _delete,
    _insert,
    _splice,
    _random,
    _huge,
]


def _mutant(rng: random.Random) -> bytes:
    data = rng.choice(CORPUS)
    for _ in range(1 if rng.random() < 0.7 else rng.randint(2, 4)):
        if len(data) < 4:
            data += rng.choice(CORPUS)  # every mutator needs something to work on
        data = rng.choice(MUTATORS)(rng, data)
    if len(data) >= 4 and rng.random() < 0.4:
        # Make the prefix tell the truth again, so the payload decoders see the damage.
        data = struct.pack("<I", len(data) - 4) + data[4:]
    return data


def _chunks(rng: random.Random, data: bytes) -> list[bytes]:
    mode = rng.random()
    if mode < 0.6 or len(data) < 2:
        return [data]
    if mode < 0.7:
        return [data[i : i + 1] for i in range(len(data))]
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 4))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


# -- bulk volume -----------------------------------------------------------------------------

BULK = 100_000


@pytest.mark.timeout(300)
def test_bulk_mutations_only_raise_remote_protocol_error() -> None:
    rng = random.Random(0xD157A)
    roles: list[Role | None] = [None, Role.DRIVER, Role.WORKER, Role.CLIENT, Role.OBSERVER]
    peers = [Role.DRIVER, Role.WORKER, Role.OBSERVER, Role.FETCHER, Role.OBJECT_SERVER]
    seen_events = 0
    seen_errors = 0
    for i in range(BULK):
        data = _mutant(rng)
        # 1. the codec alone, either direction
        _decode(data, rng.random() < 0.5)
        # 2. a connection: mostly the head (before or after a hello), sometimes a peer
        if i % 5 == 4:
            conn = _peer(rng.choice(peers))
            stream = data
            # good frames first sometimes, so the error comes mid-batch
            if rng.random() < 0.3:
                stream = encode_event(Task(1, 2, b"ok"), from_head=True) + data
        else:
            after = rng.choice(roles)
            conn, hello = _head(after)
            stream = hello + data
            if after is not None and rng.random() < 0.3:
                stream = hello + rng.choice(CORPUS) + data
        events = _run_connection(conn, _chunks(rng, stream), eof=rng.random() < 0.5)
        seen_events += len(events)
        seen_errors += conn.their_state.value == "error"
    # The mutants exercised both paths plenty.
    assert seen_events > BULK // 4
    assert seen_errors > BULK // 4


def test_bulk_mutants_cover_every_mutation() -> None:
    rng = random.Random(1)
    for mutate in MUTATORS:
        for data in CORPUS:
            out = mutate(rng, data)
            assert isinstance(out, bytes)


# -- hypothesis: shrinking-friendly cases ----------------------------------------------------


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_to_a_head_before_hello(data: bytes) -> None:
    conn, _ = _head(None)
    events = _run_connection(conn, [data], eof=True)
    assert all(isinstance(e, Hello | ConnectionClosed) for e in events[:1])


@FUZZ
@given(st.sampled_from(list(HELLOS)), st.binary(max_size=300), st.booleans())
def test_random_bytes_to_a_head_after_hello(role: Role, data: bytes, eof: bool) -> None:
    conn, hello = _head(role)
    events = _run_connection(conn, [hello, data], eof=eof)
    assert events[0] == HELLOS[role]


@FUZZ
@given(
    st.sampled_from([Role.DRIVER, Role.CLIENT, Role.WORKER, Role.OBSERVER, Role.FETCHER]),
    st.binary(max_size=300),
)
def test_random_bytes_to_a_peer(role: Role, data: bytes) -> None:
    conn = _peer(role)
    if role in (Role.DRIVER, Role.CLIENT) and data[:1] == b"\x00":
        data = encode_event(Welcome(1, 2), from_head=True) + data[1:]
    _run_connection(conn, [data], eof=True)


@FUZZ
@given(st.binary(max_size=300), st.booleans())
def test_random_bytes_to_decode_event(data: bytes, from_head: bool) -> None:
    _decode(data, from_head)


@st.composite
def flipped(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(CORPUS)))
    for bit in draw(st.lists(st.integers(0, len(data) * 8 - 1), min_size=1, max_size=4)):
        data[bit // 8] ^= 1 << (bit % 8)
    return bytes(data)


@FUZZ
@given(flipped(), st.booleans())
def test_bit_flips_of_valid_frames(data: bytes, from_head: bool) -> None:
    _decode(data, from_head)
    conn, hello = _head(Role.DRIVER)
    _run_connection(conn, [hello + data], eof=True)
    _run_connection(_peer(Role.WORKER), [data], eof=True)


@FUZZ
@given(st.sampled_from(CORPUS), st.integers(0, 0xFFFFFFFF), st.binary(max_size=40))
def test_any_length_prefix(data: bytes, length: int, extra: bytes) -> None:
    mutated = struct.pack("<I", length) + data[4:] + extra
    _decode(mutated, False)
    conn, hello = _head(Role.WORKER)
    _run_connection(conn, [hello, mutated], eof=True)


@FUZZ
@given(st.sampled_from(CORPUS), st.integers(21, 200), st.integers(0, (1 << 64) - 1))
def test_any_u64_in_a_payload(data: bytes, pos: int, value: int) -> None:
    if pos + 8 > len(data):
        pos = max(21, len(data) - 8)
    mutated = data[:pos] + struct.pack("<Q", value) + data[pos + 8 :]
    for from_head in (False, True):
        _decode(mutated, from_head)


@FUZZ
@given(st.lists(st.sampled_from(CORPUS), max_size=6), st.integers(0, 400), st.binary(max_size=8))
def test_truncated_streams(frames: list[bytes], cut: int, junk: bytes) -> None:
    stream = b"".join(frames)
    stream = stream[: min(cut, len(stream))] + junk
    conn, hello = _head(Role.DRIVER)
    _run_connection(conn, [hello, stream], eof=True)
    _run_connection(_peer(Role.DRIVER), [stream], eof=True)


# -- resources -------------------------------------------------------------------------------

GiB = 1 << 30


def test_a_1_gib_prefix_allocates_nothing() -> None:
    conn, hello = _head(Role.DRIVER)
    conn.receive_data(hello)
    assert conn.next_event() == HELLOS[Role.DRIVER]
    tracemalloc.start()
    try:
        conn.receive_data(struct.pack("<IBQQ", GiB, 1, 1, 2) + b"few bytes")
        assert conn.next_event() is NEED_DATA
        conn.receive_data(bytes(1000))
        assert conn.next_events() == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    conn.receive_data(b"")
    with pytest.raises(RemoteProtocolError):
        conn.next_event()


def test_a_1_gib_frame_before_hello_is_refused_from_its_header() -> None:
    conn, _ = _head(None)
    tracemalloc.start()
    try:
        conn.receive_data(struct.pack("<IBQQ", GiB, 1, 1, 2) + b"few bytes")
        with pytest.raises(RemoteProtocolError):
            conn.next_event()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_decode_event_of_a_1_gib_prefix_allocates_nothing() -> None:
    data = struct.pack("<IBQQ", GiB, 1, 1, 2) + b"few bytes"
    tracemalloc.start()
    try:
        with pytest.raises(RemoteProtocolError):
            decode_event(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize("length", [GiB + 1, 0xFFFFFFFF])
def test_a_prefix_over_max_frame_fails_at_once(length: int) -> None:
    conn, hello = _head(Role.WORKER)
    conn.receive_data(hello + struct.pack("<I", length))
    assert conn.next_event() == HELLOS[Role.WORKER]
    with pytest.raises(RemoteProtocolError):
        conn.next_event()


def _byte_at_a_time(size: int, parse_each: bool) -> float:
    payload = bytes(range(256)) * (size // 256)
    data = encode_event(Task(1, 2, payload))
    conn, hello = _head(Role.DRIVER)
    conn.receive_data(hello)
    assert conn.next_event() == HELLOS[Role.DRIVER]
    start = time.perf_counter()
    receive, next_event = conn.receive_data, conn.next_event
    if parse_each:
        for i in range(len(data) - 1):
            receive(data[i : i + 1])
            assert next_event() is NEED_DATA
    else:
        for i in range(len(data) - 1):
            receive(data[i : i + 1])
    receive(data[-1:])
    event = next_event()
    elapsed = time.perf_counter() - start
    assert event == Task(1, 2, payload)
    assert conn.next_event() is NEED_DATA
    return elapsed


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("size", "parse_each"),
    [
        (1 << 20, True),  # 1 MiB: collected as a list of pieces
        (900 * 1024, True),  # under 1 MiB: grown in one buffer
        (1 << 20, False),  # fed entirely before the first parse
    ],
)
def test_a_byte_at_a_time_costs_linear_time(size: int, parse_each: bool) -> None:
    # About a second here; a quadratic buffer would copy ~5e11 bytes and take minutes.
    assert _byte_at_a_time(size, parse_each) < 15.0
