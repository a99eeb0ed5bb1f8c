"""The ``dista`` command: run a head or workers, ask a head questions, run a script.

This module holds the entry point (`main`: the ``dista`` console script, and ``python -m
dista_runtime.cli``, which ``dista worker --processes`` runs for each child) and the parser
with every help text. Each command's body is a module of its own: `_cli_head`,
`_cli_worker`, `_cli_observe` (status, timeline, stop), `_cli_run` and `certs`; the TLS and
resource-bound flags several commands share are in `_cli_tls`, and how a command's process
runs (its loop, its task modules, its settings) in `_cli_process`.

Imports stay inside the subcommands so that a worker or head process starts fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence

from ._cli.dashboard import DEFAULT_PORT as DASHBOARD_PORT
from ._cli.dashboard import cmd_dashboard
from ._cli.flags import add_log_options, add_tls_options, apply_logs, apply_tls, report
from ._cli.head import cmd_head
from ._cli.observe import cmd_status, cmd_stop, cmd_timeline
from ._cli.run import cmd_run
from ._cli.worker import cmd_worker, log_role

__all__ = ["main"]

DEFAULT_HEAD = "127.0.0.1:7420"


def _address(text: str) -> tuple[str, int]:
    from dista_runtime._net.address import parse_head

    try:
        return parse_head(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return f"dista {version('dista')}"
    except PackageNotFoundError:
        return "dista (version unknown: not installed as a package)"


def _head_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--head",
        type=_address,
        default=DEFAULT_HEAD,
        help=f"the head's HOST:PORT, or unix:PATH for one on this machine (default {DEFAULT_HEAD})",
    )


def _import_option(p: argparse.ArgumentParser, text: str) -> None:
    p.add_argument(
        "--import", dest="imports", action="append", default=[], metavar="MODULE", help=text
    )


def _loop_option(p: argparse.ArgumentParser) -> None:
    from .loops import LOOPS

    p.add_argument(
        "--loop",
        choices=LOOPS,
        default=None,
        help="the event loop Dista runs on (default: DISTA_LOOP, else what the process "
        "runs, else asyncio)",
    )


class _VersionAction(argparse.Action):
    """``--version``, looked up only when asked: importlib.metadata costs every worker
    process a few MiB and milliseconds at start."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(_version())
        parser.exit()


def parser() -> argparse.ArgumentParser:
    import dista_proto as dp  # the head's defaults, for the help

    from ._net.limits import add_limit_options

    top = argparse.ArgumentParser(
        prog="dista",
        description="Dista: a light, typed distributed task engine. "
        "Start a head, point workers at it, then run drivers (dista.init(address=...)).",
    )
    top.add_argument(
        "--version", action=_VersionAction, nargs=0, help="print the version and exit"
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "head",
        help="run a head (loopback by default)",
        description="Run a head: the scheduler and reference counter.",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)",
    )
    p.add_argument("--port", type=int, default=7420, help="port to listen on (default 7420)")
    p.add_argument(
        "--worker-slots",
        type=int,
        default=dp.WORKER_SLOTS,
        help=f"tasks each worker gets at once (default {dp.WORKER_SLOTS})",
    )
    p.add_argument(
        "--prefetch",
        type=int,
        default=dp.PREFETCH,
        help="extra tasks a worker may get at once when they are known to take under 0.5 ms "
        f"(default {dp.PREFETCH}; 0 turns prefetching off)",
    )
    p.add_argument(
        "--no-worker-grace",
        type=float,
        default=dp.NO_WORKER_GRACE_NS / 1e9,
        metavar="SECONDS",
        help="how long a task waits for a worker that can run it (one that imports its "
        f"driver's task modules) before it fails saying so (default {dp.NO_WORKER_GRACE_NS / 1e9:g})",
    )
    p.add_argument(
        "--liveness-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a worker not heard from for this long (stopped, hung, cut off) is treated as "
        "lost: its tasks run elsewhere, and what it stored waits for it to rejoin "
        "(default: DISTA_LIVENESS_TIMEOUT, else 30; 0 turns this off; at least 2; workers "
        "beat every second, so below about 5 s give them DISTA_LIVENESS_TIMEOUT too)",
    )
    p.add_argument(
        "--recovery-grace",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long what a lost peer left behind waits for it to come back: a worker's "
        "stored objects (it may rejoin with them), a driver's tasks and objects (it may "
        "resume), and after a head restart, claims and holdings for each other (default: "
        f"DISTA_RECOVERY_GRACE, else {dp.RECOVERY_GRACE_NS / 1e9:g})",
    )
    p.add_argument(
        "--on-sigterm",
        choices=("stop", "restart"),
        default=os.environ.get("DISTA_HEAD_ON_SIGTERM", "stop"),
        help="what SIGTERM means: 'stop' the cluster (workers exit, actors end: as Ctrl-C "
        "and 'dista stop' do), or 'restart': this head leaves and the cluster runs on, "
        "drivers and workers resuming with the next head on the same address (an "
        "orchestrator moving the head's pod or unit). Default: DISTA_HEAD_ON_SIGTERM, "
        "else stop",
    )
    add_tls_options(p, "head", listens=True)
    add_limit_options(p)
    p.add_argument(
        "--inline-cap",
        metavar="SIZE",
        help="inline results the head keeps for one driver; past it, that driver's results "
        "stay on workers (default: DISTA_HEAD_INLINE_CAP, else 256MiB; 0 turns it off)",
    )
    p.add_argument(
        "--partial-cap",
        metavar="SIZE",
        help="large frames (1 MiB or more) all connections may hold partly received; a new "
        "one past it is refused (default: DISTA_HEAD_PARTIAL_CAP, else a quarter of memory, at least 2GiB; 0 turns it off)",
    )
    _loop_option(p)
    add_log_options(p, "head")
    p.set_defaults(func=cmd_head)

    p = sub.add_parser(
        "worker",
        help="run workers for a head",
        description="Run worker processes that execute the tasks of the "
        "modules given with --import. SIGTERM drains a worker: what it stores moves to "
        "other workers and it leaves when the head says so (DISTA_DRAIN_TIMEOUT, 120 s, at "
        "most); a second SIGTERM or Ctrl-C leaves at once. Every worker process is supervised: "
        "one that crashes (SIGSEGV, the OOM killer) is logged and replaced. A lost head is "
        "dialed again for "
        "DISTA_RECONNECT_TIMEOUT (60 s), and the worker rejoins with what it stores; a head "
        "not there yet is waited for (--wait-for-head). Give "
        "workers the head's DISTA_LIVENESS_TIMEOUT when it is under about 5 s.",
    )
    _head_option(p)
    _import_option(p, "a module defining tasks (repeat, or separate with commas)")
    p.add_argument("--processes", type=int, default=1, help="worker processes (default 1)")
    p.add_argument(
        "--no-supervise",
        action="store_true",
        help="run the worker in this process, not as a child this one replaces when it "
        "crashes (for a process manager that restarts it itself). Supervised, this "
        "process's pid is the supervisor's: SIGTERM to it drains the worker, SIGINT stops "
        "it, SIGKILL ends both; a signal that kills the worker child is a crash, logged "
        "and replaced",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads (with --greenlets: greenlets) for user code per process (default 1; "
        "the head gives each worker --worker-slots tasks at once)",
    )
    p.add_argument(
        "--host",
        help="address for this worker's object server "
        "(default: the interface that reaches the head)",
    )
    p.add_argument(
        "--greenlets",
        action="store_true",
        help="run tasks in greenlets, for cooperative code (implies --loop gevent: the "
        "worker monkey-patches itself first); without it, gevent's worker runs them in "
        "threads, for CPU-bound code",
    )
    p.add_argument(
        "--accept-by-value",
        action="store_true",
        help="also run by-value code (functions and actor classes defined in a script or "
        "notebook, sent pickled) from drivers whose modules differ from this worker's; "
        "without it, only drivers importing the same modules may run such code here "
        "(default: DISTA_ACCEPT_BY_VALUE=1 turns it on)",
    )
    p.add_argument(
        "--wait-for-head",
        type=float,
        metavar="SECONDS",
        help="started before its head, keep trying to reach it for this long (nothing "
        "listens there yet, its name does not resolve yet, ...), logging that it waits, then "
        "exit with code 69; a TLS or certificate failure is not waited for (default: "
        "DISTA_WAIT_FOR_HEAD, else 60; 0 fails at once)",
    )
    p.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    p.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    # A supervisor's replacement for a worker its head stopped: no head is what it expects.
    p.add_argument("--after-stop", action="store_true", help=argparse.SUPPRESS)
    add_tls_options(p, "worker", listens=True)
    add_limit_options(p)
    _loop_option(p)
    add_log_options(p, log_role)
    p.set_defaults(func=cmd_worker)

    for name, func, text in [
        ("status", cmd_status, "print what the head is doing"),
        ("timeline", cmd_timeline, "print or save every driver's finished tasks"),
        ("stop", cmd_stop, "stop the head and its workers"),
    ]:
        p = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        _head_option(p)
        p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait (default 10)")
        if name == "timeline":
            p.add_argument(
                "--output",
                "-o",
                metavar="trace.json",
                help="write a Chrome trace (Perfetto, chrome://tracing) instead",
            )
            _import_option(
                p,
                "a module defining tasks, to name them module.function "
                "(repeat, or separate with commas; unnamed tasks show their hash)",
            )
        add_tls_options(p, "observer")
        _loop_option(p)
        p.set_defaults(func=func)

    p = sub.add_parser(
        "dashboard",
        help="serve a live page of the cluster, and its Prometheus metrics",
        description="Serve a live page of the cluster (workers, the task stream, queues and "
        "why they wait, objects, actors, each driver's progress) and /metrics for "
        "Prometheus, watching the head as an observer. Plain HTTP on loopback; with TLS "
        "(--tls-dir), HTTPS to clients with the cluster's certificates.",
    )
    _head_option(p)
    p.add_argument(
        "--port", type=int, default=DASHBOARD_PORT, help=f"default {DASHBOARD_PORT}; 0: any free"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--parent", type=int, help=argparse.SUPPRESS)  # exit with this process
    add_tls_options(p, "observer")
    add_log_options(p, "dashboard")
    _loop_option(p)
    p.set_defaults(func=cmd_dashboard)

    p = sub.add_parser(
        "run",
        help="run a Python script on a fresh local cluster",
        description="Run SCRIPT with a local cluster (a head and workers on "
        "loopback) that starts on first use and stops when the script ends.",
    )
    p.add_argument("script", help="the Python script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    p.add_argument("--workers", type=int, help="worker processes (default: one per core)")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress line while a get waits for many results (DISTA_PROGRESS=0 does "
        "the same)",
    )
    add_tls_options(p, "driver")
    _loop_option(p)
    add_log_options(p, "driver pid {pid}")
    p.set_defaults(func=cmd_run)

    from ._tls.certs import add_parser as add_certs

    add_certs(sub)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not apply_logs(args) or not apply_tls(args):
        return 2
    port = getattr(args, "port", None)
    if port is not None and not 0 <= port <= 65535:
        # Checked before anything starts: the bind would raise OverflowError, a traceback.
        report(args, f"dista {args.command}: --port must be from 0 to 65535, not {port}")
        return 2
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # here, so that a closed pipe is caught below
    except BrokenPipeError:
        # A reader that stopped early (`dista status | head -1`): quiet, as a shell tool is.
        # Python would report the failed flush of stdout at exit: point it at /dev/null.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt:
        report(args, f"dista {args.command}: interrupted", logging.WARNING)
        return 130
    except OSError as e:  # a port in use, a file that cannot be written, ...
        report(args, f"dista {args.command}: {e}")
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
