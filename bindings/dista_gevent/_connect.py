"""Joining a cluster from gevent code: ``with dista_gevent.connect("HOST:PORT"):``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from dista_runtime import Cluster
from dista_runtime.binding import joining_on

from ._run import background

__all__ = ["connect"]


@contextmanager
def connect(address: str | None = None, *, timeout: float = 10.0) -> Iterator[Cluster]:
    """``with dista_gevent.connect("HOST:PORT") as cluster:`` join the head there as this
    process's driver; ``address`` is what `dista.init` takes (None: ``DISTA_ADDRESS``).

    In a monkey-patched process the driver runs on the caller's hub and a blocking
    ``ref.get()`` (`dista.get`, `wait`, `as_completed`) suspends only its greenlet; in an
    unpatched one it runs on a hub of its own, in a thread.
    """
    with joining_on(background(), address, timeout) as cluster:
        yield cluster
