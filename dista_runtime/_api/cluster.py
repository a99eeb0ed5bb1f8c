"""Joining a cluster from blocking code: `init`, `shutdown`, `local_pids`."""

from __future__ import annotations

import atexit
import os
import signal
import threading
from types import FrameType

from .._errors import DistaError
from .._hosts.join import Cluster, connect_blocking, connect_local
from .._hosts.liveness import check_all
from .._local.local_cluster import LocalCluster
from .._net.address import parse_head
from .._net.limits import inline_cap, limits_from_env, partial_cap
from .._session import context as _context
from .._tls.config import tls_for
from .._values import registry as _registry
from ..loops import backend, background, choose

__all__ = ["Cluster", "init", "local_pids", "shutdown"]


_cluster: Cluster | None = None


def init(
    address: str | None = None,
    workers: int | None = None,
    *,
    timeout: float = 30.0,
    loop: str | None = None,
    dashboard: bool = False,
) -> Cluster:
    """Connect this process to a cluster and return it (a context manager).

    With no ``address`` (and no ``DISTA_ADDRESS`` in the environment) start a local one: a
    head and ``workers`` worker processes (default: one per core) on loopback, torn down at
    exit (and on SIGTERM, unless the program handles SIGTERM itself); return once the
    workers have joined, or raise `DistaError` if they die on start. Workers that die later
    are replaced. Tasks registered before this call are known to workers by name; the rest
    travel by value. ``loop`` names the event loop Dista runs on in this process and the
    local workers (`dista_runtime.loops`: ``DISTA_LOOP``, else detected, else asyncio).
    ``dashboard=True`` starts ``dista dashboard`` for the cluster (a process of its own,
    stopped with it) and logs its URL, also ``cluster.dashboard_url``.
    """
    global _cluster
    if _cluster is not None and not _cluster.context.session.closed:
        raise DistaError("dista.init() was already called: call dista.shutdown() first")
    name = choose(loop)
    backend(name)  # installed and complete, before any process starts

    address = address or os.environ.get("DISTA_ADDRESS") or None
    tls_for("driver")  # missing TLS files (DISTA_TLS_DIR ...) raise here, saying which
    check_all()  # and a bad DISTA_DRIVER_INFLIGHT_BYTES (...), before anything starts
    local: LocalCluster | None = None
    if address is None:
        limits_from_env()  # a bad DISTA_MAX_CONNECTIONS (...) raises here, not in the head
        inline_cap()
        partial_cap()
        tls_for("head")  # and missing TLS files (DISTA_TLS_DIR ...) before workers start
        tls_for("worker")
        names, _ = _registry.snapshot()
        local = LocalCluster(workers or os.cpu_count() or 1, _registry.modules(names), loop=name)
    served = background(name)
    try:
        if local is not None:
            listener = local.take_listener()
            context = connect_local(served, listener, local.address, timeout, local)
        else:
            assert address is not None
            context = connect_blocking(served, *parse_head(address), timeout)
    except BaseException:
        if local is not None:
            local.close(0)
        raise
    _context.install(context)
    _cluster = Cluster(context, local, served)
    if dashboard:
        _start_dashboard(_cluster)
    if local is not None:
        # Workers that keep dying on start (a task module they cannot import): fail the
        # waits instead of hanging.
        local.watch(context.session.close)
        _handle_sigterm()
    return _cluster


def _start_dashboard(cluster: Cluster) -> None:
    from .dashboard import Dashboard

    try:
        board = Dashboard(cluster.address)
    except BaseException:
        cluster.shutdown()
        raise
    cluster.dashboard_url = board.url
    cluster.context.close.insert(0, board.close)  # first: before the head goes


def shutdown() -> None:
    """Disconnect; a local cluster stops with its workers. Safe to call twice."""
    global _cluster
    if _cluster is not None:
        cluster, _cluster = _cluster, None
        cluster.shutdown()
    _restore_sigterm()


#: How long a SIGTERM'd driver gives its local cluster to shut down before killing it.
_SIGTERM_GRACE_S = 5.0


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """SIGTERM to a driver with a local cluster: shut it down (workers, socket directory),
    then die of the signal as the default action would have (status 143 in a shell)."""
    global _cluster
    cluster, _cluster = _cluster, None
    if cluster is None or cluster.background is None:
        _die_of(signum)
    else:
        # Where the loop lets it wait: a monkey-patched gevent process runs this handler
        # on its hub, which may not block (BlockingSwitchOutError).
        cluster.background.call_blocking(lambda: _shut_down(cluster, signum))


def _shut_down(cluster: Cluster, signum: int) -> None:
    local = cluster.local
    # On another thread, bounded: this one may hold a lock the shutdown needs.
    done = threading.Thread(target=cluster.shutdown, name="dista-sigterm", daemon=True)
    done.start()
    done.join(_SIGTERM_GRACE_S)
    if local is not None:
        local.close(0)  # kills what is left and removes the socket directory
    _die_of(signum)


def _die_of(signum: int) -> None:
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _handle_sigterm() -> None:
    """Install `_on_sigterm`, only where SIGTERM has its default action (an app's own
    handler stays) and only from the main thread (where Python allows it)."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        pass


def _restore_sigterm() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (ValueError, OSError):
        pass


atexit.register(shutdown)


def local_pids() -> list[int]:
    return _cluster.pids() if _cluster is not None else []
