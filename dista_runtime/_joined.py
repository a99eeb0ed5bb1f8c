"""The cluster a process is joined to, as `dista.init` and the bindings' ``connect`` give it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from . import _context
from ._address import format_head

if TYPE_CHECKING:
    from ._local import LocalCluster

__all__ = ["Cluster"]


class Cluster:
    """What `init` returns: the connection (and the local cluster, if it started one)."""

    def __init__(self, context: _context.Context, local: LocalCluster | None) -> None:
        self.context = context
        self.local = local

    @property
    def address(self) -> str:
        return format_head(*self.context.address)

    def pids(self) -> list[int]:
        """The local workers' process IDs (the head runs in this process; empty when joined
        to a cluster)."""
        return self.local.pids() if self.local is not None else []

    def shutdown(self) -> None:
        if self.local is not None:
            # First: the head stops its workers as the driver leaves; none may be replaced.
            self.local.begin_close()
        for close in self.context.close:
            close()
        self.context.close.clear()
        self.context.session.close("shut down")
        _context.clear(self.context)
        if self.local is not None:
            self.local.close()
            self.local = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        kind = f"local, {len(self.pids())} workers" if self.local else "remote"
        return f"<dista Cluster {self.address} ({kind})>"
