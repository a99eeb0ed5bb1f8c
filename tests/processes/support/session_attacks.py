"""Session takeover and fetches across drivers, for tests/processes/test_attack_sessions.py.

The victim (``python -m tests.processes.support.session_attacks victim HOST:PORT GO``) makes
a 1 MiB object that stays on its worker, reads it once (so the head granted it), makes an
actor, prints ``victim ready``, waits for the file GO, then reads both again and prints
``victim: all right``. The attacker is a raw socket (TLS when given a context) that speaks
frames by hand: what it gets is counted frame by frame (`Loot`).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import socket
import ssl
import struct
import sys
import time
from dataclasses import dataclass, field

import dista_proto as dp
import dista_runtime as dista
from dista_proto import frame as F

#: Over the inline limit: it stays on its worker and is fetched from its object server.
SIZE = 1 << 20


def blob_bytes(size: int) -> bytes:
    return hashlib.sha256(str(size).encode()).digest() * (size // 32)


@dista.task
def blob(size: int) -> bytes:
    return blob_bytes(size)


@dista.actor
class Tally:
    def __init__(self) -> None:
        self.n = 0

    def add(self, k: int) -> int:
        self.n += k
        return self.n


def victim(address: str, go: str) -> int:
    # Run as ``python -m``, this module is ``__main__``, whose tasks travel by value and so
    # run only on workers that accept by-value code: use the ones the workers import.
    me = importlib.import_module(__spec__.name if __spec__ else __name__)

    with dista.init(address=address):
        ref = me.blob.remote(SIZE)
        want = blob_bytes(SIZE)
        assert ref.get(timeout=30) == want
        tally = me.Tally.remote()  # type: ignore[attr-defined]
        assert tally.add.remote(1).get(timeout=30) == 1
        print("victim ready", flush=True)
        while not os.path.exists(go):
            time.sleep(0.05)
        assert ref.get(timeout=30) == want  # fetched again from the object server
        assert tally.add.remote(1).get(timeout=30) == 2  # the actor lives on
    print("victim: all right", flush=True)
    return 0


# -- the attacker ------------------------------------------------------------------------------

_EPOCH = re.compile(r"epoch (0x[0-9a-f]+)")
_DRIVER = re.compile(r"^driver (\d+): registry (0x[0-9a-f]+)", re.MULTILINE)
_ACTOR = re.compile(r"^actor (0x[0-9a-f]+)", re.MULTILINE)


@dataclass
class Target:
    """What `dista status` shows of a driver: all a resume pair needs."""

    number: int
    registry: int
    epoch: int
    actors: list[int]


def read_status(text: str) -> Target:
    epoch = _EPOCH.search(text)
    driver = _DRIVER.search(text)
    assert epoch and driver, text
    actors = [int(a, 16) for a in _ACTOR.findall(text)]
    return Target(int(driver.group(1)), int(driver.group(2), 16), int(epoch.group(1), 16), actors)


class Raw:
    """One connection, frames by hand; TLS when ``context`` is given."""

    def __init__(self, address: tuple[str, int], context: ssl.SSLContext | None) -> None:
        sock = socket.create_connection(address, timeout=10)
        self.sock = context.wrap_socket(sock) if context is not None else sock
        self.buf = bytearray()
        self.eof = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def next(self, timeout: float) -> tuple[int, int, int, bytes] | None:
        """The next frame as (kind, object ID, task ID, payload); None once closed or quiet."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 4:
                (n,) = struct.unpack_from("<I", self.buf)
                if len(self.buf) >= 4 + n:
                    body = bytes(self.buf[4 : 4 + n])
                    del self.buf[: 4 + n]
                    kind, oid, tid = struct.unpack_from("<BQQ", body)
                    return kind, oid, tid, body[17:]
            left = deadline - time.monotonic()
            if self.eof or left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 20)
            except TimeoutError:
                return None
            except (ConnectionError, ssl.SSLError):
                chunk = b""
            self.eof = not chunk
            self.buf += chunk

    def close(self) -> None:
        self.sock.close()


def frame(kind: int, oid: int = 0, tid: int = 0, payload: bytes = b"") -> bytes:
    body = struct.pack("<BQQ", kind, oid, tid) + payload
    return struct.pack("<I", len(body)) + body


@dataclass
class Loot:
    """What an attacker got."""

    welcomed: bool = False
    errors: list[str] = field(default_factory=list)
    located: list[int] = field(default_factory=list)
    bytes_read: int = 0


def resume_as(
    head: tuple[str, int],
    context: ssl.SSLContext | None,
    target: Target,
    *,
    secret: bytes = b"",
    server_context: ssl.SSLContext | None = None,
) -> Loot:
    """Resume as ``target`` (with a guessed ``secret`` or none), then claim its first
    objects, fetch what the head locates, and kill its actors."""
    loot = Loot()
    peer = Raw(head, context)
    payload = bytes([F.ROLE_DRIVER]) + struct.pack(
        "<QQQ", target.registry, target.number, target.epoch
    )
    peer.send(frame(F.KIND_HELLO, tid=dp.HELLO_SECRET if secret else 0, payload=payload + secret))
    first = peer.next(10)
    if first is None or first[0] != F.KIND_WELCOME:
        if first is not None and first[0] == F.KIND_ERROR:
            loot.errors.append(first[3].decode(errors="replace"))
        peer.close()
        return loot
    loot.welcomed = True
    base = target.number << dp.ID_BITS
    peer.send(b"".join(frame(F.KIND_CLAIM, base | n) for n in range(1, 9)))
    peer.send(b"".join(frame(F.KIND_ACTOR_KILL, a) for a in target.actors))
    while (got := peer.next(2)) is not None:
        kind, oid, _, body = got
        if kind == F.KIND_LOCATED:
            loot.located.append(oid)
            ip, port = ".".join(map(str, body[:4])), struct.unpack_from("<Q", body, 4)[0]
            loot.bytes_read += fetch((ip, port), server_context, oid)[0]
        elif kind == F.KIND_ERROR:
            loot.errors.append(body.decode(errors="replace"))
    peer.close()
    return loot


def fetch(
    server: tuple[str, int],
    context: ssl.SSLContext | None,
    oid: int,
    token: bytes = b"",
    wait: float = 10.0,
) -> tuple[int, str]:
    """Fetch ``oid`` from an object server: the bytes of the value served (0 if refused),
    and the error frame's text."""
    peer = Raw(server, context)
    payload = struct.pack("<Q", F.PART_SIZE) + token
    peer.send(frame(F.KIND_FETCH, oid, payload=payload))
    got = peer.next(wait)
    peer.close()
    if got is None:
        return 0, "closed"
    if got[0] == F.KIND_ERROR:
        return 0, got[3].decode(errors="replace")
    return len(got[3]), ""


if __name__ == "__main__":
    sys.exit(victim(sys.argv[2], sys.argv[3]) if sys.argv[1] == "victim" else 2)
