"""The simulated cluster with hosts: every link has an IP address, and workers check fetches.

`Hosts` gives each machine a host, tells the head each peer's (`Head.peer`) and an object
server each fetcher's (`Worker.peer`), and turns on `Worker.check_fetches`: a fetch is then
served only once the head granted the object to the fetcher's host (docs/protocol.md,
"Extensions: fetch grants"). The head runs on worker 0's machine, 10.0.0.1, as do the
even-numbered drivers: the head sees them (and worker 0) on loopback and grants to
127.0.0.1, "the head's machine"; the other workers see them as 10.0.0.1, and worker 0 sees
a local driver come from its own address. Odd-numbered drivers are on machines of their
own. A grant the head forgot leaves a fetch waiting: the scenario's object never resolves.
"""

from __future__ import annotations

import dista_proto as dp

from .cluster import Sim, SimDriver, SimWorker
from .recovery import RecoverySim

HEAD_HOST = "10.0.0.1"
LOOPBACK = "127.0.0.1"


class Hosts(Sim):
    """A `Sim` (or, mixed in first, a `RecoverySim`) whose links have hosts."""

    def host_of(self, core: object, seen_by_head: bool) -> str:
        """Where ``core``'s connections come from, as the head or an object server sees it."""
        machine = self._machine(core)
        if isinstance(machine, SimWorker):
            host = machine.address.host
        elif isinstance(machine, SimDriver):
            host = HEAD_HOST if machine.index % 2 == 0 else f"10.0.1.{machine.index + 1}"
        else:
            raise TypeError(f"no machine for {core!r}")
        return LOOPBACK if seen_by_head and host == HEAD_HOST else host

    def _connect_to_head(self, core: dp.Worker | dp.Driver) -> None:
        link = self.head.connection_made(self.now)
        self.head.peer(link, self.host_of(core, seen_by_head=True))
        self._pair(core, 0, self.head, link)
        if isinstance(core, dp.Worker):
            core.check_fetches = True
            mine = self.host_of(core, seen_by_head=False)
            core.peer(dp.HEAD_LINK, LOOPBACK if mine == HEAD_HOST else HEAD_HOST)

    def _open_fetch(self, core: object, link: int, address: dp.Address) -> None:
        target = self.by_address.get(address)
        if target is None or not target.alive:
            super()._open_fetch(core, link, address)
            return
        assert isinstance(core, (dp.Worker, dp.Driver))
        server_link = target.core.connection_made(self.now)
        target.core.peer(server_link, self.host_of(core, seen_by_head=False))
        self._pair(core, link, target.core, server_link)
        core.connected(link, self.now)
        self._run_decisions(core)


class SecureSim(Hosts):
    pass


class SecureRecoverySim(Hosts, RecoverySim):
    pass
