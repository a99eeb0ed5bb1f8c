"""The simulated cluster on one machine whose processes share memory: every fetch names the
fetcher's mailbox, and object servers answer with mapped frames (docs/protocol.md,
"Extensions: objects mapped on one host").

`HostMemory` stands for the kernel: the mailboxes, and what was sent to each. A process's
`SimMapping` shares only stored values it holds "in a memory file" (those of `FILE_FROM`
bytes or more), and fails now and then as the runtime's may (a full mailbox, a file that is
not what the frame says), so the fallback (the fetcher asks again without its mailbox)
runs under every fault the scenarios make. Its draws come from a generator of its own,
seeded from the scenario's seed, so a scenario's own draws are those of the plain sim until
the first mapped frame changes what happens. A file outlives the worker that sent it (a
killed worker's objects stay readable where they were mapped); a mailbox of a driver or
worker that is gone still takes datagrams nobody reads, as the kernel's would not: the
fetcher's take is all that matters here.
"""

from __future__ import annotations

import random

import dista_proto as dp
from dista_proto.frame import Bytes

from .cluster import Sim, SimDriver, SimWorker
from .recovery import RecoverySim

#: Values from this size are "in memory files" (the runtime's SHARE_FROM, scaled to the sim).
FILE_FROM = 64
#: How often a share fails (no file, a full mailbox) and a sent file is not taken.
SHARE_FAILS = 0.1
TAKE_FAILS = 0.1


class HostMemory:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed ^ 0x5EA7ED)
        self.mailboxes: dict[int, dict[bytes, tuple[int, bytes]]] = {}
        self.shared = 0
        self.taken = 0

    def open(self) -> SimMapping:
        mailbox = self.rng.randrange(1, 1 << 64)
        self.mailboxes[mailbox] = {}
        return SimMapping(self, mailbox)


class SimMapping:
    """One process's mailbox (`dp.Mapping`)."""

    def __init__(self, host: HostMemory, mailbox: int) -> None:
        self._host = host
        self._mailbox = mailbox

    @property
    def mailbox(self) -> int:
        return self._mailbox

    def share(self, object_id: int, value: Bytes, mailbox: int) -> bytes | None:
        host = self._host
        box = host.mailboxes.get(mailbox)
        if box is None or len(value) < FILE_FROM or host.rng.random() < SHARE_FAILS:
            return None
        ticket = host.rng.randbytes(dp.TICKET_SIZE)
        box[ticket] = (object_id, bytes(value))
        host.shared += 1
        return ticket

    def take(self, object_id: int, size: int, ticket: bytes) -> Bytes | None:
        host = self._host
        found = host.mailboxes[self._mailbox].pop(ticket, None)
        if found is None or host.rng.random() < TAKE_FAILS:
            return None
        oid, value = found
        if oid != object_id or len(value) != size:
            return None
        host.taken += 1
        return value


class MappedSim(Sim):
    def mapping_for(self, machine: SimWorker | SimDriver) -> dp.Mapping | None:
        memory: HostMemory | None = getattr(self, "memory", None)
        if memory is None:
            memory = self.memory = HostMemory(self.seed)
        return memory.open()


class MappedRecoverySim(MappedSim, RecoverySim):
    pass
