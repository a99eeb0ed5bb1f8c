"""The head's half of fetch grants: tell a holding worker who may fetch an object from it.

An object server answers a fetch only from a fetcher the head told where the object lies
(or a cluster member by TLS; see `_grants`). So, whenever the head is about to tell a
fetcher where an object lies (located to its driver, task-inputs or adopt to a worker), it
first sends the holding worker a grant on the same link it sends it work: a located frame
whose object ID is the object and whose address is the fetcher's host with port 0
(docs/protocol.md, "Extensions: fetch grants"). The grant goes out first, so it usually
arrives first; the worker waits a while for one that races the fetch.

The head knows a peer's host only if the binding says it (`peer`); for a peer without one
(in-memory links, an IPv6 peer, which an address cannot carry) no grant goes, and a worker
that checks fetches refuses it. A fetcher on the head's own machine (loopback) is granted
as 127.0.0.1: the worker reads that as "the head's machine"; so is any fetcher of a holder
that listens on loopback, which only a process on its machine can reach.
"""

from __future__ import annotations

from typing import Final

from . import frame as F
from ._errors import LocalProtocolError
from ._events import Address, Located
from ._grants import canonical_host, is_loopback
from ._head_records import ObjState, Peer, TaskRecord
from ._links import Links

__all__ = ["Granting"]

_LOOPBACK: Final = "127.0.0.1"
_STORED: Final = ObjState.STORED


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


class Granting:
    """Grants, for `Head` (a base of `Scheduling`, so every half of the head may grant)."""

    _links: Links
    _peers: dict[int, Peer]

    def peer(self, link: int, host: str) -> None:
        """The host (IP address) ``link``'s peer connects from, as the head's binding sees
        it: call it for every accepted link (127.0.0.1 for an in-memory one)."""
        peer = self._peers.get(link)
        if peer is not None:
            peer.host = grant_host(host)

    def _grant(self, holder: Peer | None, oid: int, fetcher_link: int) -> None:
        """``holder`` may let the peer on ``fetcher_link`` fetch ``oid``."""
        if holder is None or holder.link == fetcher_link:
            return
        fetcher = self._peers.get(fetcher_link)
        if fetcher is None or not fetcher.host:
            return
        host = fetcher.host
        if is_loopback(holder.address.host):
            # The holder listens on loopback alone: whoever fetches from it is on its
            # machine, whatever address the head saw them come from (a driver that dialed
            # the head by the machine's own IP, the worker by 127.0.0.1): grant the head's
            # machine, which it is, or the fetch from 127.0.0.1 is refused.
            host = _LOOPBACK
        self._links.send(holder.link, Located(oid, Address(host, 0)))

    def _grant_inputs(self, task: TaskRecord, worker: Peer) -> None:
        """``worker`` is about to fetch ``task``'s stored inputs from their holders."""
        for obj in task.inputs:
            if obj.state is _STORED:
                self._grant(obj.holder, obj.oid, worker.link)
