"""Hostile asyncio connections: each writes session after session of `Streams` frames at a
head or an object server, reconnecting whenever a session ends or the peer closes, until a
shared frame budget or a deadline runs out.

Each session's generator is seeded from the run's seed, the connection's index and the
session's number, so a session that broke something is written out again from those three
(and the number the head's welcome gave, which aims its object IDs): `Tally.recent` keeps
the last sessions' frames for a crash report. What the peers send back is parsed frame by
frame and counted: error frames by their message (digits folded), so the report says what
each kind of attacker got.
"""

from __future__ import annotations

import asyncio
import random
import re
import struct
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Final, Literal

from dista_proto import frame as F

from .hostile_frames import Aim, Streams

__all__ = ["Budget", "Tally", "attack", "session_rng"]

Target = Literal["head", "server"]
#: Frames larger than this coming back are counted and skipped, not buffered.
_LARGEST_PARSED: Final = 4 << 20
_DIGITS: Final = re.compile(r"0x[0-9a-f]+|\d+")
_U64: Final = struct.Struct("<Q")


@dataclass
class Budget:
    """Frames left to send, and when to stop anyway."""

    frames: int
    deadline: float

    def spent(self) -> bool:
        return self.frames <= 0 or time.monotonic() >= self.deadline


@dataclass
class Tally:
    """What the hostile connections did and got."""

    frames: int = 0
    bytes_sent: int = 0
    sessions: int = 0
    opened: int = 0
    closed_by_peer: int = 0
    connect_failures: int = 0
    frames_received: int = 0
    bytes_received: int = 0
    error_frames: int = 0
    kinds_received: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    #: (target, connection, session, frames) of the last sessions, for a crash report.
    recent: deque[tuple[str, int, int, list[bytes]]] = field(
        default_factory=lambda: deque(maxlen=200)
    )


def session_rng(seed: int, index: int, session: int) -> random.Random:
    """The generator of one session: reproducible from these three."""
    return random.Random(f"{seed}/{index}/{session}")


class _Reader:
    """Parses what a peer sends back into frame kinds and error messages."""

    def __init__(self, target: Target, streams: Streams, tally: Tally) -> None:
        self.target = target
        self.streams = streams
        self.tally = tally
        self.buf = bytearray()
        self.skip = 0  # bytes of an oversized frame still to skip

    async def run(self, reader: asyncio.StreamReader) -> None:
        while data := await reader.read(1 << 16):
            self.tally.bytes_received += len(data)
            self.feed(data)

    def feed(self, data: bytes) -> None:
        if self.skip:
            n = min(self.skip, len(data))
            self.skip -= n
            data = data[n:]
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= F.PREFIX + 1:
            length = int.from_bytes(buf[pos : pos + 4], "little")
            kind = buf[pos + 4]
            if length > _LARGEST_PARSED:
                self._frame(kind, b"")
                self.skip = max(0, pos + F.PREFIX + length - len(buf))
                pos = len(buf)
                break
            end = pos + F.PREFIX + length
            if end > len(buf):
                break
            self._frame(kind, bytes(buf[pos + F.PREFIX + F.HEADER : end]))
            pos = end
        del buf[:pos]

    def _frame(self, kind: int, payload: bytes) -> None:
        tally = self.tally
        tally.frames_received += 1
        tally.kinds_received[f"{self.target}:{F.kind_name(kind)}"] += 1
        if kind == F.KIND_ERROR:
            tally.error_frames += 1
            text = payload.decode("utf-8", "replace")
            tally.errors[f"{self.target}: {_DIGITS.sub('N', text)[:110]}"] += 1
        elif kind == F.KIND_WELCOME and len(payload) == 16:
            self.streams.number = _U64.unpack_from(payload)[0]


async def _session(
    target: Target,
    address: tuple[str, int],
    index: int,
    n: int,
    seed: int,
    aim: Aim,
    budget: Budget,
    tally: Tally,
) -> None:
    rng = session_rng(seed, index, n)
    streams = Streams(rng, aim)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(*address), 10)
    except (TimeoutError, OSError):
        tally.connect_failures += 1
        await asyncio.sleep(0.05)
        return
    tally.opened += 1
    tally.sessions += 1
    sent: list[bytes] = []
    tally.recent.append((target, index, n, sent))
    # One connection in eight never reads (a slow reader); one in eight writes in small
    # pieces with pauses between them.
    reads = rng.random() >= 0.125
    dribbles = rng.random() < 0.125
    parser = _Reader(target, streams, tally)
    reading = asyncio.ensure_future(parser.run(reader) if reads else _never(reader))
    frames = streams.head_session() if target == "head" else streams.server_session()
    try:
        for data in frames:
            if budget.spent() or reading.done() or writer.transport.is_closing():
                break
            if len(sent) < 400:
                sent.append(data)
            if dribbles:
                for i in range(0, len(data), 7):
                    if writer.transport.is_closing():
                        break
                    writer.write(data[i : i + 7])
                    await asyncio.sleep(rng.random() * 0.002)
            else:
                writer.write(data)
            budget.frames -= 1
            tally.frames += 1
            tally.bytes_sent += len(data)
            if writer.transport.get_write_buffer_size() > 1 << 16:
                await asyncio.wait_for(writer.drain(), 5)
            elif rng.random() < 0.05:
                await asyncio.sleep(0)
        # Let the answers to the last frames come back (the head's errors, a fetch's result).
        await asyncio.wait({reading}, timeout=rng.random() * 0.05)
    except (TimeoutError, OSError):
        pass
    finally:
        if reading.done() and not reading.cancelled():
            tally.closed_by_peer += 1  # the peer ended (or reset) the stream first
        reading.cancel()
        writer.transport.abort()
        await asyncio.gather(reading, return_exceptions=True)


async def _never(reader: asyncio.StreamReader) -> None:
    """A connection that never reads: wait until it is aborted (its peer's writes queue)."""
    await asyncio.Event().wait()


async def _connection(
    target: Target,
    address: tuple[str, int],
    index: int,
    seed: int,
    aim: Aim,
    budget: Budget,
    tally: Tally,
) -> None:
    n = 0
    while not budget.spent():
        await _session(target, address, index, n, seed, aim, budget, tally)
        n += 1


async def attack(
    head: tuple[str, int],
    servers: list[tuple[str, int]],
    connections: int,
    seed: int,
    aim: Aim,
    budget: Budget,
    tally: Tally,
) -> None:
    """``connections`` at once: half at the head, half spread over the object servers."""
    jobs = []
    for i in range(connections):
        if i % 2 == 0 or not servers:
            jobs.append(_connection("head", head, i, seed, aim, budget, tally))
        else:
            server = servers[(i // 2) % len(servers)]
            jobs.append(_connection("server", server, i, seed, aim, budget, tally))
    await asyncio.gather(*jobs)
