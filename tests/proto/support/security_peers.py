"""Raw peers of a `Head` in memory, for the security tests: frames in, frames and closes out."""

from __future__ import annotations

import dista_proto as dp
from dista_proto import frame as F

REGISTRY = 7


def split_frames(data: bytes, from_head: bool = True) -> list[dp.Event]:
    """The events in the head's bytes (or, ``from_head`` False, another peer's), in order."""
    out: list[dp.Event] = []
    pos = 0
    while pos < len(data):
        end = pos + F.PREFIX + F.frame_length(data[pos : pos + F.PREFIX])
        out.append(dp.decode_event(data[pos:end], from_head=from_head))
        pos = end
    return out


class Net:
    """A head and the raw peers linked to it; `pump` carries out the head's decisions."""

    def __init__(self, **options: int) -> None:
        self.head = dp.Head(epoch=0x51, first_number=1, **options)  # type: ignore[arg-type]
        self.peers: dict[int, Raw] = {}

    def connect(self, now: int = 0) -> Raw:
        peer = Raw(self, self.head.connection_made(now))
        self.peers[peer.link] = peer
        return peer

    def pump(self) -> None:
        for d in self.head.decisions():
            peer = self.peers.get(getattr(d, "link", -1))
            if peer is None:
                continue
            if isinstance(d, dp.Write):
                peer.got += split_frames(b"".join(bytes(b) for b in d.buffers))
            elif isinstance(d, dp.Close):
                peer.closed = d.reason

    def driver(self, role: int = F.ROLE_DRIVER) -> Raw:
        d = self.connect()
        d.send(dp.Hello(role, registry_hash=REGISTRY))
        (welcome,) = d.take()
        assert isinstance(welcome, dp.Welcome)
        d.number = welcome.number
        return d

    def worker(self, port: int = 7000, checkpoints: bool = True) -> Raw:
        """A worker (with a checkpoint store, unless told otherwise: one may restore)."""
        w = self.connect()
        mark = dp.HELLO_CHECKPOINTS if checkpoints else 0
        w.send(dp.Hello(F.ROLE_WORKER, REGISTRY, dp.Address("10.0.0.1", port), mark=mark))
        return w


class Raw:
    """One link to the head: what it got, and why the head closed it (None: open)."""

    def __init__(self, net: Net, link: int) -> None:
        self.net = net
        self.link = link
        self.got: list[dp.Event] = []
        self.closed: str | None = None
        self.number = 0

    def send(self, *events: dp.Event, now: int = 0) -> None:
        data = b"".join(dp.encode_event(e) for e in events)
        self.net.head.receive_data(self.link, data, now)
        self.net.pump()

    def take(self) -> list[dp.Event]:
        out, self.got = self.got, []
        return out

    def oid(self, n: int) -> int:
        return self.number << dp.ID_BITS | n
