"""What every part of the head shares: its links, the peers on them, and the time.

`Wire` is the one object the head's components all hold. It owns the peers by link and
drivers by number, sends frames and closes links (`Links`), keeps the time of the input
being handled (``now``: every component reads it here, so it is set once per input), and
carries fetch grants: before the head tells a fetcher where an object lies (located to its
driver, task-inputs or adopt to a worker), it sends the holding worker a grant on the same
link it sends it work, a located frame whose object ID is the object and whose address is
the fetcher's host with port 0 (docs/protocol.md, "Extensions: fetch grants"). The grant
goes out first, so it usually arrives first; the worker waits a while for one that races
the fetch.

The head knows a peer's host only if the binding says it (`Head.peer`); for a peer without
one (in-memory links, an IPv6 peer, which an address cannot carry) no grant goes, and a
worker that checks fetches refuses it. A fetcher on the head's own machine (loopback) is
granted as 127.0.0.1: the worker reads that as "the head's machine"; so is any fetcher of
a holder that listens on loopback, which only a process on its machine can reach.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from . import frame as F
from ._errors import LocalProtocolError
from ._events import Address, Error, Located
from ._grants import canonical_host, is_loopback
from ._head_labels import LabelTable
from ._head_records import ObjState, Peer, TrackedObject
from ._links import Links
from ._partials import PARTIAL_CAP_BYTES, PartialCap
from ._roles import Role

__all__ = ["Wire", "grant_host", "not_given_text"]

_LOOPBACK: Final = "127.0.0.1"
#: The host a token grant names when the head does not know the fetcher's (it is not used).
_ANY_HOST: Final = "0.0.0.0"
_STORED: Final = ObjState.STORED
#: How many departed workers the head remembers for a dashboard.
DEPARTED_KEPT: Final = 64


def grant_host(host: str) -> str:
    """``host`` as a grant carries it: an IPv4 address, loopback as 127.0.0.1; "" if an
    address cannot carry it."""
    if is_loopback(host):
        return _LOOPBACK
    h = canonical_host(host)
    try:
        F.encode_addr(h, 0)
    except LocalProtocolError:
        return ""
    return h


def not_given_text(oid: int) -> str:
    """The error to a worker answering for an object it was not asked for."""
    return (
        f"object {oid:#x} is not a task or actor call this worker was given "
        "(or it was taken back): its answer is dropped"
    )


class Wire:
    """The head's links and peers, and the time of the input being handled."""

    def __init__(self, epoch: int, partial_cap_bytes: int = PARTIAL_CAP_BYTES) -> None:
        self.epoch: Final = epoch
        self.links: Links = Links()
        #: The cap every link's large frames in progress share (`dista_proto._partials`).
        self.partials: PartialCap = PartialCap(partial_cap_bytes)
        self.peers: dict[int, Peer] = {}  # link -> its peer, from connect until lost
        #: When the first driver of a head before resumed here (None: none yet): by the
        #: recovery grace after it, every one that will has (`Actors` holds replays till).
        self.resumes_from: int | None = None
        self.numbers: dict[int, Peer] = {}  # driver number -> its peer
        self.now = 0
        self.stopping = False
        #: For people (a dashboard): peers refused, and the workers that left lately, with
        #: why and when (the newest `DEPARTED_KEPT`).
        self.refused: int = 0
        #: What drivers call the IDs the head sees (status, errors, dashboards).
        self.labels: LabelTable = LabelTable()
        self.departed: deque[tuple[Peer, str, int]] = deque(maxlen=DEPARTED_KEPT)

    # -- peers -----------------------------------------------------------------------------

    def alive(self, peer: Peer) -> bool:
        """Whether ``peer`` is still the one connected on its link."""
        return self.peers.get(peer.link) is peer

    def told_positions(self, link: int) -> bool:
        """Whether the driver on ``link`` hears where its actor calls ran (answers carry
        their position): Dista's drivers, whose hello asked a secret; a page driver reads
        no task-ID field in a result."""
        peer = self.peers.get(link)
        return peer is not None and bool(peer.secret)

    def workers(self) -> list[Peer]:
        return [p for p in self.peers.values() if p.role == Role.WORKER]

    def draining_workers(self) -> list[Peer]:
        return [p for p in self.peers.values() if p.draining and p.role == Role.WORKER]

    @property
    def drivers(self) -> int:
        """Connected drivers (clients excluded)."""
        return sum(1 for p in self.peers.values() if p.role == Role.DRIVER)

    # -- frames ----------------------------------------------------------------------------

    def close(self, link: int, why: str) -> None:
        self.links.close(link, why)

    def refuse(self, peer: Peer, why: str, log: str = "") -> None:
        """Tell ``peer`` why, close its link (``log``: the reason for the head's log, if
        other than ``why``), and forget it."""
        self.links.send(peer.link, Error(0, why))
        self.links.close(peer.link, log or why)
        self.peers.pop(peer.link, None)
        self.refused += 1

    def not_given(self, worker: Peer, oid: int) -> None:
        """``worker`` answered for ``oid``, which is not with it: a forgery, or a task taken
        back or retried elsewhere. Dropped, and said (a worker ignores the error)."""
        if oid:
            self.links.send(worker.link, Error(oid, not_given_text(oid)))

    # -- grants ----------------------------------------------------------------------------

    def grant(self, holder: Peer | None, oid: int, fetcher_link: int) -> None:
        """``holder`` may let the peer on ``fetcher_link`` fetch ``oid``."""
        if holder is None or holder.link == fetcher_link:
            return
        fetcher = self.peers.get(fetcher_link)
        if fetcher is None:
            return
        if fetcher.token:
            # A driver with a secret is granted by its token, whatever its host: another
            # process on its machine (the host grant's weakness) has no token.
            address = Address(fetcher.host or _ANY_HOST, 0)
            self.links.send(holder.link, Located(oid, address, fetcher.token))
            return
        if not fetcher.host:
            return
        host = fetcher.host
        if is_loopback(holder.address.host):
            # The holder listens on loopback alone: whoever fetches from it is on its
            # machine, whatever address the head saw them come from (a driver that dialed
            # the head by the machine's own IP, the worker by 127.0.0.1): grant the head's
            # machine, which it is, or the fetch from 127.0.0.1 is refused.
            host = _LOOPBACK
        self.links.send(holder.link, Located(oid, Address(host, 0)))

    def locate(
        self, obj: TrackedObject, holder: Peer, address: Address, position: int = 0
    ) -> None:
        """Tell ``obj``'s driver it lies at ``address`` on ``holder`` (granted first);
        ``position``: an actor call's place in its actor's order (`Objects.set_answer`)."""
        self.grant(holder, obj.oid, obj.owner)
        self.links.send(obj.owner, Located(obj.oid, address, b"", position))

    def grant_inputs(self, inputs: tuple[TrackedObject, ...], worker: Peer) -> None:
        """``worker`` is about to fetch these stored inputs from their holders."""
        for obj in inputs:
            if obj.state is _STORED:
                self.grant(obj.holder, obj.oid, worker.link)
