"""``dista worker``: run a supervised worker process, or ``--processes N`` of them.

One worker imports the task modules, joins its head and runs tasks until the head stops
it, SIGTERM drains it, or the head stays lost. ``dista worker`` itself runs none: it starts
one copy of the one-worker command (``python -m dista_runtime.cli worker --parent PID
...``), or N with ``--processes N``, under a `Supervisor` that replaces the ones that crash
(a segfault in a C extension, the kernel's OOM killer), and turns how they ended into its
own exit code. The exit codes (`EXIT_NO_HEAD`, `EXIT_STOPPED`) are how a child tells its
supervisor why it left. ``--no-supervise`` runs the worker in this process (for a process
manager that restarts it itself).

A worker started before its head waits for it (``--wait-for-head SECONDS``, else
``DISTA_WAIT_FOR_HEAD``, else 60 s; `dista_runtime._hosts.wait`): its supervisor passes the
time on to each child, and children started with none (a local cluster's, whose head
listens before they start) do not wait. A replacement started after the head stopped a
worker does not wait either: that head is likely gone on purpose, and the supervisor learns
so at once (`EXIT_NO_HEAD` then means the head stopped its workers).

Which pid gets which signal: the pid of ``dista worker`` is the supervisor's. SIGTERM there
drains the worker (forwarded) and exits with the worker's code, as before; SIGINT (Ctrl-C)
stops it; SIGKILL ends both (a child dies with its supervisor: a lost worker, not
replaced). A signal to the worker child itself (the pid its tasks see as ``os.getpid()``)
is a crash, and the supervisor replaces it.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Final

from .._local.supervise import Death, signal_ready
from .._net.contract import Loop
from .._net.latch import Latch
from .flags import bind_ok, object_server_host
from .process import die_with_parent, import_tasks, run_role, settings_ok, tune_process

if TYPE_CHECKING:
    from .._hosts.wait import Patience

__all__ = ["cmd_worker", "log_role"]

_log = logging.getLogger("dista.worker")
#: What the supervisor of worker processes says (`_say_death`, why it stops).
_supervisor_log = logging.getLogger("dista.supervisor")


def log_role(args: argparse.Namespace) -> str:
    """Who this ``dista worker`` process is in its log lines: the supervisor of worker
    processes (``--processes N``, or one supervised worker), or a worker itself."""
    if args.processes > 1 or (args.parent is None and not args.no_supervise):
        return "supervisor pid {pid}"
    return "worker pid {pid}"


def cmd_worker(args: argparse.Namespace) -> int:
    """Run the workers ``args`` ask for; the exit code says how they ended."""
    from .._local.supervise import EXIT_NO_HEAD, EXIT_STOPPED

    die_with_parent(args.parent)
    if not settings_ok("worker"):
        return 2
    try:
        args.wait_for_head = _wait_for_head(args)
    except ValueError as e:
        _log.error("dista worker: %s", e)
        return 2
    if not bind_ok("dista worker", args.host or object_server_host(args.head[0])):
        return 2
    if args.processes > 1:
        return _worker_processes(args)
    if args.parent is None and not args.no_supervise:
        return _lone_worker(args)
    if args.greenlets:
        _cooperate(args)
    import faulthandler

    faulthandler.enable(all_threads=False)  # a crash prints where, then the process dies
    if isinstance(sys.stdout, io.TextIOWrapper):  # tasks' prints show as they happen,
        sys.stdout.reconfigure(line_buffering=True)  # into a pipe or a log file too
    try:
        import_tasks(args.imports)
    except Exception as e:
        _log.error("dista worker: cannot import the task modules: %r", e)
        return 2
    from .._hosts.wait import Patience
    from .._hosts.worker import WorkerHost, start_worker
    from .._net.address import format_head
    from ..loops import backend

    backend(args.loop)  # installed and complete, before anything starts
    tune_process()
    host, port = args.head
    workers: list[WorkerHost] = []
    patience = Patience(format_head(host, port), args.wait_for_head)
    if args.wait_for_head > 0 and args.host is None:
        # Where its object server listens depends on the route to the head: its name must
        # resolve first (a Kubernetes service's may not yet).
        try:
            why = _resolve_head(host, patience)
        except _Stopped:
            return 0
        if why:
            _log.error("dista worker: %s", why)
            return EXIT_NO_HEAD

    def start(loop: Loop) -> Latch[str]:
        worker = start_worker(
            loop,
            host,
            port,
            host=args.host,
            threads=args.threads,
            accept_by_value=args.accept_by_value or None,  # None: DISTA_ACCEPT_BY_VALUE
            patience=patience if args.wait_for_head > 0 else None,
        )
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
        reason = run_role(args, start)
    except ConnectionError as e:
        # A replacement for a worker its head stopped finds no head when the head stopped
        # on purpose (`dista stop`): its supervisor says so in one line, not each child.
        _log.log(logging.DEBUG if args.after_stop else logging.ERROR, "dista worker: %s", e)
        if workers and workers[0].stopped_early:
            return 0  # SIGTERM while it waited for its head: stopped as asked
        return EXIT_NO_HEAD
    except KeyboardInterrupt:
        return 130
    if args.parent is not None and reason.startswith("stopped by the head"):
        return EXIT_STOPPED  # its supervisor must not replace it
    if workers and workers[0].lost_head:
        _log.error("dista worker: %s", reason)
        return EXIT_NO_HEAD
    return 0


def _wait_for_head(args: argparse.Namespace) -> float:
    """How long this worker waits for a head not there yet: ``--wait-for-head``, else (not
    a supervised child) ``DISTA_WAIT_FOR_HEAD``, else 60 s; a child started with none (a
    local cluster's: its head listens before it starts) does not wait."""
    from .._hosts.wait import wait_for_head_s

    if args.wait_for_head is not None:
        seconds = float(args.wait_for_head)
    elif args.parent is not None:
        return 0.0
    else:
        seconds = wait_for_head_s()
    if not seconds >= 0:  # NaN too
        raise ValueError(f"--wait-for-head must be at least 0 seconds, not {seconds:g}")
    return seconds


class _Stopped(Exception):
    """SIGTERM while the worker waited for its head's name to resolve."""


def _resolve_head(host: str, patience: Patience) -> str:
    """`resolve_head`, with SIGTERM stopping it at once (`_Stopped`), before the worker's
    loop has its own handler: '' once the name resolves, else why it gave up."""
    from .._hosts.wait import resolve_head

    def stop(signum: int, frame: object) -> None:
        raise _Stopped

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        return resolve_head(host, patience)
    except _Stopped:
        where = patience.where
        _log.info("dista worker: stopped by a signal before joining the head at %s", where)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _cooperate(args: argparse.Namespace) -> None:
    """``--greenlets``: the binding (gevent's) patches this process before the task modules
    are imported, and its runners are then greenlets, not threads."""
    from ..loops import backend

    args.loop = args.loop or "gevent"
    patch = getattr(backend(args.loop), "patch", None)
    if patch is None:
        _log.error("dista worker: --greenlets needs --loop gevent, not %s", args.loop)
        raise SystemExit(1)
    patch()


def _worker_processes(args: argparse.Namespace) -> int:
    """``--processes N``: N worker processes, each replaced when it dies, until a signal
    stops them all or they cannot start."""
    import threading

    from dista_runtime._net.address import format_head

    from .._hosts.liveness import drain_timeout
    from .._hosts.wait import WAIT_FLAG
    from .._local.supervise import EXIT_NO_HEAD, EXIT_STOPPED, STOPPED_BY_HEAD, Supervisor

    head = format_head(*args.head)
    command = _child_command(args)
    stopping: list[int] = []
    deaths: list[Death] = []
    done = threading.Event()

    def on_death(death: Death) -> None:
        deaths.append(death)
        stopped = any(d.code == EXIT_STOPPED for d in deaths)
        if stopping or done.is_set() or (stopped and death.code in (EXIT_STOPPED, EXIT_NO_HEAD)):
            return  # stopped on purpose (by a signal, or by the head): no news
        _say_death(death)

    supervisor = Supervisor(
        command,
        args.processes,
        on_death=on_death,
        on_give_up=lambda _: done.set(),
        after_stop=_NO_WAIT,
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
        _supervisor_log.info("dista worker: the head at %s stopped us", head)
        return 0
    if deaths and deaths[-1].code == EXIT_NO_HEAD:
        if any(d.joined for d in deaths):
            _supervisor_log.warning("dista worker: the head at %s is gone; stopping", head)
            return 0
        waited = f" in {args.wait_for_head:g} s ({WAIT_FLAG})" if args.wait_for_head else ""
        _supervisor_log.error("dista worker: no head at %s%s; stopping", head, waited)
        return 1
    why = supervisor.failure
    _supervisor_log.error("dista worker: workers keep failing to start; stopping (last: %s)", why)
    return 1


def _child_command(args: argparse.Namespace) -> list[str]:
    """The one-worker command a supervisor runs (TLS and limit flags travel as DISTA_*
    variables, which `apply_tls` set)."""
    from dista_runtime._net.address import format_head

    command = [sys.executable, "-m", "dista_runtime.cli", "worker"]
    command += ["--head", format_head(*args.head)]
    command += ["--threads", str(args.threads), "--parent", str(os.getpid())]
    command += ["--wait-for-head", str(args.wait_for_head)]
    for module in args.imports:
        command += ["--import", module]
    if args.host:
        command += ["--host", args.host]
    if args.loop:
        command += ["--loop", args.loop]
    if args.greenlets:
        command.append("--greenlets")
    if args.accept_by_value:
        command.append("--accept-by-value")
    return command


def _say_death(death: Death) -> None:
    """One line in this process's log: how a worker child died, and what happens next."""
    if death.restart_in is None:
        then = "not restarting"
    elif death.restart_in == 0:
        then = "restarting"
    else:
        then = f"restarting in {death.restart_in:g} s"
    _supervisor_log.warning("dista worker: %s; %s", death.description, then)


def _lone_worker(args: argparse.Namespace) -> int:
    """A plain ``dista worker``: one worker child, replaced after a crash. What users saw
    of an unsupervised worker stays: its own output (inherited), SIGTERM drains it, Ctrl-C
    stops it, and this process exits with the code the worker would have (a worker that
    cannot start, or cannot reach its head, is not started again: its code is ours)."""
    import threading

    from .._hosts.liveness import drain_timeout
    from .._local.supervise import EXIT_STOPPED, STOPPED_BY_HEAD, Supervisor

    deaths: list[Death] = []
    stopping: list[int] = []
    done = threading.Event()
    told_ready: list[int] = []

    def on_death(death: Death) -> None:
        deaths.append(death)
        # A crash is news; a worker that chose to leave (its code is ours), one a signal
        # of ours stopped, or one the head stopped (it is replaced quietly) is not.
        if not stopping and death.restart_in is not None and death.code != EXIT_STOPPED:
            _say_death(death)

    def on_join(pid: int) -> None:
        if args.ready_fd is not None and not told_ready:
            told_ready.append(pid)
            signal_ready(args.ready_fd)

    supervisor = Supervisor(
        _child_command(args),
        1,
        on_death=on_death,
        on_give_up=lambda _: done.set(),
        on_join=on_join,
        start_failures=1,  # a worker that cannot start says why itself: no restart loop
        final_codes=_LEFT_ON_PURPOSE,
        after_stop=_NO_WAIT,
        name="dista-worker-supervise",
    )

    def stop(signum: int, frame: object) -> None:
        # Forwarded: the child drains on SIGTERM (a second one: it leaves at once) and
        # stops on SIGINT, then exits with the code we take as ours.
        stopping.append(signum)
        supervisor.stop_restarting()
        supervisor.send_signal(signum)
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    supervisor.start()
    while not done.wait(1.0):
        pass
    # Stopped by a signal, the child drains (its objects move to other workers): give it
    # the time. Else it has exited already.
    supervisor.close(drain_timeout() + 5.0 if stopping else 5.0)
    if supervisor.failure == STOPPED_BY_HEAD or not deaths:
        return 0
    code = deaths[-1].code
    if code == EXIT_STOPPED:
        return 0  # the head stopped it: an unsupervised worker's 0
    return 128 - code if code < 0 else code


#: Exit codes with which a worker that had joined chose to leave, so that a plain ``dista
#: worker`` leaves with it: drained (0), its head lost for good (`EXIT_NO_HEAD`, 69), an
#: error it reported (1, 2), Ctrl-C (130). Any other end (a signal, a crash) is replaced.
_LEFT_ON_PURPOSE: Final = frozenset({0, 1, 2, 69, 130})
#: What a replacement started after the head stopped a worker is given: no wait for a head
#: that is likely gone on purpose (its supervisor then stops at once, saying so; the child
#: says nothing, ``--after-stop``). A later ``--wait-for-head`` wins over the child
#: command's first.
_NO_WAIT: Final = ("--wait-for-head", "0", "--after-stop")
