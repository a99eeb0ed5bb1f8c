"""Objects mapped on one host: what a core asks of its runtime to share a stored object's
memory with a fetcher on the same host, and to take one shared with it.

A fetcher with a mailbox names it in its fetches (the task-ID field); an object server
whose runtime can hand the stored object over as a memory file does so (`Mapping.share`)
and answers with a mapped frame naming the ticket it went with; the fetcher's runtime takes
it from the mailbox (`Mapping.take`). Whatever fails on the way (no file, another host, a
full mailbox, a file that is not what the frame says), the object travels as the page has
it: the server answers with result or part frames, or the fetcher asks again without a
mailbox. The core has no OS: the runtime's ``dista_runtime._values.shared.SameHost`` is
the one implementation (docs/protocol.md, "Extensions: objects mapped on one host").
"""

from __future__ import annotations

from typing import Protocol

from .frame import Bytes

__all__ = ["Mapping"]


class Mapping(Protocol):
    """Same-host memory for a core's object server and fetcher."""

    @property
    def mailbox(self) -> int:
        """This process's mailbox (a nonzero u64), or 0: fetches name none."""
        ...

    def share(self, object_id: int, value: Bytes, mailbox: int) -> bytes | None:
        """Send stored ``value`` to ``mailbox`` as a memory file: the ticket it went with,
        or None if it cannot go that way (then it goes over the link)."""
        ...

    def take(self, object_id: int, size: int, ticket: bytes) -> Bytes | None:
        """The object that came to this process's mailbox with ``ticket``, mapped
        read-only, if it is there and is ``size`` bytes; else None (fetch it again)."""
        ...
