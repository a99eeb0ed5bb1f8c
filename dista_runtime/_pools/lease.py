"""Which cluster an executor or a pool runs on, and who stops it.

A process joins one cluster at a time (`dista.init`), so executors and pools share the one
it joined: ``Executor()`` and ``Pool()`` with no cluster joined start one (as
`ProcessPoolExecutor()` starts its processes), and any other one made meanwhile runs on it
too. The cluster they started stops when the last of them that uses it is shut down
(``shutdown``, ``join``, ``terminate``), not with the first: one process, one cluster. A
cluster the program joined itself (``dista.init()``, ``Executor(cluster=c)``) is never
stopped by them.
"""

from __future__ import annotations

import threading

from .._api import cluster as _cluster_api
from .._api.cluster import Cluster
from .._errors import DistaError
from .._net.address import format_head, parse_head
from .._session import context as _context

__all__ = ["Lease", "acquire"]

_lock = threading.Lock()
#: The cluster executors and pools started, and how many of them use it.
_started: Cluster | None = None
_holders = 0


class Lease:
    """One executor's or pool's hold on the cluster it runs on."""

    def __init__(self, cluster: Cluster | None, counted: bool) -> None:
        #: The cluster, when known (None: one the program joined with `dista.init`).
        self.cluster = cluster
        #: Whether it counts among the holders of the cluster the pools started.
        self.counted = counted
        self._released = False

    def release(self) -> None:
        """Let go (once); the last holder of the cluster the pools started stops it."""
        global _started, _holders
        with _lock:
            if self._released:
                return
            self._released = True
            if not self.counted:
                return
            _holders -= 1
            if _holders > 0 or _started is not self.cluster:
                return
            cluster, _started = _started, None
        if cluster is None:
            return
        if _cluster_api._cluster is cluster:
            _cluster_api.shutdown()  # also clears dista's own record of it
        else:
            cluster.shutdown()  # the program called dista.shutdown() already: idempotent


def acquire(address: str | None, cluster: Cluster | None, workers: int | None) -> Lease:
    """The cluster to run on: ``cluster``; else the one this process joined (``address``,
    if given, must be its address); else a new one (a local one with ``workers`` workers,
    or the one at ``address``), which its holders stop."""
    global _started, _holders
    with _lock:
        if cluster is not None:
            current = _context.current()
            if current is not cluster.context or cluster.context.session.closed:
                raise DistaError(f"{cluster!r} is not the cluster this process is joined to")
            counted = cluster is _started
            _holders += counted
            return Lease(cluster, counted)
        current = _context.current()
        if current is not None and not current.session.closed:
            if address is not None and parse_head(address) != current.address:
                joined = format_head(*current.address)
                raise DistaError(
                    f"this process is joined to the cluster at {joined}, not {address}: a "
                    "process joins one cluster at a time (dista.shutdown() leaves it)"
                )
            if _started is not None and _started.context is current:
                _holders += 1
                return Lease(_started, True)
            mine = _cluster_api._cluster
            return Lease(mine if mine is not None and mine.context is current else None, False)
        if workers is not None and workers < 1:
            raise ValueError(f"a local cluster needs at least one worker, not {workers}")
        started = _cluster_api.init(address, workers)
        _started, _holders = started, 1
        return Lease(started, True)
