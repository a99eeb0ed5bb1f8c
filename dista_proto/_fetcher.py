"""Fetching objects from workers' object servers, for drivers and workers alike.

One fetcher link per object-server address, opened on first use and reused. Each request
sends a fetch asking for parts of ``part`` bytes; the answer is a result frame, an error
frame, or part frames that fill one buffer allocated once (`frame.Parts`). Answers on one
link come in the order of the requests, but the fetcher keys them by object ID anyway.

Every fetcher link's connection is told where large payloads land (`Connection.land`): a
part of an object asked for goes straight into that object's `frame.Parts` buffer (the
fetcher reserves it there when the connection reads the part's header), and a large
result frame into a buffer from ``allocate``; so, on the receive-into path, the bytes of a
large object are written once, by the read itself. A part nobody asked for, or one that
doesn't fit what came before, is received as usual and its event handled as before.

With a `Mapping` whose mailbox is not 0, every fetch names the mailbox: an object server
on this host may answer with a mapped frame instead (`dista_proto._mapping`), and an object
that cannot be taken from the mailbox is asked for again without it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from . import frame as F
from ._decisions import Connect
from ._errors import RemoteProtocolError
from ._events import Address, Error, Event, Fetch, Mapped, Part, Result
from ._links import Links
from ._mapping import Mapping
from ._roles import Role
from .frame import Bytes

__all__ = ["Fetched", "Fetcher"]

#: (object ID, its bytes, or None and why not)
Fetched = tuple[int, Bytes | None, str]


class Fetcher:
    def __init__(
        self,
        links: Links,
        part: int = F.PART_SIZE,
        allocate: Callable[[int], bytearray | memoryview] = bytearray,
        mapping: Mapping | None = None,
    ) -> None:
        self._links = links
        self.part = part
        # Objects on this host come mapped where the runtime can (`_mapping`).
        self._mapping = mapping
        self._mailbox = mapping.mailbox if mapping is not None else 0
        #: A driver's fetch token (`dista_proto._credentials`), shown with every fetch.
        self.token = b""
        self._allocate = allocate
        self._by_address: dict[Address, int] = {}
        self._address: dict[int, Address] = {}
        self._wanted: dict[int, set[int]] = {}  # link -> object IDs asked for
        self._parts: dict[tuple[int, int], F.Parts[bytearray | memoryview]] = {}

    def owns(self, link: int) -> bool:
        return link in self._address

    def request(self, oid: int, address: Address) -> None:
        link = self._by_address.get(address)
        if link is None:
            link = self._links.open(Role.FETCHER, connecting=True)
            conn = self._links.conn(link)
            assert conn is not None
            conn.land(partial(self._land, link), self._allocate)
            self._by_address[address] = link
            self._address[link] = address
            self._wanted[link] = set()
            self._links.queue(Connect(link, address))
        wanted = self._wanted[link]
        if oid in wanted:
            return  # already on its way
        wanted.add(oid)
        self._links.send(link, Fetch(oid, self.part, self.token, self._mailbox))

    def receive(self, link: int, events: list[Event]) -> list[Fetched]:
        done: list[Fetched] = []
        wanted = self._wanted.get(link, set())
        address = self._address.get(link)
        for event in events:
            oid = getattr(event, "object_id", 0)
            if oid not in wanted:
                continue  # nothing we asked for: ignore
            if isinstance(event, Result):
                wanted.discard(oid)
                done.append((oid, event.value, ""))
            elif isinstance(event, Error):
                wanted.discard(oid)
                done.append((oid, None, f"fetch from {address} failed: {event.message}"))
            elif isinstance(event, Mapped):
                mapping = self._mapping
                value = mapping.take(oid, event.size, event.ticket) if mapping else None
                if value is None:  # its file never came, or is not what the frame says
                    self._links.send(link, Fetch(oid, self.part, self.token))
                else:
                    wanted.discard(oid)
                    done.append((oid, value, ""))
            elif isinstance(event, Part):
                key = (link, oid)
                parts = self._parts.get(key)
                if parts is None:
                    parts = self._parts[key] = F.Parts(self._allocate)
                try:
                    whole = parts.add_part(event.size, event.offset, event.data)
                except RemoteProtocolError as e:
                    del self._parts[key]
                    wanted.discard(oid)
                    done.append((oid, None, f"fetch from {address}: bad parts: {e}"))
                    continue
                except MemoryError as e:
                    del self._parts[key]
                    wanted.discard(oid)
                    why = f"fetch from {address}: no memory for {event.size} bytes: {e}"
                    done.append((oid, None, why))
                    continue
                if whole:
                    del self._parts[key]
                    wanted.discard(oid)
                    done.append((oid, parts.take(), ""))
        return done

    def _land(self, link: int, oid: int, size: int, offset: int, n: int) -> memoryview | None:
        """The connection's part sink: where a part of an object we asked for goes."""
        wanted = self._wanted.get(link)
        if wanted is None or oid not in wanted:
            return None  # nothing we asked for: its event is ignored
        key = (link, oid)
        parts = self._parts.get(key)
        if parts is None:
            parts = self._parts[key] = F.Parts(self._allocate)
        try:
            return parts.reserve(size, offset, n)
        except (RemoteProtocolError, MemoryError):
            return None  # received as usual: its event fails the object, as it always did

    def lost(self, link: int, why: str) -> list[Fetched]:
        """The link to an object server is gone: everything asked of it fails."""
        address = self._address.pop(link, None)
        if address is None:
            return []
        self._by_address.pop(address, None)
        wanted = self._wanted.pop(link, set())
        for oid in wanted:
            self._parts.pop((link, oid), None)
        self._links.forget(link)
        return [(oid, None, f"fetch from {address} failed: {why}") for oid in sorted(wanted)]
