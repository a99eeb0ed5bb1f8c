"""``dista dashboard``: a live page of the cluster, and its Prometheus metrics.

An observer like ``dista status``, kept open: it asks the head for a snapshot once a second
(`dista_runtime._dashboard.watch`) and serves the page (`serve`) on ``--host:--port``. It
binds loopback unless the cluster has TLS: then it serves HTTPS with the observer's
certificate and takes only clients showing one of the cluster's (mutual TLS, as every other
link of a TLS cluster), and may bind any address. The URL is the first line on stdout,
where a script (or ``dista.init(dashboard=True)``) reads it; the process runs until SIGINT
or SIGTERM.
"""

from __future__ import annotations

import argparse
import logging

from .._api.dashboard import DEFAULT_PORT
from .._net.address import format_head
from .._net.contract import Loop
from .._net.latch import Latch
from .flags import report
from .process import run_role

__all__ = ["DEFAULT_PORT", "cmd_dashboard"]

_log = logging.getLogger("dista.dashboard")


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Serve the dashboard of the head at ``--head`` until stopped."""
    from .._dashboard.board import Board
    from .._dashboard.server import serve
    from .._dashboard.watch import Watch
    from .._tls.config import is_loopback, tls_for
    from .process import die_with_parent

    die_with_parent(args.parent)  # (started by `dista.init(dashboard=True)`)

    try:
        tls = tls_for("observer")
    except ValueError as e:
        report(args, f"dista dashboard: {e}")
        return 2
    if tls is None and not is_loopback(args.host):
        report(
            args,
            f"dista dashboard: refusing to serve plain HTTP on {args.host}: anyone who "
            "reaches it would see the cluster. Bind 127.0.0.1 (the default) and forward "
            "the port, or give the cluster TLS (--tls-dir) to serve HTTPS to its "
            "certificate holders",
        )
        return 2
    board = Board()
    try:
        server = serve(board, args.host, args.port, tls.server if tls else None)
    except (OSError, OverflowError) as e:  # (OverflowError: a port past 65535)
        report(args, f"dista dashboard: cannot listen on {args.host}:{args.port}: {e}")
        return 1
    head_host, head_port = args.head
    where = format_head(head_host, head_port)
    # The URL on stdout, where a script (`dista.init(dashboard=True)`) reads it; the log too.
    print(f"dista dashboard: {server.url} (the head at {where})", flush=True)
    _log.info("dista dashboard: serving %s for the head at %s", server.url, where)
    if tls is not None:
        _log.info("HTTPS with %s; clients show a certificate of the cluster's CA", tls.where)
    watches: list[Watch] = []
    stopped: Latch[int] = Latch()

    def start(loop: Loop) -> Latch[int]:
        watch = Watch(loop, head_host, head_port, board)
        watches.append(watch)
        watch.start()
        return stopped

    def stop() -> None:
        for watch in watches:
            watch.close()
        if not stopped.done():
            stopped.set(0)

    try:
        return run_role(args, start, stop)
    finally:
        server.close()
