"""Which plain tasks a worker runs on its own I/O loop instead of handing them to a thread.

Handing a task to a runner thread and its result back to the loop costs two thread
wake-ups and two GIL hand-offs: about 50 µs of CPU and more of latency on a small machine,
which is most of the cost of a task that does little. A worker therefore learns, per
function, which tasks are short and self-contained, and runs those inline on the loop.

A function becomes inline once `WARMUP` runs in a row on runner threads each took at most
`BUDGET_NS` and none used the session (submitted work, read a ref, asked the head
anything), unless its code names what reaches the session (``.remote``, ``dista.get``...):
such a task may run short many times and reach for the session the next. It goes back to threads, and must earn its place again, after two runs in a
row over the budget or one over `HARD_LIMIT_NS` (one run over the budget alone is more
often the kernel preempting the process than the task being slow), and for good once it
uses the session: a task blocked on a ref must never hold the loop that would bring the ref's value.
An inline task that reaches for the session is stopped at that call by `RunOnThread` (a
`BaseException`, so that a task's ``except Exception`` does not swallow it; and should a
task catch it anyway, every later session call raises it again and the run's outcome is
dropped), before anything is submitted, and runs again, whole, on a runner thread: like a
retry, this repeats whatever it did before the call, once per function and worker process.
``async def`` tasks run on the loop anyway and are not this module's business.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Callable
from typing import Any, Final

__all__ = ["BUDGET_NS", "HARD_LIMIT_NS", "WARMUP", "InlinePolicy", "RunOnThread"]

#: A run longer than this (wall time, GIL waits included) is over the budget.
BUDGET_NS: Final = 1_000_000
#: A run longer than this sends its function back to threads at once.
HARD_LIMIT_NS: Final = 10_000_000
#: Short, self-contained runs on threads in a row before a function runs inline.
WARMUP: Final = 3
_NEVER: Final = -1


class RunOnThread(BaseException):
    """An inline task reached for the session: the worker runs it again on a thread."""


#: Attribute and global names through which a task reaches the session: a function whose
#: code (or a function or class defined in it) uses one of them is never run inline.
_SESSION_NAMES: Final = frozenset({"remote", "put", "wait", "as_completed", "timeline", "stats"})


def _names_the_session(function: Callable[..., Any]) -> bool:
    """Whether ``function``'s code names what reaches the session: ``.remote(...)``,
    ``dista.get/put/wait...``. A helper it calls that does so is not seen: such a task is
    still stopped and run again on a thread, as the module docstring says."""
    code = getattr(function, "__code__", None)
    stack = [code] if isinstance(code, types.CodeType) else []
    while stack:
        code = stack.pop()
        names = code.co_names
        if not _SESSION_NAMES.isdisjoint(names) or ("dista" in names and "get" in names):
            return True
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return False


class InlinePolicy:
    """Per-function records of how tasks ran; thread-safe where it must be."""

    def __init__(
        self, budget_ns: int = BUDGET_NS, warmup: int = WARMUP, hard_limit_ns: int = HARD_LIMIT_NS
    ) -> None:
        self.budget_ns = budget_ns
        self.hard_limit_ns = hard_limit_ns
        self.warmup = warmup
        # function -> short self-contained runs in a row on threads; _NEVER once it used the
        # session. Written by runner threads and the loop: each update is one dict store,
        # and a lost update only delays a decision.
        self._streak: dict[Callable[..., Any], int] = {}
        self._strike: dict[Callable[..., Any], bool] = {}  # its last run overran the budget
        self._local = threading.local()
        self.inline_runs = 0  # for tests and stats: how many tasks ran on the loop

    def may_inline(self, function: Callable[..., Any]) -> bool:
        return self._streak.get(function, 0) >= self.warmup

    # -- around one run ---------------------------------------------------------------------

    def begin(self, inline: bool) -> None:
        """A task starts on this thread (``inline``: on the loop)."""
        local = self._local
        local.inline = inline
        local.used = False
        local.running = True

    def end(self, function: Callable[..., Any], elapsed_ns: int) -> None:
        """The task that `begin` announced ended after ``elapsed_ns``."""
        local = self._local
        local.running = False
        streak = self._streak.get(function, 0)
        if local.used or streak == _NEVER:
            self._streak[function] = _NEVER
        elif elapsed_ns > self.budget_ns:
            if elapsed_ns > self.hard_limit_ns or self._strike.get(function, False):
                self._streak[function] = 0
            self._strike[function] = True
        else:
            self._strike[function] = False
            if streak < self.warmup:
                promoted = streak + 1 >= self.warmup
                # Code that names what reaches the session would, run inline, be stopped
                # there and run again whole: never inline it, so it never runs twice.
                self._streak[function] = (
                    _NEVER if promoted and _names_the_session(function) else streak + 1
                )
        if local.inline:
            self.inline_runs += 1

    def session_used(self) -> None:
        """A task on this thread is about to submit or wait: stop it if it runs inline."""
        local = self._local
        if not getattr(local, "running", False):
            return  # not inside a task (a worker's own housekeeping)
        local.used = True
        if local.inline:
            raise RunOnThread("this task reached for the session while running inline")

    def stopped(self) -> bool:
        """Whether the inline task on this thread reached for the session."""
        local = self._local
        return bool(getattr(local, "inline", False) and getattr(local, "used", False))

    def forbid(self, function: Callable[..., Any]) -> None:
        """Never run ``function`` inline again (it reached for the session inline)."""
        self._streak[function] = _NEVER
        self._local.running = False
