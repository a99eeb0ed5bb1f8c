"""``dista head``: run a head, the scheduler and reference counter, until it stops.

Its settings and its address are checked before the loop starts (a bad one is one line and
exit 2); then it listens and prints where on stderr, where scripts read it, and when it
closes, why.
"""

from __future__ import annotations

import argparse
import sys

from .._net.contract import Loop
from .._net.latch import Latch
from .flags import bind_ok
from .process import run_role, settings_ok, tune_process

__all__ = ["cmd_head"]


def cmd_head(args: argparse.Namespace) -> int:
    """Run a head as ``args`` say; 0 once it has stopped, 2 for a bad setting."""
    from .._hosts.head import HeadHost, start_head

    if not settings_ok("head", args.liveness_timeout):
        return 2
    if args.recovery_grace < 0:
        print("dista head: --recovery-grace must be at least 0 seconds", file=sys.stderr)
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
        print(f"dista head listening on {host}:{port}", file=sys.stderr, flush=True)
        if head.tls is not None:  # its own line: scripts read the address from the one above
            print(f"dista head: mutual TLS ({head.tls.where})", file=sys.stderr, flush=True)
        return head.closed

    reason = run_role(args, start, lambda: heads[0].stop("stopped by a signal"))
    print(f"dista head: {reason}", file=sys.stderr)
    return 0
