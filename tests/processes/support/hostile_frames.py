"""Mutated frame streams for hostile connections: what one attacker writes, frame by frame.

Theory of operation
-------------------
A `Streams` draws from one seeded `random.Random`, so a run is reproducible from its seed
(each connection gets its own generator, seeded from the run's seed and its index). A
session is what one connection sends before it closes: at the head, usually a hello of
some role (driver, resuming driver, worker, client, observer; sometimes none, or a mutated
one), then frames; at an object server, fetches. Each frame is a valid frame of some kind
with random fields (built as an event and encoded, so its layout is the wire contract's),
often one the role may send and aimed at what the attacker knows (the good driver's object
IDs, the cluster's registry, the workers' addresses), or a structure-aware mutation of one:
bit flips, a byte set to a boundary value, a wrong length prefix, a length near MAX_FRAME
with a few bytes of body, a truncated frame, a count field set huge, trailing bytes, two
frames spliced, a frame repeated.

What the attacker must not do on a plain (non-TLS) cluster is listed in `Aim`: saying hello
as a worker with the cluster's registry, or with a real worker's address, and an observer's
stop are what TLS role certificates exist to refuse; with them off by default, the fuzzer
measures what an unauthenticated peer can break beyond that.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

import dista_proto as dp
from dista_proto import frame as F

__all__ = ["Aim", "Streams", "HEAD_KINDS"]

_U64_MAX: Final = (1 << 64) - 1
_U32_BOUNDARY: Final = (0, 1, 16, 17, 18, 21, 42, 43, 1 << 20, F.MAX_FRAME - 1, F.MAX_FRAME)
_U64_BOUNDARY: Final = (0, 1, 2, 8, 9, 12, 1 << 32, (1 << 63) - 1, 1 << 63, _U64_MAX)
_BYTE_BOUNDARY: Final = (0, 1, 2, 3, 4, 5, 0x7F, 0x80, 0xFF)
#: Every kind the page defines, and a few it does not.
HEAD_KINDS: Final = (*sorted(F.KIND_NAMES), 0, 34, 200, 255)
_PEER_ROLES: Final = (F.ROLE_DRIVER, F.ROLE_WORKER, F.ROLE_CLIENT, F.ROLE_OBSERVER)


@dataclass
class Aim:
    """What an attacker knows of the cluster (from `dista status`, the good driver's
    refs, or guessing), and how far it may go."""

    #: The good driver's number and object IDs it holds.
    victim_number: int = 0
    victim_ids: list[int] = field(default_factory=list)
    #: The cluster's registry hash: hostile drivers and clients may use it (their tasks then
    #: reach the real workers, which refuse what they cannot run).
    registry: int = 0
    #: Real object servers' addresses (named in task-inputs, located, adopt frames).
    servers: list[dp.Address] = field(default_factory=list)
    #: Say hello as a worker with the cluster's registry or a real worker's address: without
    #: TLS that takes tasks from or knocks out real workers, by design (docs/security.md).
    impersonate: bool = False
    #: Send an observer's stop: without TLS, anyone may stop the cluster.
    allow_stop: bool = False
    #: Announce frames of 1 MiB up to MAX_FRAME and send a little of them (off: a
    #: diagnostic, to measure everything else without the receive maps they cost).
    big_lengths: bool = True


class Streams:
    """One connection's frames, drawn from ``rng``."""

    def __init__(self, rng: random.Random, aim: Aim) -> None:
        self.rng = rng
        self.aim = aim
        #: The number a welcome gave this connection's hostile driver (the caller sets it).
        self.number = 0

    # -- values ---------------------------------------------------------------------------------

    def u64(self) -> int:
        r = self.rng.random()
        if r < 0.3:
            return self.rng.choice(_U64_BOUNDARY)
        if r < 0.6:
            return self.rng.randrange(0, 1 << 12)
        return self.rng.getrandbits(64)

    def object_id(self) -> int:
        """An object ID: the good driver's, one numbered for this hostile driver (so the head
        takes its submissions), near either, or any u64."""
        rng, aim = self.rng, self.aim
        r = rng.random()
        if r < 0.3 and aim.victim_ids:
            return rng.choice(aim.victim_ids)
        if r < 0.45 and aim.victim_number:
            return aim.victim_number << 40 | rng.randrange(1, 4096)
        if r < 0.75 and self.number:
            return self.number << 40 | rng.randrange(1, 1 << 16)
        return self.u64()

    def blob(self, most: int = 64) -> bytes:
        return self.rng.randbytes(self.rng.randrange(0, most + 1))

    def address(self) -> dp.Address:
        rng = self.rng
        if self.aim.servers and rng.random() < 0.3:
            return rng.choice(self.aim.servers)
        host = rng.choice(("127.0.0.1", "0.0.0.0", "255.255.255.255", "10.1.2.3"))
        return dp.Address(host, rng.choice((0, 1, 7420, 65535, rng.randrange(1, 65536))))

    def worker_address(self) -> dp.Address:
        """A worker's own address in its hello: a real one only when impersonating."""
        if self.aim.impersonate and self.aim.servers and self.rng.random() < 0.3:
            return self.rng.choice(self.aim.servers)
        return dp.Address("10.66.0.1", self.rng.randrange(1, 65536))

    def registry(self, worker: bool) -> int:
        if self.aim.registry and (not worker or self.aim.impersonate) and self.rng.random() < 0.3:
            return self.aim.registry
        return self.rng.getrandbits(64)

    # -- valid frames ---------------------------------------------------------------------------

    def hello(self, role: int | None = None) -> bytes:
        rng = self.rng
        role = rng.choice(_PEER_ROLES) if role is None else role
        if role == F.ROLE_WORKER:
            event = dp.Hello(role, self.registry(True), self.worker_address())
        elif role == F.ROLE_DRIVER and rng.random() < 0.3:
            number = self.aim.victim_number if rng.random() < 0.5 else rng.randrange(1, 1 << 24)
            event = dp.Hello(role, self.registry(False), resume=dp.Resume(number, self.u64()))
        elif role == F.ROLE_OBSERVER:
            event = dp.Hello(role, 0)
        else:
            event = dp.Hello(role, self.registry(False))
        return dp.encode_event(event)

    def event(self, kind: int) -> dp.Event | None:
        """A random event of ``kind`` (None for a kind the page does not define)."""
        rng, oid, u64, blob = self.rng, self.object_id, self.u64, self.blob
        k = kind
        if k == F.KIND_TASK:
            return dp.Task(oid(), u64(), blob())
        if k == F.KIND_RESULT:
            return dp.Result(oid(), blob())
        if k == F.KIND_ERROR:
            return dp.Error(oid(), blob().decode("latin-1"))
        if k == F.KIND_HELLO:
            return None  # `hello` makes those
        if k == F.KIND_WELCOME:
            return dp.Welcome(u64(), u64())
        if k == F.KIND_TASK_AFTER:
            gather = rng.random() < 0.5
            n = rng.randrange(0, 6) if gather else 1
            return dp.TaskAfter(
                oid(),
                u64(),
                tuple(oid() for _ in range(n)),
                gather,
                blob() if rng.random() < 0.5 else None,
                rng.randrange(1, 5) if rng.random() < 0.2 else None,
            )
        if k == F.KIND_STORED:
            return dp.Stored(oid(), u64())
        if k == F.KIND_LOCATED:
            return dp.Located(oid(), self.address())
        if k == F.KIND_FETCH:
            return dp.Fetch(oid(), self.fetch_part())
        if k == F.KIND_TASK_INPUTS:
            inputs: list[dp.TaskInput] = [
                dp.InlineInput(oid(), blob())
                if rng.random() < 0.5
                else dp.LocatedInput(oid(), self.address())
                for _ in range(rng.randrange(0, 4))
            ]
            return dp.TaskInputs(oid(), u64(), tuple(inputs), True, None, None)
        if k == F.KIND_RELEASE:
            return dp.Release(oid())
        if k == F.KIND_FREE:
            return dp.Free(oid(), u64())
        if k == F.KIND_STATS:
            return dp.Stats()
        if k == F.KIND_HOLDING:
            entries = tuple(
                dp.HoldingEntry(oid(), self.address()) for _ in range(rng.randrange(0, 8))
            )
            return dp.Holding(entries)
        if k == F.KIND_CLAIM:
            return dp.Claim(oid())
        if k == F.KIND_RESUMED:
            return dp.Resumed()
        if k == F.KIND_SPAN:
            return dp.Span(oid(), u64(), u64(), u64(), rng.choice((0, 0, 1, 2, 3, 4, u64())))
        if k == F.KIND_TIMELINE:
            return dp.Timeline()
        if k == F.KIND_ACTOR_CREATE:
            return dp.ActorCreate(oid(), u64(), blob(), rng.choice((0, 1, 7, u64())))
        if k == F.KIND_ACTOR_CALL:
            return dp.ActorCall(oid(), u64(), oid(), blob())
        if k == F.KIND_ACTOR_KILL:
            return dp.ActorKill(oid(), rng.choice((0, 1, 2, 3, u64())))
        if k == F.KIND_CHECKPOINT:
            return dp.Checkpoint(oid(), u64(), oid(), None)
        if k == F.KIND_CHECKPOINTED:
            return dp.Checkpointed(oid(), u64(), rng.choice((None, "disk full")))
        if k == F.KIND_ACTOR_RESTORE:
            return dp.ActorRestore(oid(), u64(), u64())
        if k == F.KIND_COVERED:
            return dp.Covered(oid(), u64())
        if k == F.KIND_STATUS:
            return dp.Status()
        if k == F.KIND_STOP:
            return dp.Stop()
        if k == F.KIND_TASK_MANY:
            return dp.TaskMany(oid(), u64(), rng.choice((1, 2, 3, 1000, 1 << 20)), blob())
        if k == F.KIND_DRAIN:
            return dp.Drain()
        if k == F.KIND_ADOPT:
            return dp.Adopt(oid(), self.address())
        if k == F.KIND_ADOPTED:
            return (
                dp.Adopted(oid(), self.address())
                if rng.random() < 0.5
                else dp.Adopted(oid(), None, "no")
            )
        if k == F.KIND_CANCEL:
            return dp.Cancel(oid(), rng.choice((0, 1, u64())))
        if k == F.KIND_PART:
            size = rng.choice((0, 1, 100, F.MAX_OBJECT, rng.randrange(0, 1 << 20)))
            data = blob()
            return dp.Part(oid(), max(size, len(data)), 0, data)
        return None

    def fetch_part(self) -> int:
        return self.rng.choice(
            (0, 1, 100, dp.MIN_FETCH_PART - 1, dp.MIN_FETCH_PART, F.PART_SIZE, _U64_MAX)
        )

    def frame(self, kind: int) -> bytes:
        """A valid frame of ``kind`` with random fields; a raw one for an unknown kind."""
        if kind == F.KIND_STOP and not self.aim.allow_stop:
            kind = F.KIND_STATUS
        event = self.event(kind)
        if kind == F.KIND_HELLO:
            return self.hello()
        if event is None:
            return self.raw(kind)
        # Kinds only the head sends are encoded as the head would: their layout, wrong way.
        from_head = kind in (
            F.KIND_WELCOME,
            F.KIND_LOCATED,
            F.KIND_TASK_INPUTS,
            F.KIND_FREE,
            F.KIND_COVERED,
            F.KIND_ACTOR_RESTORE,
            F.KIND_ADOPT,
        )
        try:
            return dp.encode_event(event, from_head=from_head)
        except dp.LocalProtocolError:
            return self.raw(kind)

    def raw(self, kind: int) -> bytes:
        payload = self.blob()
        return (
            struct.pack("<IBQQ", F.HEADER + len(payload), kind, self.object_id(), self.u64())
            + payload
        )

    # -- mutations ----------------------------------------------------------------------------

    def mutate(self, data: bytes) -> tuple[bytes, bool]:
        """A structure-aware mutation of one whole frame; whether the stream is then
        desynchronised (a wrong length, a truncation), so the session should end after it."""
        rng = self.rng
        b = bytearray(data)
        how = rng.randrange(10)
        if how == 0:  # bit flips anywhere
            first = 0 if self.aim.big_lengths else F.PREFIX
            for _ in range(rng.randrange(1, 4)):
                i = rng.randrange(first, len(b))
                b[i] ^= 1 << rng.randrange(8)
            return bytes(b), True
        if how == 1:  # a byte of the header or payload set to a boundary value
            i = rng.randrange(4, len(b))
            b[i] = rng.choice(_BYTE_BOUNDARY)
            return bytes(b), False
        if how == 3 and not self.aim.big_lengths:
            how = 2
        if how == 2:  # a wrong length prefix
            length = len(b) - 4
            bounds = _U32_BOUNDARY if self.aim.big_lengths else _U32_BOUNDARY[:8]
            new = rng.choice((*bounds, length - 1, length + 1, length + rng.randrange(2, 100)))
            struct.pack_into("<I", b, 0, max(0, min(new, 0xFFFFFFFF)))
            return bytes(b), True
        if how == 3:  # a length near MAX_FRAME, then only a little of the body
            struct.pack_into("<I", b, 0, F.MAX_FRAME - rng.randrange(0, 64))
            return bytes(b) + rng.randbytes(rng.randrange(0, 4096)), True
        if how == 4:  # truncated
            return bytes(b[: rng.randrange(1, len(b))]), True
        if how == 5 and len(b) >= F.PREFIX + F.HEADER + 9:  # a count or size field set huge
            at = F.PREFIX + F.HEADER + rng.choice((0, 1, 9))
            at = min(at, len(b) - 8)
            struct.pack_into("<Q", b, at, rng.choice(_U64_BOUNDARY[5:]))
            return bytes(b), False
        if how == 6:  # trailing bytes, the length fixed to include them
            extra = rng.randbytes(rng.randrange(1, 40))
            struct.pack_into("<I", b, 0, len(b) - 4 + len(extra))
            return bytes(b) + extra, False
        if how == 7:  # the kind byte changed, the rest kept
            b[4] = rng.choice(HEAD_KINDS)
            return bytes(b), False
        if how == 8:  # spliced with another kind's frame
            other = self.frame(rng.choice(HEAD_KINDS))
            cut = rng.randrange(1, len(b))
            return bytes(b[:cut]) + other[rng.randrange(0, len(other)) :], True
        return bytes(b) * rng.randrange(2, 20), False  # the same frame, again and again

    # -- sessions -------------------------------------------------------------------------------

    def head_session(self) -> Iterator[bytes]:
        """What one connection to the head writes, frame by frame, before it closes."""
        rng = self.rng
        r = rng.random()
        role: int | None
        if r < 0.08:
            role = None  # no hello at all
        elif r < 0.13:
            role = None
            yield self.mutate(self.hello())[0]
        else:
            role = rng.choices(_PEER_ROLES, (45, 15, 10, 30))[0]
            yield self.hello(role)
        allowed = sorted(self._allowed(role))
        for _ in range(int(rng.expovariate(1 / 60)) + 1):
            r = rng.random()
            kind = rng.choice(allowed) if r < 0.6 and allowed else rng.choice(HEAD_KINDS)
            data = self.frame(kind)
            if r > 0.8:
                data, broken = self.mutate(data)
                yield self.no_stop(data)
                if broken:
                    return
            else:
                yield data

    def no_stop(self, data: bytes) -> bytes:
        """``data`` with every stop frame the walk of its length prefixes finds turned into a
        status request, unless stops are allowed (a bit flip makes a status a stop)."""
        if self.aim.allow_stop:
            return data
        b: bytearray | None = None
        pos = 0
        while pos + F.PREFIX + 1 <= len(data):
            if data[pos + F.PREFIX] == F.KIND_STOP:
                b = bytearray(data) if b is None else b
                b[pos + F.PREFIX] = F.KIND_STATUS
            pos += F.PREFIX + struct.unpack_from("<I", data, pos)[0]
        return data if b is None else bytes(b)

    def server_session(self) -> Iterator[bytes]:
        """What one connection to an object server writes before it closes."""
        rng = self.rng
        for _ in range(int(rng.expovariate(1 / 30)) + 1):
            if rng.random() < 0.7:
                data = self.frame(F.KIND_FETCH)
            else:
                data, broken = self.mutate(self.frame(rng.choice((F.KIND_FETCH, *HEAD_KINDS))))
                yield data
                if broken:
                    return
                continue
            yield data

    @staticmethod
    def _allowed(role: int | None) -> frozenset[int]:
        if role is None:
            return frozenset()
        kinds = dp.allowed_kinds(dp.Role(role), dp.Role.HEAD) - {F.KIND_HELLO}
        return kinds
