"""The ``dista`` command: run a head or workers, ask a head questions, run a script.

Imports stay inside the subcommands so that a worker or head process starts fast.
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import dista_proto as dp

from .loop import Latch, Loop

T = TypeVar("T")

__all__ = ["main"]

DEFAULT_HEAD = "127.0.0.1:7420"


def _address(text: str) -> tuple[str, int]:
    from dista_runtime._address import parse_head

    try:
        return parse_head(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _die_with_parent(parent: int | None) -> None:
    """Linux: the kernel kills us when the process that started us dies, even by SIGKILL."""
    if parent is None:
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)  # the parent died before we could ask


def _tune_process() -> None:
    """Head and worker processes allocate many short-lived objects per task: collect the
    young generation less often, and keep what was imported out of every collection. (A
    shorter GIL switch interval for workers was tried: no gain measured, so not set.)"""
    import gc

    gc.freeze()
    gc.set_threshold(20_000, 20, 50)


def _run(args: argparse.Namespace, start: Callable[[Loop], Latch[T]], stop: Any = None) -> T:
    """Run a role on the loop ``--loop`` names (or ``DISTA_LOOP``, or the detected one)."""
    from .loops import run

    return run(start, stop, args.loop)


# -- head ------------------------------------------------------------------------------------


def _settings_ok(role: str, liveness: float | None = None) -> bool:
    """Every DISTA_* setting of recovery read now: a bad one is one clear line, at start."""
    from ._liveness import check_all, check_liveness

    try:
        check_all()
        if liveness is not None:
            check_liveness(liveness)
    except ValueError as e:
        print(f"dista {role}: {e}", file=sys.stderr)
        return False
    return True


def cmd_head(args: argparse.Namespace) -> int:
    from .head_host import HeadHost, start_head

    if not _settings_ok("head", args.liveness_timeout):
        return 2
    if args.recovery_grace < 0:
        print("dista head: --recovery-grace must be at least 0 seconds", file=sys.stderr)
        return 2
    if not _bind_ok("dista head", args.host):
        return 2
    _tune_process()
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

    reason = _run(args, start, lambda: heads[0].stop("stopped by a signal"))
    print(f"dista head: {reason}", file=sys.stderr)
    return 0


# -- worker ----------------------------------------------------------------------------------


def _import_all(modules: Sequence[str]) -> None:
    import importlib

    # As `python -m` does: modules in the current directory can be imported.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    for spec in modules:
        for name in filter(None, spec.split(",")):
            importlib.import_module(name)


def cmd_worker(args: argparse.Namespace) -> int:
    from ._supervise import EXIT_NO_HEAD, EXIT_STOPPED, signal_ready

    _die_with_parent(args.parent)
    if not _settings_ok("worker"):
        return 2
    if not _bind_ok("dista worker", args.host or _object_server_host(args.head[0])):
        return 2
    if args.processes > 1:
        return _worker_processes(args)
    if args.greenlets:
        _cooperate(args)
    import faulthandler

    faulthandler.enable(all_threads=False)  # a crash prints where, then the process dies
    if isinstance(sys.stdout, io.TextIOWrapper):  # tasks' prints show as they happen,
        sys.stdout.reconfigure(line_buffering=True)  # into a pipe or a log file too
    try:
        _import_all(args.imports)
    except Exception as e:
        print(f"dista worker: cannot import the task modules: {e!r}", file=sys.stderr)
        return 2
    from .loops import binding
    from .worker_host import WorkerHost, start_worker

    binding(args.loop)  # installed and complete, before anything starts
    _tune_process()
    host, port = args.head
    workers: list[WorkerHost] = []

    def start(loop: Loop) -> Latch[str]:
        worker = start_worker(loop, host, port, host=args.host, threads=args.threads)
        workers.append(worker)
        if args.ready_fd is not None:
            worker.ready.add_callback(ready)
        # SIGTERM (a pod shutting down, a supervisor, `kill`): hand over what we hold and
        # leave once the head says so; a second one leaves at once. Ctrl-C stays
        # KeyboardInterrupt: a person at the terminal wants it gone now.
        signal.signal(signal.SIGTERM, lambda *_: loop.call_soon_threadsafe(worker.drain))
        return worker.done

    def ready(joined: Latch[tuple[str, int]]) -> None:
        if not joined.failed():
            signal_ready(args.ready_fd)

    try:
        reason = _run(args, start)
    except ConnectionError as e:
        print(f"dista worker: {e}", file=sys.stderr)
        return EXIT_NO_HEAD
    except KeyboardInterrupt:
        return 130
    if args.parent is not None and reason.startswith("stopped by the head"):
        return EXIT_STOPPED  # its supervisor must not replace it
    if workers and workers[0].lost_head:
        print(f"dista worker: {reason}", file=sys.stderr)
        return EXIT_NO_HEAD
    return 0


def _cooperate(args: argparse.Namespace) -> None:
    """``--greenlets``: the binding (gevent's) patches this process before the task modules
    are imported, and its runners are then greenlets, not threads."""
    from .loops import binding

    args.loop = args.loop or "gevent"
    patch = getattr(binding(args.loop), "patch", None)
    if patch is None:
        raise SystemExit(f"dista worker: --greenlets needs --loop gevent, not {args.loop}")
    patch()


def _worker_processes(args: argparse.Namespace) -> int:
    """``--processes N``: N worker processes, each replaced when it dies, until a signal
    stops them all or they cannot start."""
    import threading

    from dista_runtime._address import format_head

    from ._liveness import drain_timeout
    from ._supervise import EXIT_NO_HEAD, EXIT_STOPPED, STOPPED_BY_HEAD, Death, Supervisor

    head = format_head(*args.head)
    command = [sys.executable, "-m", "dista_runtime.cli", "worker", "--head", head]
    command += ["--threads", str(args.threads), "--parent", str(os.getpid())]
    for module in args.imports:
        command += ["--import", module]
    if args.host:
        command += ["--host", args.host]
    if args.loop:
        command += ["--loop", args.loop]
    if args.greenlets:
        command.append("--greenlets")
    stopping: list[int] = []
    deaths: list[Death] = []
    done = threading.Event()

    def on_death(death: Death) -> None:
        deaths.append(death)
        stopped = any(d.code == EXIT_STOPPED for d in deaths)
        if stopping or done.is_set() or (stopped and death.code in (EXIT_STOPPED, EXIT_NO_HEAD)):
            return  # stopped on purpose (by a signal, or by the head): no news
        if death.restart_in is None:
            then = "not restarting"
        elif death.restart_in == 0:
            then = "restarting"
        else:
            then = f"restarting in {death.restart_in:g} s"
        print(f"dista worker: {death.description}; {then}", file=sys.stderr, flush=True)

    supervisor = Supervisor(
        command, args.processes, on_death=on_death, on_give_up=lambda _: done.set()
    )

    def stop(signum: int, frame: object) -> None:
        if stopping:
            # A second signal: the children leave now, drained or not.
            supervisor.send_signal(signal.SIGTERM)
        stopping.append(signum)
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    supervisor.start()
    while not done.wait(1.0):
        pass
    supervisor.stop_restarting()
    supervisor.send_signal(stopping[0] if stopping else signal.SIGTERM)
    # The children drain (their objects move to other workers): give them the time.
    supervisor.close(drain_timeout() + 5.0 if stopping else 5.0)  # then SIGKILL the rest
    if stopping:
        return 128 + stopping[0]
    if supervisor.failure == STOPPED_BY_HEAD:
        print(f"dista worker: the head at {head} stopped us", file=sys.stderr)
        return 0
    if deaths and deaths[-1].code == EXIT_NO_HEAD:
        print(f"dista worker: the head at {head} is gone; stopping", file=sys.stderr)
        return 0 if any(d.joined for d in deaths) else 1
    why = supervisor.failure
    print(f"dista worker: workers keep failing to start; stopping (last: {why})", file=sys.stderr)
    return 1


# -- observer commands ---------------------------------------------------------------------


def _ask(args: argparse.Namespace, request: dp.Status | dp.Timeline | dp.Stop) -> object:
    from .observer_host import ask

    host, port = args.head
    return _run(args, lambda loop: ask(loop, host, port, request, args.timeout))


def cmd_status(args: argparse.Namespace) -> int:
    import dista_proto as dp

    try:
        answer = _ask(args, dp.Status())
    except ConnectionError as e:
        print(f"dista status: {e}", file=sys.stderr)
        return 1
    assert isinstance(answer, dp.Status)
    print(answer.text)
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    import dista_proto as dp

    from ._trace import task_label

    try:
        _import_all(args.imports)  # their tasks get names instead of hashes
    except Exception as e:
        print(f"dista timeline: cannot import the task modules: {e!r}", file=sys.stderr)
        return 2
    try:
        answer = _ask(args, dp.Timeline())
    except ConnectionError as e:
        print(f"dista timeline: {e}", file=sys.stderr)
        return 1
    assert isinstance(answer, dp.Timeline)
    records = answer.records or ()
    if args.output:
        from ._trace import write_chrome_trace

        events = write_chrome_trace(records, args.output)
        print(
            f"wrote {len(records)} tasks ({events} trace events) to {args.output}; "
            "open it in https://ui.perfetto.dev or chrome://tracing"
        )
        return 0
    labels = {r.task_id: task_label(r.task_id) for r in records}
    width = max([18, *map(len, labels.values())])
    print(f"{'object':>18} {'task':<{width}} {'queued ms':>10} {'run ms':>9}  worker")
    for r in records:
        queued = (r.dispatched - r.submitted) / 1e6 if r.dispatched and r.submitted else 0.0
        ran = (r.ended - r.started) / 1e6 if r.ended and r.started else 0.0
        where = f"{r.address.host}:{r.address.port}"
        label = labels[r.task_id]
        print(f"{r.object_id:#18x} {label:<{width}} {queued:10.3f} {ran:9.3f}  {where}")
    print(f"{len(records)} finished tasks")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    import dista_proto as dp

    try:
        _ask(args, dp.Stop())
    except ConnectionError as e:
        print(f"dista stop: {e}", file=sys.stderr)
        return 1
    print(f"asked the head at {args.head[0]}:{args.head[1]} to stop")
    return 0


# -- run -------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    import runpy

    from . import _cluster, _context

    if not os.path.isfile(args.script):
        what = "is a directory" if os.path.isdir(args.script) else "no such file"
        print(f"dista run: {args.script}: {what}", file=sys.stderr)
        return 2

    def start() -> object:
        return _cluster.init(workers=args.workers, loop=args.loop)

    _context.auto_init = start
    sys.argv = [args.script, *args.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))
    try:
        runpy.run_path(args.script, run_name="__main__")
    except KeyboardInterrupt:
        print("dista run: interrupted; stopping the local cluster", file=sys.stderr)
        return 130
    except SystemExit:
        raise
    except BaseException:  # the script's own error: its traceback, as python would show it
        import traceback

        kind, error, tb = sys.exc_info()
        mine = tb
        while mine is not None and mine.tb_frame.f_code.co_filename != args.script:
            mine = mine.tb_next  # from the script's frame on, not dista's and runpy's
        traceback.print_exception(kind, error, mine or tb)
        return 1
    finally:
        _cluster.shutdown()
    return 0


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


def _tls_options(p: argparse.ArgumentParser, role: str, listens: bool = False) -> None:
    g = p.add_argument_group(
        "TLS",
        "mutual TLS on every connection (make the files with `dista certs DIR`); the "
        "DISTA_TLS_DIR, DISTA_TLS_CA, DISTA_TLS_CERT and DISTA_TLS_KEY variables do the same",
    )
    g.add_argument(
        "--tls-dir",
        metavar="DIR",
        help=f"use DIR/ca.pem and this role's DIR/{role}.pem and DIR/{role}.key",
    )
    g.add_argument("--tls-ca", metavar="PEM", help="the cluster's CA certificate (over --tls-dir)")
    g.add_argument("--tls-cert", metavar="PEM", help="this process's certificate (over --tls-dir)")
    g.add_argument("--tls-key", metavar="KEY", help="its private key (over --tls-dir)")
    if listens:
        g.add_argument(
            "--insecure",
            action="store_true",
            help="listen beyond loopback without TLS (refused otherwise): anyone who can "
            "reach the port can run code on the cluster",
        )
    p.set_defaults(tls_role=role)


def _apply_tls(args: argparse.Namespace) -> bool:
    """The TLS flags as DISTA_TLS_* (so that child processes share them), checked now: a
    missing file is one line and exit 2."""
    from ._limits import limits_from_args
    from ._tls import INSECURE_ENV, tls_for

    role = getattr(args, "tls_role", None)
    if role is None:
        return True
    for flag, name in (
        ("tls_dir", "DISTA_TLS_DIR"),
        ("tls_ca", "DISTA_TLS_CA"),
        ("tls_cert", "DISTA_TLS_CERT"),
        ("tls_key", "DISTA_TLS_KEY"),
    ):
        value = getattr(args, flag, None)
        if value:
            os.environ[name] = os.path.abspath(value)
    if getattr(args, "insecure", False):
        os.environ[INSECURE_ENV] = "1"
    try:
        tls_for(role)
        limits_from_args(args)  # checked now; set as DISTA_* for what starts from here
    except ValueError as e:
        print(f"dista {args.command}: {e}", file=sys.stderr)
        return False
    return True


def _object_server_host(head_host: str) -> str:
    """Where a worker's object server would listen without --host (`advertised_host`).
    (Not from worker_host: a --greenlets worker must not load it before gevent patches.)"""
    from ._address import advertised_host

    try:
        return advertised_host(head_host)
    except OSError:
        return "127.0.0.1"  # the head's name does not resolve: dialing it will say so


def _bind_ok(who: str, host: str) -> bool:
    """Beyond loopback only with TLS or --insecure (the role warns of that as it starts)."""
    from ._tls import check_bind, tls_for

    try:
        check_bind(who, host, tls_for(who.split()[-1]))
    except ValueError as e:
        print(e, file=sys.stderr)  # it names the role: "dista worker refuses to listen ..."
        return False
    return True


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

    from ._limits import add_limit_options

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
        default=dp.RECOVERY_GRACE_NS / 1e9,
        metavar="SECONDS",
        help="how long what a lost peer left behind waits for it to come back: a worker's "
        "stored objects (it may rejoin with them), a driver's tasks and objects (it may "
        "resume), and after a head restart, claims and holdings for each other (default "
        f"{dp.RECOVERY_GRACE_NS / 1e9:g})",
    )
    _tls_options(p, "head", listens=True)
    add_limit_options(p)
    p.add_argument(
        "--inline-cap",
        metavar="SIZE",
        help="inline results the head keeps for one driver; past it, that driver's results "
        "stay on workers (default: DISTA_HEAD_INLINE_CAP, else 256MiB; 0 turns it off)",
    )
    _loop_option(p)
    p.set_defaults(func=cmd_head)

    p = sub.add_parser(
        "worker",
        help="run workers for a head",
        description="Run worker processes that execute the tasks of the "
        "modules given with --import. SIGTERM drains a worker: what it stores moves to "
        "other workers and it leaves when the head says so (DISTA_DRAIN_TIMEOUT, 120 s, at "
        "most); a second SIGTERM or Ctrl-C leaves at once. A lost head is dialed again for "
        "DISTA_RECONNECT_TIMEOUT (60 s), and the worker rejoins with what it stores. Give "
        "workers the head's DISTA_LIVENESS_TIMEOUT when it is under about 5 s.",
    )
    _head_option(p)
    _import_option(p, "a module defining tasks (repeat, or separate with commas)")
    p.add_argument("--processes", type=int, default=1, help="worker processes (default 1)")
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
    p.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    p.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)
    _tls_options(p, "worker", listens=True)
    add_limit_options(p)
    _loop_option(p)
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
        _tls_options(p, "observer")
        _loop_option(p)
        p.set_defaults(func=func)

    p = sub.add_parser(
        "run",
        help="run a Python script on a fresh local cluster",
        description="Run SCRIPT with a local cluster (a head and workers on "
        "loopback) that starts on first use and stops when the script ends.",
    )
    p.add_argument("script", help="the Python script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    p.add_argument("--workers", type=int, help="worker processes (default: one per core)")
    _tls_options(p, "driver")
    _loop_option(p)
    p.set_defaults(func=cmd_run)

    from .certs import add_parser as add_certs

    add_certs(sub)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not _apply_tls(args):
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
        print(f"dista {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as e:  # a port in use, a file that cannot be written, ...
        print(f"dista {args.command}: {e}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
