"""Golden frames: every kind, in every direction whose payload differs, written out by hand.

Each vector is the whole frame as hex: the u32 length (little-endian), the kind byte, the
object ID and the task ID (u64 LE), then the payload, field by field as the protocol page
lists them. None of these bytes come from the encoder under test.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from dista_proto import (
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
    LocalProtocolError,
    Located,
    LocatedInput,
    Mapped,
    Part,
    Release,
    RemoteProtocolError,
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
)

OID = 0x0102030405060708
TID = 0x1112131415161718
ACTOR = 0x0000010000000001
REGISTRY = 0x0A0B0C0D0E0F1011

O = "0807060504030201"  # OID, u64 LE
T = "1817161514131211"  # TID, u64 LE
A = "0100000000010000"  # ACTOR, u64 LE
Z = "0000000000000000"  # a zero ID
R = "11100f0e0d0c0b0a"  # REGISTRY, u64 LE

W7000 = Address("10.0.0.7", 7000)
W7000_HEX = "0a000007581b000000000000"  # 10.0.0.7, port 0x1b58 as u64
W7001 = Address("10.0.0.8", 7001)
W7001_HEX = "0a000008591b000000000000"

M_F = "6d2e66"  # "m.f" in UTF-8
VITALS_COUNTS = "0100000000000000" + "0200000000000000" + "0300000000000000"
BOTH = (False, True)
TO_HEAD = (False,)
FROM_HEAD = (True,)


class Golden(NamedTuple):
    name: str
    event: Event
    directions: tuple[bool, ...]  # the from_head values these bytes are right for
    hex: str

    @property
    def data(self) -> bytes:
        return bytes.fromhex(self.hex)


GOLDEN: list[Golden] = [
    # 1 task: the encoded argument. Driver to head and head to worker alike.
    Golden("task", Task(OID, TID, b"arg"), BOTH, "14000000 01" + O + T + "617267"),
    Golden("task-empty", Task(1, 2, b""), BOTH, "11000000 01 0100000000000000 0200000000000000"),
    # 2 result: the encoded result.
    Golden("result", Result(OID, b"\x80\x05"), BOTH, "13000000 02" + O + Z + "8005"),
    # 3 error: a UTF-8 message.
    Golden("error", Error(OID, "bad é"), BOTH, "17000000 03" + O + Z + "62616420 c3a9"),
    Golden("error-refusal", Error(0, "no"), FROM_HEAD, "13000000 03" + Z + Z + "6e6f"),
    # 4 hello: role byte, registry hash u64; a worker adds its address; a resuming driver its
    # old number and the epoch of the head that numbered it.
    Golden("hello-driver", Hello(1, REGISTRY), TO_HEAD, "1a000000 04" + Z + Z + "01" + R),
    Golden(
        "hello-driver-resuming",
        Hello(1, REGISTRY, resume=Resume(number=0x123456, epoch=0xDEADBEEF01)),
        TO_HEAD,
        "2a000000 04" + Z + Z + "01" + R + "563412000000000001efbeadde000000",
    ),
    Golden(
        "hello-worker",
        Hello(2, REGISTRY, address=W7000),
        TO_HEAD,
        "26000000 04" + Z + Z + "02" + R + W7000_HEX,
    ),
    Golden("hello-client", Hello(3, REGISTRY), TO_HEAD, "1a000000 04" + Z + Z + "03" + R),
    # Dista's hello mark rides in the task-ID field: a worker that runs by-value code of
    # any registry (HELLO_ANY_REGISTRY).
    Golden(
        "hello-worker-any-registry",
        Hello(2, REGISTRY, address=W7000, mark=2),
        TO_HEAD,
        "26000000 04" + Z + "0200000000000000" + "02" + R + W7000_HEX,
    ),
    Golden("hello-observer", Hello(4, 0), TO_HEAD, "1a000000 04" + Z + Z + "04" + Z),
    # 5 welcome: the driver's number u64, the head's epoch u64.
    Golden(
        "welcome",
        Welcome(number=0x123456, epoch=0xDEADBEEF01),
        FROM_HEAD,
        "21000000 05" + Z + Z + "563412000000000001efbeadde000000",
    ),
    # 6 task-after: flags, [MANY: results u64], count u64, IDs, [WITH_VALUE: length u64, value].
    Golden(
        "task-after-single",
        TaskAfter(OID, TID, (0x2A,)),
        TO_HEAD,
        "22000000 06" + O + T + "0001000000000000002a00000000000000",
    ),
    Golden(
        "task-after-gather",
        TaskAfter(OID, TID, (0x2A, 0x2B), gather=True),
        TO_HEAD,
        "2a000000 06" + O + T + "0102000000000000002a000000000000002b00000000000000",
    ),
    Golden(
        "task-after-gather-none",
        TaskAfter(OID, TID, (), gather=True),
        TO_HEAD,
        "1a000000 06" + O + T + "010000000000000000",
    ),
    Golden(
        "task-after-with-empty-value",
        TaskAfter(OID, TID, (0x2A,), value=b""),
        TO_HEAD,
        "2a000000 06" + O + T + "0201000000000000002a000000000000000000000000000000",
    ),
    Golden(
        "task-after-gather-value",
        TaskAfter(OID, TID, (0x2A, 0x2B), gather=True, value=b"val"),
        TO_HEAD,
        "35000000 06" + O + T + "03"
        "0200000000000000"
        "2a00000000000000"
        "2b00000000000000"
        "0300000000000000"
        "76616c",
    ),
    Golden(
        "task-after-many",
        TaskAfter(OID, TID, (0x2A, 0x2B), gather=True, value=b"val", results=3),
        TO_HEAD,
        "3d000000 06" + O + T + "07"
        "0300000000000000"
        "0200000000000000"
        "2a00000000000000"
        "2b00000000000000"
        "0300000000000000"
        "76616c",
    ),
    # 7 stored: the result's size u64.
    Golden("stored", Stored(OID, 1 << 20), TO_HEAD, "19000000 07" + O + Z + "0000100000000000"),
    # 8 located: the worker's address: IPv4 bytes, then the port as u64.
    Golden(
        "located",
        Located(OID, Address("192.168.1.20", 40000)),
        FROM_HEAD,
        "1d000000 08" + O + Z + "c0a80114409c000000000000",
    ),
    # 9 fetch: none (the whole object in one frame), or the largest part taken, u64.
    Golden("fetch-parts", Fetch(OID), BOTH, "19000000 09" + O + Z + "0000000400000000"),
    Golden(
        "fetch-small-parts", Fetch(OID, 4096), BOTH, "19000000 09" + O + Z + "0010000000000000"
    ),
    Golden("fetch-whole", Fetch(OID, 0), BOTH, "11000000 09" + O + Z),
    # Our extension: the fetcher's mailbox on this host in the task-ID field.
    Golden(
        "fetch-mailbox",
        Fetch(OID, 4096, mailbox=TID),
        BOTH,
        "19000000 09" + O + T + "0010000000000000",
    ),
    # 10 task-inputs: flags, [results], count, per input tag, ID, then bytes or location,
    # [value].
    Golden(
        "task-inputs",
        TaskInputs(OID, TID, (InlineInput(0x2A, b"ab"), LocatedInput(0x2B, W7001)), gather=True),
        FROM_HEAD,
        "42000000 0a" + O + T + "01"
        "0200000000000000"
        "00"
        "2a00000000000000"
        "0200000000000000"
        "6162"
        "01"
        "2b00000000000000" + W7001_HEX,
    ),
    Golden(
        "task-inputs-many-value",
        TaskInputs(OID, TID, (LocatedInput(0x2B, W7001),), value=b"v", results=2),
        FROM_HEAD,
        "40000000 0a" + O + T + "06"
        "0200000000000000"
        "0100000000000000"
        "01"
        "2b00000000000000" + W7001_HEX + "0100000000000000"
        "76",
    ),
    # 11 release, 12 free: no payload.
    Golden("release", Release(OID), TO_HEAD, "11000000 0b" + O + Z),
    Golden("free", Free(OID), FROM_HEAD, "11000000 0c" + O + Z),
    # 13 stats: an empty request to the head; the reply is five u64 counts.
    Golden("stats-request", Stats(), TO_HEAD, "11000000 0d" + Z + Z),
    Golden(
        "stats-reply",
        Stats(HeadStats(objects=7, held_bytes=0x10000, pending=2, running=1, workers=4)),
        FROM_HEAD,
        "39000000 0d" + Z + Z + "0700000000000000"
        "0000010000000000"
        "0200000000000000"
        "0100000000000000"
        "0400000000000000",
    ),
    # 14 holding: count u64, then per object its ID u64 and its location.
    Golden("holding-none", Holding(()), TO_HEAD, "19000000 0e" + Z + Z + Z),
    Golden(
        "holding",
        Holding((HoldingEntry(0x2A, W7000), HoldingEntry(0x2B, W7000))),
        TO_HEAD,
        "41000000 0e" + Z + Z + "0200000000000000"
        "2a00000000000000" + W7000_HEX + "2b00000000000000" + W7000_HEX,
    ),
    # 15 claim, 16 resumed: no payload.
    Golden("claim", Claim(OID), TO_HEAD, "11000000 0f" + O + Z),
    Golden("resumed", Resumed(), TO_HEAD, "11000000 10" + Z + Z),
    # 17 span: three u64 nanosecond stamps, arrived, started, ended.
    Golden(
        "span",
        Span(
            OID, arrived=0x1799A1B2C3D4E5F0, started=0x1799A1B2C3D4E5F1, ended=0x1799A1B2C3D4E5F2
        ),
        TO_HEAD,
        "29000000 11" + O + Z + "f0e5d4c3b2a19917f1e5d4c3b2a19917f2e5d4c3b2a19917",
    ),
    # 18 timeline: an empty request; the reply is a count, then per task its object ID, task
    # ID, four head stamps, three worker stamps, and the worker's address.
    Golden("timeline-request", Timeline(), TO_HEAD, "11000000 12" + Z + Z),
    Golden("timeline-reply-none", Timeline(()), FROM_HEAD, "19000000 12" + Z + Z + Z),
    Golden(
        "timeline-reply",
        Timeline(
            (
                TimelineRecord(
                    object_id=OID,
                    task_id=TID,
                    submitted=0x10,
                    queued=0x11,
                    dispatched=0x12,
                    settled=0x13,
                    arrived=0x14,
                    started=0x15,
                    ended=0x16,
                    address=W7000,
                ),
            )
        ),
        FROM_HEAD,
        "6d000000 12" + Z + Z + "0100000000000000" + O + T + "1000000000000000"
        "1100000000000000"
        "1200000000000000"
        "1300000000000000"
        "1400000000000000"
        "1500000000000000"
        "1600000000000000" + W7000_HEX,
    ),
    # 19 actor-create: from the driver checkpoint_every u64 first; then the argument.
    Golden(
        "actor-create-from-driver",
        ActorCreate(OID, TID, b"ctor", checkpoint_every=10),
        TO_HEAD,
        "1d000000 13" + O + T + "0a0000000000000063746f72",
    ),
    Golden(
        "actor-create-never-checkpoint",
        ActorCreate(OID, TID, b"", checkpoint_every=0),
        TO_HEAD,
        "19000000 13" + O + T + Z,
    ),
    Golden(
        "actor-create-from-head",
        ActorCreate(OID, TID, b"ctor"),
        FROM_HEAD,
        "15000000 13" + O + T + "63746f72",
    ),
    # 20 actor-call: the actor's ID u64, then the argument; the task ID is the method's.
    Golden(
        "actor-call",
        ActorCall(OID, TID, ACTOR, b"x"),
        BOTH,
        "1a000000 14" + O + T + A + "78",
    ),
    # 21 actor-kill: no payload.
    Golden("actor-kill", ActorKill(ACTOR), BOTH, "11000000 15" + A + Z),
    # 22 checkpoint: from the driver, the actor's ID u64 (the object ID is the checkpoint's);
    # from the head, i64 restore_covers (-1 for none), the object ID is the actor, the task ID
    # the calls the new checkpoint covers.
    Golden(
        "checkpoint-from-driver",
        Checkpoint(OID, actor_id=ACTOR),
        TO_HEAD,
        "19000000 16" + O + Z + A,
    ),
    Golden(
        "checkpoint-from-head",
        Checkpoint(ACTOR, task_id=5, restore_covers=3),
        FROM_HEAD,
        "19000000 16" + A + "05000000000000000300000000000000",
    ),
    Golden(
        "checkpoint-from-head-restore-zero",
        Checkpoint(ACTOR, task_id=5, restore_covers=0),
        FROM_HEAD,
        "19000000 16" + A + "0500000000000000" + Z,
    ),
    Golden(
        "checkpoint-from-head-none",
        Checkpoint(ACTOR, task_id=1, restore_covers=None),
        FROM_HEAD,
        "19000000 16" + A + "0100000000000000ffffffffffffffff",
    ),
    # 23 checkpointed: none if written, else why not.
    Golden("checkpointed", Checkpointed(OID, TID), TO_HEAD, "11000000 17" + O + T),
    Golden(
        "checkpointed-failed",
        Checkpointed(OID, TID, "disk full"),
        TO_HEAD,
        "1a000000 17" + O + T + "6469736b2066756c6c",
    ),
    # 24 actor-restore: the calls the checkpoint covers, u64.
    Golden(
        "actor-restore",
        ActorRestore(ACTOR, TID, covers=7),
        FROM_HEAD,
        "19000000 18" + A + T + "0700000000000000",
    ),
    # 25 covered: the newest call a checkpoint includes, u64.
    Golden(
        "covered",
        Covered(ACTOR, newest=42),
        FROM_HEAD,
        "19000000 19" + A + Z + "2a00000000000000",
    ),
    # 26 status: an empty request; the reply is UTF-8 text.
    Golden("status-request", Status(), TO_HEAD, "11000000 1a" + Z + Z),
    Golden(
        "status-reply",
        Status("2 workers"),
        FROM_HEAD,
        "1a000000 1a" + Z + Z + "3220776f726b657273",
    ),
    Golden("status-reply-empty", Status(""), FROM_HEAD, "11000000 1a" + Z + Z),
    # 27 stop: no payload; observer to head and head to worker.
    Golden("stop", Stop(), BOTH, "11000000 1b" + Z + Z),
    # 28 task-many: the number of results u64, then the argument.
    Golden(
        "task-many",
        TaskMany(OID, TID, results=4, argument=b"arg"),
        BOTH,
        "1c000000 1c" + O + T + "0400000000000000617267",
    ),
    # 29 drain: no payload.
    Golden("drain", Drain(), TO_HEAD, "11000000 1d" + Z + Z),
    # 30 adopt: a draining worker's location of the object.
    Golden(
        "adopt",
        Adopt(OID, Address("10.0.0.9", 7002)),
        FROM_HEAD,
        "1d000000 1e" + O + Z + "0a0000095a1b000000000000",
    ),
    # 31 adopted: 1 and the new location, or 0 and why not.
    Golden("adopted", Adopted(OID, W7001), TO_HEAD, "1e000000 1f" + O + Z + "01" + W7001_HEX),
    Golden(
        "adopted-failed",
        Adopted(OID, None, "gone"),
        TO_HEAD,
        "16000000 1f" + O + Z + "00676f6e65",
    ),
    # 32 cancel: no payload.
    Golden("cancel", Cancel(OID), TO_HEAD, "11000000 20" + O + Z),
    # 33 part: the object's size u64, this part's offset u64, then its bytes.
    Golden(
        "part",
        Part(OID, size=10, offset=4, data=b"efgh"),
        BOTH,
        "25000000 21" + O + Z + "0a00000000000000040000000000000065666768",
    ),
    Golden("part-empty-object", Part(OID, 0, 0, b""), BOTH, "21000000 21" + O + Z + Z + Z),
    # 34 actor-open (Dista's own kind): the actor's 16-byte capability.
    Golden(
        "actor-open",
        ActorOpen(OID, bytes(range(16))),
        TO_HEAD,
        "21000000 22" + O + Z + "000102030405060708090a0b0c0d0e0f",
    ),
    # 36 actor-name (Dista's own kind): the actor's ID, the request ID in the task-ID field,
    # the name's UTF-8 (1 to 255 bytes).
    Golden(
        "actor-name",
        ActorName(OID, TID, "ledger"),
        TO_HEAD,
        "17000000 24" + O + T + "6c6564676572",
    ),
    # 37 actor-lookup (Dista's own kind): the request ID, then the name's UTF-8.
    Golden("actor-lookup", ActorLookup(OID, "l\u00e9"), TO_HEAD, "14000000 25" + O + Z + "6cc3a9"),
    # 39 actor-order (Dista's own kind): the actor, a count u64, then (call ID, position) u64s.
    Golden(
        "actor-order",
        ActorOrder(OID, ((TID, 5),)),
        TO_HEAD,
        "29000000 27" + O + Z + "0100000000000000" + T + "0500000000000000",
    ),
    # 40 mapped (Dista's own kind): the object's size u64, then the 16-byte ticket.
    Golden(
        "mapped",
        Mapped(OID, 10, bytes(range(16))),
        BOTH,
        "29000000 28" + O + Z + "0a00000000000000" + bytes(range(16)).hex(),
    ),
    # 41 task-names (Dista's own kind): the names' hashes, u64 each, strictly increasing.
    Golden(
        "task-names",
        TaskNames((3, 0x10)),
        TO_HEAD,
        "21000000 29" + Z + Z + "0300000000000000" + "1000000000000000",
    ),
    # 42 labels (Dista's own kind): a count u32, then per entry the ID u64, the label's
    # length u16 and its UTF-8; the head's answer says where its entries start (task ID).
    Golden(
        "labels",
        Labels(((0x10, "m.f"),)),
        TO_HEAD,
        "22000000 2a" + Z + Z + "01000000" + "1000000000000000" + "0300" + M_F,
    ),
    Golden(
        "labels-answer",
        Labels(((0x10, "m.f"),), 2),
        FROM_HEAD,
        "22000000 2a" + Z + "0200000000000000" + "01000000" + "1000000000000000" + "0300" + M_F,
    ),
    # 43 vitals (Dista's own kind): pid, rss, checkpoints, their bytes and ns: five u64s.
    Golden(
        "vitals",
        Vitals(0x1234, 0x4000, 1, 2, 3),
        TO_HEAD,
        "39000000 2b" + Z + Z + "3412000000000000" + "0040000000000000" + VITALS_COUNTS,
    ),
    # 44 snapshot (Dista's own kind): a request names the last record seen (object ID); the
    # answer the last it carries, a JSON document (u32 length, UTF-8), then the rows.
    Golden("snapshot", Snapshot(7), TO_HEAD, "11000000 2c" + "0700000000000000" + Z),
    Golden(
        "snapshot-answer",
        Snapshot(9, "{}"),
        FROM_HEAD,
        "17000000 2c" + "0900000000000000" + Z + "02000000" + "7b7d",
    ),
    # 38 actor-build (Dista's own kind): the actor, the build number, the head's epoch u64.
    Golden(
        "actor-build",
        ActorBuild(OID, TID, 0x21),
        FROM_HEAD,
        "19000000 26" + O + T + "2100000000000000",
    ),
]

CASES = [
    pytest.param(g, from_head, id=f"{g.name}-{'from' if from_head else 'to'}-head")
    for g in GOLDEN
    for from_head in g.directions
]


def test_every_kind_has_a_golden_frame() -> None:
    kinds = {*range(1, 35), *range(36, 45)}
    assert {g.event.kind for g in GOLDEN} == kinds
    assert {g.data[4] for g in GOLDEN} == kinds


def test_every_direction_a_kind_travels_has_a_golden_frame() -> None:
    # Which way a frame travels decides how its payload decodes: towards the head, or from it.
    to_head = set().union(
        *(allowed_kinds(r, Role.HEAD) for r in (Role.DRIVER, Role.WORKER, Role.OBSERVER))
    )
    from_head = set().union(
        *(allowed_kinds(Role.HEAD, r) for r in (Role.DRIVER, Role.WORKER, Role.OBSERVER))
    )
    covered_to = {g.event.kind for g in GOLDEN if False in g.directions}
    covered_from = {g.event.kind for g in GOLDEN if True in g.directions}
    assert to_head <= covered_to
    assert from_head <= covered_from


def test_golden_lengths_are_consistent() -> None:
    # A check on the hand-written vectors themselves: the prefix counts the rest.
    for g in GOLDEN:
        data = g.data
        assert int.from_bytes(data[:4], "little") == len(data) - 4, g.name


@pytest.mark.parametrize(("golden", "from_head"), CASES)
def test_encode_matches_golden(golden: Golden, from_head: bool) -> None:
    assert encode_event(golden.event, from_head=from_head) == golden.data


@pytest.mark.parametrize(("golden", "from_head"), CASES)
def test_decode_matches_golden(golden: Golden, from_head: bool) -> None:
    event = decode_event(golden.data, from_head=from_head)
    assert type(event) is type(golden.event)
    assert event == golden.event


@pytest.mark.parametrize(("golden", "from_head"), CASES)
def test_decode_accepts_bytearray_and_memoryview(golden: Golden, from_head: bool) -> None:
    assert decode_event(bytearray(golden.data), from_head=from_head) == golden.event
    assert decode_event(memoryview(golden.data), from_head=from_head) == golden.event


def test_observer_hello_without_a_registry() -> None:
    # "An observer ... says hello without a registry": the role byte alone is accepted.
    assert decode_event(bytes.fromhex("12000000 04" + Z + Z + "04")) == Hello(4, 0)


def test_observer_hello_keeps_the_hash_it_sent() -> None:
    data = bytes.fromhex("1a000000 04" + Z + Z + "04" + R)
    assert decode_event(data) == Hello(4, REGISTRY)


def test_a_fetch_of_part_zero_means_whole() -> None:
    # An explicit u64 0 reads as "no parts", the same as an empty fetch.
    data = bytes.fromhex("19000000 09" + O + Z + Z)
    assert decode_event(data) == Fetch(OID, 0)


def test_checkpoint_restore_covers_minus_one_encodes_as_none() -> None:
    event = Checkpoint(ACTOR, task_id=1, restore_covers=-1)
    assert encode_event(event, from_head=True) == bytes.fromhex(
        "19000000 16" + A + "0100000000000000ffffffffffffffff"
    )


def test_checkpoint_restore_covers_largest_i64() -> None:
    # Regression: the encoder once refused 2**63 - 1, which the decoder accepts.
    data = bytes.fromhex("19000000 16" + A + "0100000000000000ffffffffffffff7f")
    try:
        event = decode_event(data, from_head=True)
    except RemoteProtocolError:
        return  # refusing it on both sides would be consistent too
    assert event == Checkpoint(ACTOR, 1, None, (1 << 63) - 1)
    assert encode_event(event, from_head=True) == data


# -- the direction matters -------------------------------------------------------------------


def test_actor_create_bytes_read_differently_by_direction() -> None:
    data = bytes.fromhex("1d000000 13" + O + T + "0a0000000000000063746f72")
    assert decode_event(data, from_head=False) == ActorCreate(OID, TID, b"ctor", 10)
    # From the head the whole payload is the constructor argument.
    assert decode_event(data, from_head=True) == ActorCreate(
        OID, TID, bytes.fromhex("0a00000000000000") + b"ctor"
    )


def test_checkpoint_bytes_read_differently_by_direction() -> None:
    data = bytes.fromhex("19000000 16" + O + Z + "ffffffffffffffff")
    assert decode_event(data, from_head=False) == Checkpoint(OID, 0, (1 << 64) - 1, None)
    assert decode_event(data, from_head=True) == Checkpoint(OID, 0, None, None)


def test_empty_requests_and_replies_by_direction() -> None:
    stats = bytes.fromhex("11000000 0d" + Z + Z)
    assert decode_event(stats, from_head=False) == Stats()
    with pytest.raises(RemoteProtocolError):
        decode_event(stats, from_head=True)  # a reply carries five counts
    timeline = bytes.fromhex("11000000 12" + Z + Z)
    assert decode_event(timeline, from_head=False) == Timeline()
    with pytest.raises(RemoteProtocolError):
        decode_event(timeline, from_head=True)  # a reply carries at least a count
    status = bytes.fromhex("11000000 1a" + Z + Z)
    assert decode_event(status, from_head=False) == Status()
    assert decode_event(status, from_head=True) == Status("")


@pytest.mark.parametrize(
    "hex_",
    [
        "39000000 0d" + Z + Z + "00" * 40,  # stats with counts, sent to the head
        "19000000 12" + Z + Z + Z,  # timeline with a count, sent to the head
        "12000000 1a" + Z + Z + "78",  # status with text, sent to the head
    ],
)
def test_requests_to_the_head_carry_nothing(hex_: str) -> None:
    with pytest.raises(RemoteProtocolError):
        decode_event(bytes.fromhex(hex_), from_head=False)


@pytest.mark.parametrize(
    ("event", "from_head"),
    [
        (Stats(), True),
        (Stats(HeadStats(1, 2, 3, 4, 5)), False),
        (Timeline(), True),
        (Timeline(()), False),
        (Status(), True),
        (Status("x"), False),
        (ActorCreate(1, 2, b"", checkpoint_every=1), True),
        (ActorCreate(1, 2, b""), False),
        (Checkpoint(1, actor_id=2), True),
        (Checkpoint(1, restore_covers=2), False),
        (Checkpoint(1), False),
        (Checkpoint(1, restore_covers=1 << 63), True),  # over an i64
        (Checkpoint(1, restore_covers=-2), True),
    ],
)
def test_encoding_in_the_wrong_direction_is_refused(event: Event, from_head: bool) -> None:
    with pytest.raises(LocalProtocolError):
        encode_event(event, from_head=from_head)


# -- trailing and missing bytes in golden frames --------------------------------------------


@pytest.mark.parametrize(("golden", "from_head"), CASES)
def test_golden_with_a_byte_less_or_more_is_refused(golden: Golden, from_head: bool) -> None:
    data = golden.data
    with pytest.raises(RemoteProtocolError):
        decode_event(data[:-1], from_head=from_head)  # the body is shorter than announced
    with pytest.raises(RemoteProtocolError):
        decode_event(data + b"\x00", from_head=from_head)  # a byte trails the frame


# -- malformed frames, by hand: each names the kind and the field ------------------------------

MALFORMED: list[tuple[str, str, bool, int, str]] = [
    # (name, hex, from_head, kind, field)
    ("unknown-kind-0", "11000000 00" + Z + Z, False, 0, "kind"),
    ("unknown-kind-35", "11000000 23" + Z + Z, False, 35, "kind"),
    ("unknown-kind-255", "11000000 ff" + Z + Z, True, 255, "kind"),
    ("hello-empty", "11000000 04" + Z + Z, False, 4, "role"),
    ("hello-role-0", "1a000000 04" + Z + Z + "00" + R, False, 4, "role"),
    ("hello-role-5", "1a000000 04" + Z + Z + "05" + R, False, 4, "role"),
    ("hello-role-head", "1a000000 04" + Z + Z + "10" + R, False, 4, "role"),
    ("hello-driver-short-hash", "19000000 04" + Z + Z + "01" + R[:14], False, 4, "registry_hash"),
    ("hello-driver-no-hash", "12000000 04" + Z + Z + "01", False, 4, "registry_hash"),
    ("hello-worker-no-address", "1a000000 04" + Z + Z + "02" + R, False, 4, "address"),
    (
        "hello-worker-bad-port",
        "26000000 04" + Z + Z + "02" + R + "0a0000070000010000000000",
        False,
        4,
        "address",
    ),
    (
        "hello-driver-half-resume",
        "22000000 04" + Z + Z + "01" + R + "5634120000000000",
        False,
        4,
        "payload",
    ),
    (
        "hello-observer-resume",
        "2a000000 04" + Z + Z + "04" + R + Z + Z,
        False,
        4,
        "payload",
    ),
    (
        "welcome-short",
        "20000000 05" + Z + Z + "5634120000000000 01efbeadde0000",
        True,
        5,
        "payload",
    ),
    ("welcome-empty", "11000000 05" + Z + Z, True, 5, "payload"),
    ("task-after-empty", "11000000 06" + O + T, False, 6, "flags"),
    (
        "task-after-unknown-flag",
        "22000000 06" + O + T + "080100000000000000" + O,
        False,
        6,
        "flags",
    ),
    (
        "task-after-count-too-large",
        "22000000 06" + O + T + "010200000000000000" + O,
        False,
        6,
        "count",
    ),
    (
        "task-after-huge-count",
        "22000000 06" + O + T + "01ffffffffffffffff" + O,
        False,
        6,
        "count",
    ),
    (
        "task-after-two-without-gather",
        "2a000000 06" + O + T + "000200000000000000" + O + O,
        False,
        6,
        "count",
    ),
    (
        "task-after-none-without-gather",
        "1a000000 06" + O + T + "000000000000000000",
        False,
        6,
        "count",
    ),
    (
        "task-after-many-zero-results",
        "2a000000 06" + O + T + "04" + Z + "0100000000000000" + O,
        False,
        6,
        "results",
    ),
    (
        "task-after-value-overruns",
        "2b000000 06" + O + T + "020100000000000000" + O + "020000000000000076",
        False,
        6,
        "value",
    ),
    (
        "task-after-value-missing",
        "22000000 06" + O + T + "020100000000000000" + O,
        False,
        6,
        "value",
    ),
    (
        "task-after-trailing",
        "23000000 06" + O + T + "000100000000000000" + O + "00",
        False,
        6,
        "payload",
    ),
    ("stored-short", "18000000 07" + O + Z + "00001000000000", False, 7, "payload"),
    ("stored-long", "1a000000 07" + O + Z + "0000100000000000 00", False, 7, "payload"),
    ("located-short", "1c000000 08" + O + Z + "c0a80114 409c0000000000", True, 8, "address"),
    (
        "located-bad-port",
        "1d000000 08" + O + Z + "c0a80114ffff010000000000",
        True,
        8,
        "address",
    ),
    ("located-trailing", "1e000000 08" + O + Z + W7000_HEX + "00", True, 8, "token"),
    ("fetch-four-bytes", "15000000 09" + O + Z + "00000004", False, 9, "part"),
    ("fetch-nine-bytes", "1a000000 09" + O + Z + "0000000400000000 00", False, 9, "part"),
    (
        "task-inputs-unknown-tag",
        "23000000 0a" + O + T + "000100000000000000022a00000000000000",
        True,
        10,
        "inputs.tag",
    ),
    (
        "task-inputs-count-over-bytes",
        "23000000 0a" + O + T + "010200000000000000012b00000000000000",
        True,
        10,
        "count",
    ),
    (
        "task-inputs-inline-overruns",
        "2d000000 0a" + O + T + "000100000000000000002a0000000000000005000000000000006162",
        True,
        10,
        "inputs.data",
    ),
    (
        "task-inputs-location-short",
        "27000000 0a" + O + T + "000100000000000000012b000000000000000a000008",
        True,
        10,
        "inputs.address",
    ),
    ("release-payload", "12000000 0b" + O + Z + "00", False, 11, "payload"),
    ("free-payload", "12000000 0c" + O + Z + "00", True, 12, "payload"),
    ("stats-reply-short", "38000000 0d" + Z + Z + "00" * 39, True, 13, "payload"),
    ("holding-empty", "11000000 0e" + Z + Z, False, 14, "count"),
    (
        "holding-count-over-bytes",
        "2d000000 0e" + Z + Z + "02000000000000002a00000000000000" + W7000_HEX,
        False,
        14,
        "count",
    ),
    (
        "holding-bad-port",
        "2d000000 0e" + Z + Z + "01000000000000002a000000000000000a0000070000010000000000",
        False,
        14,
        "entries.address",
    ),
    (
        "holding-trailing",
        "2e000000 0e" + Z + Z + "01000000000000002a00000000000000" + W7000_HEX + "00",
        False,
        14,
        "payload",
    ),
    ("claim-payload", "12000000 0f" + O + Z + "00", False, 15, "payload"),
    ("resumed-payload", "12000000 10" + Z + Z + "00", False, 16, "payload"),
    ("span-short", "28000000 11" + O + Z + "00" * 23, False, 17, "payload"),
    ("timeline-reply-empty", "11000000 12" + Z + Z, True, 18, "count"),
    (
        "timeline-reply-count-over-bytes",
        "19000000 12" + Z + Z + "0100000000000000",
        True,
        18,
        "count",
    ),
    (
        "timeline-reply-bad-port",
        "6d000000 12" + Z + Z + "0100000000000000" + "00" * 72 + "0a0000070000010000000000",
        True,
        18,
        "records.address",
    ),
    (
        "actor-create-no-every",
        "18000000 13" + O + T + "0a000000000000",
        False,
        19,
        "checkpoint_every",
    ),
    ("actor-call-no-actor", "18000000 14" + O + T + "01000000000100", True, 20, "actor_id"),
    ("actor-kill-payload", "12000000 15" + A + Z + "00", True, 21, "payload"),
    ("checkpoint-short", "18000000 16" + A + Z + "01000000000100", False, 22, "payload"),
    ("checkpoint-long", "1a000000 16" + A + Z + A + "00", True, 22, "payload"),
    (
        "checkpoint-from-head-minus-two",
        "19000000 16" + A + Z + "feffffffffffffff",
        True,
        22,
        "restore_covers",
    ),
    ("actor-restore-empty", "11000000 18" + A + T, True, 24, "payload"),
    ("covered-long", "1a000000 19" + A + Z + "2a00000000000000 00", True, 25, "payload"),
    ("stop-payload", "12000000 1b" + Z + Z + "00", True, 27, "payload"),
    ("task-many-zero-results", "19000000 1c" + O + T + Z, False, 28, "results"),
    ("task-many-short", "18000000 1c" + O + T + "04000000000000", True, 28, "results"),
    ("drain-payload", "12000000 1d" + Z + Z + "00", False, 29, "payload"),
    ("adopt-short", "1c000000 1e" + O + Z + W7000_HEX[:-2], True, 30, "address"),
    ("adopted-empty", "11000000 1f" + O + Z, False, 31, "ok"),
    ("adopted-ok-2", "12000000 1f" + O + Z + "02", False, 31, "ok"),
    ("adopted-ok-no-address", "12000000 1f" + O + Z + "01", False, 31, "address"),
    ("adopted-ok-trailing", "1f000000 1f" + O + Z + "01" + W7000_HEX + "00", False, 31, "payload"),
    ("cancel-payload", "12000000 20" + O + Z + "00", False, 32, "payload"),
    ("part-short", "20000000 21" + O + Z + Z + "00000000000000", False, 33, "offset"),
    ("part-no-fields", "11000000 21" + O + Z, False, 33, "size"),
    (
        "part-over-max-object",
        "21000000 21" + O + Z + "0100000000010000" + Z,
        False,
        33,
        "size",
    ),
    (
        "part-overruns",
        "25000000 21" + O + Z + "0a00000000000000070000000000000065666768",
        False,
        33,
        "offset",
    ),
    (
        "part-offset-past-size",
        "21000000 21" + O + Z + "0a000000000000000b00000000000000",
        False,
        33,
        "offset",
    ),
]


@pytest.mark.parametrize(
    ("hex_", "from_head", "kind", "field"),
    [pytest.param(h, fh, k, f, id=name) for name, h, fh, k, f in MALFORMED],
)
def test_malformed_frame_names_kind_and_field(
    hex_: str, from_head: bool, kind: int, field: str
) -> None:
    data = bytes.fromhex(hex_)
    assert int.from_bytes(data[:4], "little") == len(data) - 4  # the vector itself is whole
    with pytest.raises(RemoteProtocolError) as info:
        decode_event(data, from_head=from_head)
    assert info.value.kind == kind
    assert info.value.field == field
    assert str(info.value)


def test_part_of_exactly_max_object_is_accepted() -> None:
    data = bytes.fromhex("21000000 21" + O + Z + "0000000000010000" + Z)
    assert decode_event(data) == Part(OID, 1 << 40, 0, b"")


@pytest.mark.parametrize(
    "hex_",
    [
        "",
        "110000",
        "10000000" + "00" * 16,  # the length is below the header
        "01000040 01",  # over MAX_FRAME
        "ffffffff 01",
    ],
)
def test_bad_prefixes_are_refused(hex_: str) -> None:
    with pytest.raises(RemoteProtocolError):
        decode_event(bytes.fromhex(hex_))
