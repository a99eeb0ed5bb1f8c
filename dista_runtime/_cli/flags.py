"""The flags that guard a ``dista`` process's connections (TLS, resource bounds, binding)
and say how it logs.

`add_tls_options` gives a command the ``--tls-*`` flags (and ``--insecure`` when it
listens) and records its role; `apply_tls` turns them into DISTA_TLS_* variables, so that
child processes (a worker's ``--processes``, a local cluster) share them, and checks them
and the resource bounds (``--max-connections`` ...) before anything starts. `bind_ok`
refuses to listen beyond loopback without TLS or ``--insecure``. `add_log_options` gives a
command that runs a process role ``--log-format`` and ``--log-level``; `apply_logs` sets
its lines up (`dista_runtime.logs`) and passes the choice on to its children as
DISTA_LOG_FORMAT and DISTA_LOG_LEVEL; `report` says why a command stops.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

__all__ = [
    "add_log_options",
    "add_tls_options",
    "apply_logs",
    "apply_tls",
    "bind_ok",
    "object_server_host",
    "report",
]

#: A process's role in its log lines, or how to tell it from the command's arguments
#: (``dista worker`` is a supervisor or a worker); ``{pid}`` becomes the process's.
Role = str | Callable[[argparse.Namespace], str]


def add_log_options(p: argparse.ArgumentParser, role: Role) -> None:
    """``--log-format`` and ``--log-level``, for a command whose process is ``role``."""
    from ..logs import FORMATS

    g = p.add_argument_group("logs", "how this process and the ones it starts write lines")
    g.add_argument(
        "--log-format",
        choices=FORMATS,
        help="text (a time, the role, the level, the message) or json (one object a line, "
        "for log shippers) (default: DISTA_LOG_FORMAT, else text)",
    )
    g.add_argument(
        "--log-level",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="the least level written (default: DISTA_LOG_LEVEL, else INFO)",
    )
    p.set_defaults(log_role=role)


def apply_logs(args: argparse.Namespace) -> bool:
    """Set this process's log lines up as its command says (`add_log_options`; a command
    without them logs as its TLS role, ``observer``), and put the choice in DISTA_LOG_FORMAT and
    DISTA_LOG_LEVEL for the processes it starts; a bad variable is one line and exit 2."""
    from ..logs import FORMAT_ENV, LEVEL_ENV, configure, log_format, log_level

    role = getattr(args, "log_role", None) or getattr(args, "tls_role", None) or "dista"
    if callable(role):
        role = role(args)
    try:
        fmt = log_format(getattr(args, "log_format", None))
        level = log_level(getattr(args, "log_level", None))
    except ValueError as e:
        print(f"dista {args.command}: {e}", file=sys.stderr)  # no log lines yet
        return False
    os.environ[FORMAT_ENV] = fmt
    os.environ[LEVEL_ENV] = level
    configure(role.format(pid=os.getpid()), fmt, level=level)
    return True


def report(args: argparse.Namespace, message: str, level: int = logging.ERROR) -> None:
    """Why a command stops, said once. A process role logs it: its stderr is log lines a
    shipper parses, the last one included. An observer's one question (``status``,
    ``timeline``, ``stop``) prints it as a plain line: its answer and its failure are for
    the person or script that asked, as a shell tool's are."""
    if getattr(args, "log_role", None) is None:
        print(message, file=sys.stderr)
    else:
        name = "driver" if args.command == "run" else args.command
        logging.getLogger(f"dista.{name}").log(level, "%s", message)


def add_tls_options(p: argparse.ArgumentParser, role: str, listens: bool = False) -> None:
    """The ``TLS`` group of flags, for a process that connects as ``role``."""
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


def apply_tls(args: argparse.Namespace) -> bool:
    """The TLS flags as DISTA_TLS_* (so that child processes share them), checked now: a
    missing file is one line and exit 2."""
    from .._net.limits import limits_from_args
    from .._tls.config import INSECURE_ENV, tls_for

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
        report(args, f"dista {args.command}: {e}")
        return False
    if role == "worker":
        try:
            tls_for("driver")
        except ValueError as e:
            # Checked here, not when the first task needs it: a traceback at start else.
            report(
                args,
                f"dista worker: {e} (a worker's tasks open sessions to the head as drivers "
                "do: it needs the driver pair beside its own)",
            )
            return False
    return True


def object_server_host(head_host: str) -> str:
    """Where a worker's object server would listen without --host (`advertised_host`).
    (Not from worker_host: a --greenlets worker must not load it before gevent patches.)"""
    from .._net.address import advertised_host

    try:
        return advertised_host(head_host)
    except OSError:
        return "127.0.0.1"  # the head's name does not resolve: dialing it will say so


def bind_ok(who: str, host: str) -> bool:
    """Beyond loopback only with TLS or --insecure (the role warns of that as it starts)."""
    from .._tls.config import check_bind, tls_for

    try:
        check_bind(who, host, tls_for(who.split()[-1]))
    except ValueError as e:
        # It names the role: "dista worker refuses to listen ...".
        logging.getLogger(f"dista.{who.split()[-1]}").error("%s", e)
        return False
    return True
