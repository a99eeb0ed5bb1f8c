"""``dista head``: run a head, the scheduler and reference counter, until it stops.

Its settings and its address are checked before the loop starts (a bad one is one line and
exit 2); then it listens and logs where (``dista.head``, at INFO: scripts read the address
from that line on stderr), and when it closes, why.
"""

from __future__ import annotations

import argparse
import logging

import dista_proto as dp

from .._hosts.liveness import RECOVERY_ENV, seconds_env
from .._net.contract import Loop
from .._net.latch import Latch
from .flags import bind_ok
from .process import run_role, settings_ok, tune_process

__all__ = ["cmd_head"]

_log = logging.getLogger("dista.head")


def cmd_head(args: argparse.Namespace) -> int:
    """Run a head as ``args`` say; 0 once it has stopped, 2 for a bad setting."""
    from .._hosts.head import HeadHost, start_head

    if not settings_ok("head", args.liveness_timeout):
        return 2
    if args.recovery_grace is None:
        try:
            args.recovery_grace = seconds_env(RECOVERY_ENV, dp.RECOVERY_GRACE_NS / 1e9)
        except ValueError as e:
            _log.error("dista head: %s", e)
            return 2
    if args.recovery_grace < 0:
        _log.error("dista head: --recovery-grace must be at least 0 seconds")
        return 2
    if args.on_sigterm not in ("stop", "restart"):  # from DISTA_HEAD_ON_SIGTERM
        _log.error(
            "dista head: DISTA_HEAD_ON_SIGTERM must be stop or restart, not %r", args.on_sigterm
        )
        return 2
    if not bind_ok("dista head", args.host):
        return 2
    tune_process()
    heads: list[HeadHost] = []

    def start(loop: Loop) -> Latch[str]:
        head = start_head(
            loop,
            args.host,
            args.port,
            worker_slots=args.worker_slots,
            prefetch=args.prefetch,
            no_worker_grace=args.no_worker_grace,
            liveness=args.liveness_timeout,
            recovery_grace=args.recovery_grace,
        )
        heads.append(head)
        host, port = head.address
        _log.info("dista head listening on %s:%s", host, port)
        if head.tls is not None:  # its own line: scripts read the address from the one above
            _log.info("dista head: mutual TLS (%s)", head.tls.where)
        return head.closed

    def leave() -> None:
        _log.info("dista head: SIGTERM: leaving; the cluster runs on for the next head")
        heads[0].leave("left on SIGTERM (--on-sigterm restart)")

    reason = run_role(
        args,
        start,
        lambda: heads[0].stop("stopped by a signal"),
        leave if args.on_sigterm == "restart" else None,
    )
    _log.info("dista head: %s", reason)
    return 0
