"""How a ``dista`` command's process runs: its loop, its task modules, its settings.

Every command that talks to a cluster runs one role on the loop ``--loop`` names
(`run_role`); the worker and ``timeline`` import the user's task modules (`import_tasks`);
the head and worker check the DISTA_* recovery settings before they start (`settings_ok`),
tune the garbage collector for many short-lived objects (`tune_process`), and a supervised
worker dies with the process that started it (`die_with_parent`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .._net.contract import Loop
from .._net.latch import Latch

T = TypeVar("T")

__all__ = ["die_with_parent", "import_tasks", "run_role", "settings_ok", "tune_process"]


def die_with_parent(parent: int | None) -> None:
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


def tune_process() -> None:
    """Head and worker processes allocate many short-lived objects per task: collect the
    young generation less often, and keep what was imported out of every collection. (A
    shorter GIL switch interval for workers was tried: no gain measured, so not set.)"""
    import gc

    gc.freeze()
    gc.set_threshold(20_000, 20, 50)


def run_role(
    args: argparse.Namespace,
    start: Callable[[Loop], Latch[T]],
    stop: Any = None,
    on_sigterm: Callable[[], object] | None = None,
) -> T:
    """Run a role on the loop ``--loop`` names (or ``DISTA_LOOP``, or the detected one):
    SIGINT and SIGTERM call ``stop`` (SIGTERM ``on_sigterm``, if given)."""
    from ..loops import run

    return run(start, stop, args.loop, on_sigterm=on_sigterm)


def settings_ok(role: str, liveness: float | None = None) -> bool:
    """Every DISTA_* setting of recovery read now: a bad one is one clear line, at start."""
    from .._hosts.liveness import check_all, check_liveness

    try:
        check_all()
        if liveness is not None:
            check_liveness(liveness)
    except ValueError as e:
        logging.getLogger(f"dista.{role}").error("dista %s: %s", role, e)
        return False
    return True


def import_tasks(modules: Sequence[str]) -> None:
    """Import each ``--import`` module (repeated, or separated with commas); a package is
    imported with every module in it, subpackages too (``--import myproject`` imports its
    task modules wherever they are), as a worker must have every task its drivers have."""
    import importlib
    import pkgutil

    # As `python -m` does: modules in the current directory can be imported.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    for spec in modules:
        for name in filter(None, spec.split(",")):
            module = importlib.import_module(name)
            path = getattr(module, "__path__", None)  # a package
            if path is None:
                continue
            for found in pkgutil.walk_packages(path, prefix=f"{name}.", onerror=_raise):
                importlib.import_module(found.name)


def _raise(name: str) -> None:
    """A subpackage that fails to import: say so, as a failing ``--import`` does."""
    raise ImportError(f"cannot import {name} (a subpackage of an --import package)")
