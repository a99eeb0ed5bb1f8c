"""The `dista_proto.frame` module: the protocol page's API, byte for byte.

Expected bytes are written out by hand (hex, or explicit little-endian `struct.pack` calls),
never produced by the code under test.
"""

from __future__ import annotations

import gc
import mmap
import struct
from array import array

import pytest

from dista_proto import LocalProtocolError, RemoteProtocolError, frame
from dista_proto.frame import Frame, Parts

# The page's "Aliases" section, transcribed.
PAGE_CONSTANTS: dict[str, int] = {
    "KIND_TASK": 1,
    "KIND_RESULT": 2,
    "KIND_ERROR": 3,
    "KIND_HELLO": 4,
    "KIND_WELCOME": 5,
    "KIND_TASK_AFTER": 6,
    "KIND_STORED": 7,
    "KIND_LOCATED": 8,
    "KIND_FETCH": 9,
    "KIND_TASK_INPUTS": 10,
    "KIND_RELEASE": 11,
    "KIND_FREE": 12,
    "KIND_STATS": 13,
    "KIND_HOLDING": 14,
    "KIND_CLAIM": 15,
    "KIND_RESUMED": 16,
    "KIND_SPAN": 17,
    "KIND_TIMELINE": 18,
    "KIND_ACTOR_CREATE": 19,
    "KIND_ACTOR_CALL": 20,
    "KIND_ACTOR_KILL": 21,
    "KIND_CHECKPOINT": 22,
    "KIND_CHECKPOINTED": 23,
    "KIND_ACTOR_RESTORE": 24,
    "KIND_COVERED": 25,
    "KIND_STATUS": 26,
    "KIND_STOP": 27,
    "KIND_TASK_MANY": 28,
    "KIND_DRAIN": 29,
    "KIND_ADOPT": 30,
    "KIND_ADOPTED": 31,
    "KIND_CANCEL": 32,
    "KIND_PART": 33,
    "GATHER": 1,
    "WITH_VALUE": 2,
    "MANY": 4,
    "ADDR_SIZE": 12,
    "ROLE_DRIVER": 1,
    "ROLE_WORKER": 2,
    "ROLE_CLIENT": 3,
    "ROLE_OBSERVER": 4,
    "HEADER": 17,
    "MAX_FRAME": 1073741824,
    "MAX_PAYLOAD": 1073741807,
    "PART_SIZE": 67108864,
    "MAX_OBJECT": 1099511627776,
}

# The page's kind table, names as written in its first column.
PAGE_KIND_NAMES = [
    "task",
    "result",
    "error",
    "hello",
    "welcome",
    "task-after",
    "stored",
    "located",
    "fetch",
    "task-inputs",
    "release",
    "free",
    "stats",
    "holding",
    "claim",
    "resumed",
    "span",
    "timeline",
    "actor-create",
    "actor-call",
    "actor-kill",
    "checkpoint",
    "checkpointed",
    "actor-restore",
    "covered",
    "status",
    "stop",
    "task-many",
    "drain",
    "adopt",
    "adopted",
    "cancel",
    "part",
]

OID = 0x0102030405060708
OID_LE = "0807060504030201"
TID = 0x1112131415161718
TID_LE = "1817161514131211"


# -- constants -------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "value"), sorted(PAGE_CONSTANTS.items()))
def test_constant_matches_the_page(name: str, value: int) -> None:
    assert getattr(frame, name) == value
    assert type(getattr(frame, name)) is int


@pytest.mark.parametrize("name", sorted(PAGE_CONSTANTS))
def test_every_page_constant_is_exported(name: str) -> None:
    # Regression: WITH_VALUE was once missing from __all__ (so from `import *`).
    assert name in frame.__all__


def test_derived_constants_agree() -> None:
    assert frame.MAX_PAYLOAD == frame.MAX_FRAME - frame.HEADER
    assert frame.MAX_FRAME == 1 << 30
    assert frame.PART_SIZE == 64 << 20
    assert frame.MAX_OBJECT == 1 << 40
    assert frame.PREFIX == 4
    assert frame.PART_HEADER == 16


def test_kind_names_follow_the_page_table() -> None:
    page = {i + 1: name for i, name in enumerate(PAGE_KIND_NAMES)}
    # Past the page's 33: Dista's own kinds (docs/wire.md, "Extensions").
    ours = {
        34: "actor-open",
        36: "actor-name",
        37: "actor-lookup",
        38: "actor-build",
        39: "actor-order",
        40: "mapped",
        41: "task-names",
        42: "labels",
        43: "vitals",
        44: "snapshot",
    }
    assert {**page, **ours} == frame.KIND_NAMES
    assert frame.kind_name(frame.KIND_TASK_INPUTS) == "task-inputs"
    assert frame.kind_name(0) == "kind 0"
    assert frame.kind_name(35) == "kind 35"


def test_all_lists_only_real_names() -> None:
    for name in frame.__all__:
        assert hasattr(frame, name), name


# -- message ---------------------------------------------------------------------------------


def test_message_decodes_utf8() -> None:
    assert frame.message("naïve ✓".encode()) == "naïve ✓"
    assert frame.message(b"") == ""


def test_message_replaces_invalid_utf8() -> None:
    assert frame.message(b"bad \xff\xfe end") == "bad \ufffd\ufffd end"
    assert frame.message(b"cut \xe2\x9c") == "cut \ufffd"
    assert frame.message(bytearray(b"\x80")) == "\ufffd"
    assert frame.message(memoryview(b"ok \xc3")) == "ok \ufffd"


# -- check_payload ---------------------------------------------------------------------------


def test_check_payload_accepts_up_to_max_payload() -> None:
    frame.check_payload(0)
    frame.check_payload(1)
    frame.check_payload(1073741807)


@pytest.mark.parametrize("n", [1073741808, 1 << 32, 1 << 64, -1])
def test_check_payload_rejects(n: int) -> None:
    with pytest.raises(LocalProtocolError):
        frame.check_payload(n)


# -- append_frame / append_header ------------------------------------------------------------


def test_append_frame_exact_bytes() -> None:
    out = bytearray(b"keep")
    frame.append_frame(out, frame.KIND_TASK, OID, TID, b"arg")
    assert bytes(out) == b"keep" + bytes.fromhex(
        "1400000001" + OID_LE + TID_LE + "617267"  # length 20, kind 1, IDs, payload
    )


def test_append_frame_empty_payload_and_zero_ids() -> None:
    out = bytearray()
    frame.append_frame(out, frame.KIND_RESUMED, 0, 0, b"")
    assert bytes(out) == bytes.fromhex("1100000010" + "00" * 16)


def test_append_frame_max_ids_and_buffer_types() -> None:
    for payload in (b"\x01\x02", bytearray(b"\x01\x02"), memoryview(b"\x01\x02")):
        out = bytearray()
        frame.append_frame(out, 255, (1 << 64) - 1, (1 << 64) - 1, payload)
        assert bytes(out) == bytes.fromhex("13000000ff" + "ff" * 16 + "0102")


def test_append_frames_concatenate() -> None:
    out = bytearray()
    frame.append_frame(out, frame.KIND_RELEASE, 1, 0, b"")
    frame.append_frame(out, frame.KIND_RESULT, 2, 0, b"z")
    assert bytes(out) == (
        struct.pack("<IBQQ", 17, 11, 1, 0) + struct.pack("<IBQQ", 18, 2, 2, 0) + b"z"
    )


def test_append_frame_non_byte_memoryview() -> None:
    # Regression: the prefix once counted the view's items (2), not its bytes (8).
    words = array("I", [1, 2])  # 8 bytes, 2 items
    out = bytearray()
    frame.append_frame(out, frame.KIND_RESULT, 1, 0, memoryview(words))
    assert bytes(out) == struct.pack("<IBQQ", 25, 2, 1, 0) + words.tobytes()


def test_append_frame_too_large_appends_nothing() -> None:
    # An anonymous map costs nothing until touched: a real 1 GiB payload, never read.
    huge = mmap.mmap(-1, 1073741808)
    try:
        out = bytearray(b"keep")
        with pytest.raises(LocalProtocolError):
            frame.append_frame(out, frame.KIND_RESULT, 1, 0, memoryview(huge))
        assert out == b"keep"
    finally:
        gc.collect()  # the traceback may still hold the view
        huge.close()


@pytest.mark.parametrize(
    ("kind", "object_id", "task_id"),
    [(256, 0, 0), (-1, 0, 0), (1, 1 << 64, 0), (1, -1, 0), (1, 0, 1 << 64), (1, 0, -1)],
)
def test_append_frame_rejects_impossible_headers(kind: int, object_id: int, task_id: int) -> None:
    out = bytearray(b"keep")
    with pytest.raises(LocalProtocolError):
        frame.append_frame(out, kind, object_id, task_id, b"x")
    assert out == b"keep"


def test_append_header_exact_bytes() -> None:
    out = bytearray()
    frame.append_header(out, frame.KIND_RESULT, OID, 0, 1000)
    assert bytes(out) == bytes.fromhex("f903000002" + OID_LE + "00" * 8)  # 17 + 1000


def test_append_header_for_the_largest_payload() -> None:
    out = bytearray()
    frame.append_header(out, frame.KIND_RESULT, 1, 0, 1073741807)
    assert bytes(out) == bytes.fromhex("00000040020100000000000000" + "00" * 8)


def test_append_header_too_large_appends_nothing() -> None:
    out = bytearray(b"keep")
    with pytest.raises(LocalProtocolError):
        frame.append_header(out, frame.KIND_RESULT, 1, 0, 1073741808)
    with pytest.raises(LocalProtocolError):
        frame.append_header(out, frame.KIND_RESULT, 1, 0, 1 << 32)  # would wrap past 4 GiB
    with pytest.raises(LocalProtocolError):
        frame.append_header(out, frame.KIND_RESULT, 1, 0, -1)
    assert out == b"keep"


# -- frame_length / parse_body ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "length"),
    [
        ("11000000", 17),
        ("12000000", 18),
        ("00010000", 256),
        ("00000040", 1073741824),
        ("11000000ffff", 17),  # only the first four bytes count
    ],
)
def test_frame_length_accepts(prefix: str, length: int) -> None:
    assert frame.frame_length(bytes.fromhex(prefix)) == length


@pytest.mark.parametrize(
    "prefix", ["00000000", "10000000", "01000000", "01000040", "ffffffff", "", "110000"]
)
def test_frame_length_rejects(prefix: str) -> None:
    with pytest.raises(RemoteProtocolError):
        frame.frame_length(bytes.fromhex(prefix))


def test_parse_body_splits_header_and_payload() -> None:
    body = bytes.fromhex("14" + OID_LE + TID_LE + "aabbcc")
    parsed = frame.parse_body(body)
    assert isinstance(parsed, Frame)
    assert (parsed.kind, parsed.object_id, parsed.task_id) == (20, OID, TID)
    assert bytes(parsed.payload) == b"\xaa\xbb\xcc"
    assert isinstance(parsed.payload, memoryview)  # a view, not a copy
    assert parsed.payload.obj is body
    assert parsed.take_payload() is parsed.payload


def test_parse_body_empty_payload() -> None:
    parsed = frame.parse_body(bytes(17))
    assert (parsed.kind, parsed.object_id, parsed.task_id, bytes(parsed.payload)) == (0, 0, 0, b"")


@pytest.mark.parametrize("n", [0, 1, 16])
def test_parse_body_rejects_short_bodies(n: int) -> None:
    with pytest.raises(RemoteProtocolError):
        frame.parse_body(bytes(n))


def test_frame_is_frozen() -> None:
    f = Frame(1, 2, 3, b"x")
    with pytest.raises(AttributeError):
        f.kind = 2  # type: ignore[misc]


# -- addresses -------------------------------------------------------------------------------


def test_encode_addr_exact_bytes() -> None:
    assert frame.encode_addr("192.168.1.20", 40000) == bytes.fromhex("c0a80114409c000000000000")
    assert frame.encode_addr(b"\x7f\x00\x00\x01", 0) == bytes.fromhex("7f000001" + "00" * 8)
    assert frame.encode_addr(bytearray([10, 0, 0, 7]), 65535) == bytes.fromhex(
        "0a000007ffff000000000000"
    )
    assert len(frame.encode_addr("0.0.0.0", 1)) == frame.ADDR_SIZE


@pytest.mark.parametrize(
    ("ip", "port"),
    [
        ("1.2.3", 1),
        ("1.2.3.4.5", 1),
        ("256.0.0.1", 1),
        ("-1.0.0.1", 1),
        ("a.b.c.d", 1),
        ("1.2.3.+4", 1),
        ("", 1),
        (b"\x01\x02\x03", 1),
        (b"\x01\x02\x03\x04\x05", 1),
        ("1.2.3.4", -1),
        ("1.2.3.4", 65536),
    ],
)
def test_encode_addr_rejects(ip: str | bytes, port: int) -> None:
    with pytest.raises(LocalProtocolError):
        frame.encode_addr(ip, port)


def test_decode_addr_returns_ip_port_and_new_position() -> None:
    buf = b"xx" + bytes.fromhex("0a000007581b000000000000") + b"yy"
    assert frame.decode_addr(buf, 2) == (b"\x0a\x00\x00\x07", 7000, 14)
    assert frame.decode_addr(bytes.fromhex("7f0000015000000000000000")) == (
        b"\x7f\x00\x00\x01",
        80,
        12,
    )


def test_decode_addr_reads_two_in_a_row() -> None:
    buf = bytes.fromhex("01020304010000000000000005060708ffff000000000000")
    ip, port, pos = frame.decode_addr(buf, 0)
    assert (ip, port, pos) == (b"\x01\x02\x03\x04", 1, 12)
    assert frame.decode_addr(buf, pos) == (b"\x05\x06\x07\x08", 65535, 24)


@pytest.mark.parametrize(
    ("buf", "pos"),
    [
        (bytes(11), 0),
        (bytes(12), 1),
        (bytes(12), -1),
        (b"", 0),
        (bytes.fromhex("010203040000010000000000"), 0),  # port 65536
        (bytes.fromhex("01020304ffffffffffffffff"), 0),
    ],
)
def test_decode_addr_rejects(buf: bytes, pos: int) -> None:
    with pytest.raises(RemoteProtocolError):
        frame.decode_addr(buf, pos)


# -- fetch -----------------------------------------------------------------------------------


def test_fetch_payload_default_is_part_size() -> None:
    assert frame.fetch_payload() == bytes.fromhex("0000000400000000")  # 64 MiB, u64 LE
    assert frame.fetch_payload(1) == bytes.fromhex("0100000000000000")
    assert frame.fetch_payload((1 << 64) - 1) == b"\xff" * 8


@pytest.mark.parametrize("part", [0, -1, 1 << 64])
def test_fetch_payload_rejects(part: int) -> None:
    with pytest.raises(LocalProtocolError):
        frame.fetch_payload(part)


def test_fetch_part() -> None:
    assert frame.fetch_part(b"") == 0  # an empty fetch wants the whole object in one frame
    assert frame.fetch_part(bytes.fromhex("0000000400000000")) == 67108864
    assert frame.fetch_part(memoryview(bytes.fromhex("0010000000000000"))) == 4096
    assert frame.fetch_part(frame.fetch_payload(12345)) == 12345


@pytest.mark.parametrize("n", [1, 4, 7, 9, 16])
def test_fetch_part_rejects_odd_sizes(n: int) -> None:
    with pytest.raises(RemoteProtocolError):
        frame.fetch_part(bytes(n))


# -- parts -----------------------------------------------------------------------------------


def test_part_payload_size() -> None:
    assert frame.part_payload_size(1) == 1
    assert frame.part_payload_size(4096) == 4096
    assert frame.part_payload_size(67108864) == 67108864
    # A fetcher asking for more than a frame holds gets what fits: MAX_PAYLOAD less 16.
    assert frame.part_payload_size(1073741791) == 1073741791
    assert frame.part_payload_size(1073741792) == 1073741791
    assert frame.part_payload_size(1 << 40) == 1073741791


@pytest.mark.parametrize("part", [0, -5])
def test_part_payload_size_rejects(part: int) -> None:
    with pytest.raises(LocalProtocolError):
        frame.part_payload_size(part)


def test_append_part_header_exact_bytes() -> None:
    out = bytearray()
    frame.append_part_header(out, OID, 10, 4, 3)
    assert bytes(out) == bytes.fromhex(
        "2400000021" + OID_LE + "00" * 8 + "0a000000000000000400000000000000"
    )  # length 17 + 16 + 3; the 3 bytes follow from the caller


@pytest.mark.parametrize(
    ("total", "offset", "n"),
    [
        ((1 << 40) + 1, 0, 1),  # over MAX_OBJECT
        (10, 8, 3),  # overruns
        (10, -1, 1),
        (10, 0, -1),
        (-1, 0, 0),
        (1 << 40, 0, 1073741792),  # fits the object, not a frame
    ],
)
def test_append_part_header_rejects(total: int, offset: int, n: int) -> None:
    out = bytearray(b"keep")
    with pytest.raises(LocalProtocolError):
        frame.append_part_header(out, 1, total, offset, n)
    assert out == b"keep"


def test_append_part_header_largest_part() -> None:
    out = bytearray()
    frame.append_part_header(out, 1, 1 << 40, 0, 1073741791)
    assert bytes(out[:4]) == bytes.fromhex("00000040")  # exactly MAX_FRAME


def _part(object_id: int, total: int, offset: int, data: bytes) -> bytes:
    return struct.pack("<IBQQQQ", 17 + 16 + len(data), 33, object_id, 0, total, offset) + data


def test_append_parts_exact_bytes() -> None:
    out = bytearray(b"keep")
    frame.append_parts(out, 7, b"abcdefghij", 4)
    assert bytes(out) == (
        b"keep"
        + bytes.fromhex("25000000210700000000000000" + "00" * 8)
        + bytes.fromhex("0a000000000000000000000000000000")
        + b"abcd"
        + bytes.fromhex("25000000210700000000000000" + "00" * 8)
        + bytes.fromhex("0a000000000000000400000000000000")
        + b"efgh"
        + bytes.fromhex("23000000210700000000000000" + "00" * 8)
        + bytes.fromhex("0a000000000000000800000000000000")
        + b"ij"
    )


def test_append_parts_one_part_when_it_fits() -> None:
    out = bytearray()
    frame.append_parts(out, 7, b"abc", 3)
    assert bytes(out) == _part(7, 3, 0, b"abc")
    out = bytearray()
    frame.append_parts(out, 7, b"abc", 100)
    assert bytes(out) == _part(7, 3, 0, b"abc")


def test_append_parts_empty_object_is_one_empty_part() -> None:
    out = bytearray()
    frame.append_parts(out, 7, b"", 4)
    assert bytes(out) == _part(7, 0, 0, b"")


def test_append_parts_accepts_memoryviews_of_any_format() -> None:
    words = array("H", [0x0102, 0x0304, 0x0506])
    out = bytearray()
    frame.append_parts(out, 9, memoryview(words), 4)
    raw = words.tobytes()
    assert bytes(out) == _part(9, 6, 0, raw[:4]) + _part(9, 6, 4, raw[4:])


def test_append_parts_failure_appends_nothing() -> None:
    out = bytearray(b"keep")
    with pytest.raises(LocalProtocolError):
        frame.append_parts(out, 1 << 64, b"abcdefgh", 4)
    assert out == b"keep"
    with pytest.raises(LocalProtocolError):
        frame.append_parts(out, 1, b"abcdefgh", 0)
    assert out == b"keep"


def _payloads(stream: bytes) -> list[bytes]:
    """The payloads of a stream of whole frames, cut by hand from the length prefixes."""
    out = []
    pos = 0
    while pos < len(stream):
        (length,) = struct.unpack_from("<I", stream, pos)
        out.append(stream[pos + 4 + 17 : pos + 4 + length])
        pos += 4 + length
    return out


@pytest.mark.parametrize(("size", "part"), [(0, 1), (1, 1), (10, 3), (100, 10), (4097, 1024)])
def test_parts_reassemble_append_parts(size: int, part: int) -> None:
    data = bytes(i % 251 for i in range(size))
    out = bytearray()
    frame.append_parts(out, 3, data, part)
    payloads = _payloads(bytes(out))
    assert len(payloads) == max(1, -(-size // part))
    parts = Parts()
    assert not parts.whole
    wholes = [parts.add(p) for p in payloads]
    assert wholes == [False] * (len(payloads) - 1) + [True]
    assert parts.whole
    assert parts.size == size
    assert parts.take() == data
    # take() empties it, ready for the next object
    assert parts.size == -1
    assert not parts.whole
    assert parts.data == b""


def test_parts_fill_one_buffer_from_the_allocator() -> None:
    calls: list[int] = []

    def allocate(n: int) -> bytearray:
        calls.append(n)
        return bytearray(n)

    parts = Parts(allocate)
    assert parts.add(struct.pack("<QQ", 6, 0) + b"abc") is False
    assert parts.add(struct.pack("<QQ", 6, 3) + b"def") is True
    assert calls == [6]
    assert parts.take() == b"abcdef"


def test_parts_add_part_takes_decoded_fields() -> None:
    parts = Parts()
    assert parts.add_part(4, 0, b"ab") is False
    assert parts.add_part(4, 2, memoryview(b"cd")) is True
    assert parts.take() == b"abcd"


def test_parts_rejects_size_over_max_object() -> None:
    calls: list[int] = []

    def allocate(n: int) -> bytearray:
        calls.append(n)
        return bytearray(n)

    parts = Parts(allocate)
    with pytest.raises(RemoteProtocolError):
        parts.add(struct.pack("<QQ", (1 << 40) + 1, 0) + b"x")
    with pytest.raises(RemoteProtocolError):
        parts.add(b"\xff" * 16)
    assert calls == []  # nothing allocated on the peer's word


def test_parts_accepts_max_object_as_announced() -> None:
    seen: list[int] = []

    def allocate(n: int) -> bytearray:
        seen.append(n)
        return bytearray(4)  # don't really take 1 TiB

    parts = Parts(allocate)
    assert parts.add(struct.pack("<QQ", 1 << 40, 0) + b"ab") is False
    assert seen == [1 << 40]


def test_parts_rejects_out_of_order_offsets() -> None:
    parts = Parts()
    with pytest.raises(RemoteProtocolError):
        parts.add(struct.pack("<QQ", 10, 4) + b"efgh")  # the first part must be at 0
    parts = Parts()
    parts.add(struct.pack("<QQ", 10, 0) + b"abcd")
    with pytest.raises(RemoteProtocolError):
        parts.add(struct.pack("<QQ", 10, 8) + b"ij")  # skips 4..8
    with pytest.raises(RemoteProtocolError):
        parts.add(struct.pack("<QQ", 10, 0) + b"abcd")  # repeats
    with pytest.raises(RemoteProtocolError):
        parts.add(struct.pack("<QQ", 10, 2) + b"cdef")  # overlaps


def test_parts_rejects_overruns() -> None:
    parts = Parts()
    with pytest.raises(RemoteProtocolError):
        parts.add(struct.pack("<QQ", 3, 0) + b"abcd")
    parts = Parts()
    assert parts.add(struct.pack("<QQ", 4, 0) + b"abc") is False
    with pytest.raises(RemoteProtocolError):
        parts.add(struct.pack("<QQ", 4, 3) + b"de")
    parts = Parts()
    assert parts.add(struct.pack("<QQ", 2, 0) + b"ab") is True
    with pytest.raises(RemoteProtocolError):
        parts.add(struct.pack("<QQ", 2, 2) + b"c")  # past a whole object


def test_parts_rejects_size_changes() -> None:
    parts = Parts()
    parts.add(struct.pack("<QQ", 10, 0) + b"abcd")
    with pytest.raises(RemoteProtocolError):
        parts.add(struct.pack("<QQ", 11, 4) + b"efgh")
    with pytest.raises(RemoteProtocolError):
        parts.add(struct.pack("<QQ", 9, 4) + b"efgh")


@pytest.mark.parametrize("n", [0, 1, 8, 15])
def test_parts_rejects_short_payloads(n: int) -> None:
    with pytest.raises(RemoteProtocolError):
        Parts().add(bytes(n))
