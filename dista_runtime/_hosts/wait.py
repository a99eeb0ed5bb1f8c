"""Waiting for a head that is not there yet: a worker started before its head.

A worker (``dista worker``, each of ``--processes N``) whose head does not answer yet,
because nothing listens at its address, the address does not resolve or route yet, or the
connection is reset or times out as it opens, tries again: 0.1 s after the first failure,
the wait doubling to 2 s, each one spread by ±20 % so that workers started together do not
dial in step. It does so for up to ``--wait-for-head`` (``DISTA_WAIT_FOR_HEAD``) seconds,
60 by default (0: fail at once); each try is bounded by its own dial timeout. It logs at
WARNING that it waits (``dista worker pid 4242: no head at 10.0.0.5:7420 yet (connection
refused); trying again for up to 60 s ...``), then again only every ~10 s or when the
reason changes, and once the time is up it gives up with a message naming the address,
how long it tried and the last failure (the worker exits with `EXIT_NO_HEAD`).

Any other failure is no absence, and waiting would not mend it: a TLS handshake or a head's
certificate this process refuses, a bad port, a permission denied. Those fail at once, as
before. A head that accepts the connection and then closes it at once (it refuses this
process's certificate, or its hello) is `Reconnect`'s case, as before.

`dista_runtime._local.supervise.EXIT_NO_HEAD` is the exit code; `Patience` keeps the time,
the backoff and what was said; `absence` tells a dial's failure apart.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import re
import socket
import time
from collections.abc import Callable
from typing import Final

from .._net.address import advertised_host
from .liveness import seconds_env

__all__ = [
    "DEFAULT_WAIT_S",
    "WAIT_ENV",
    "WAIT_FLAG",
    "Patience",
    "absence",
    "backoff",
    "resolve_head",
    "wait_for_head_s",
]

#: Seconds a worker that finds no head at its address keeps trying before it gives up.
WAIT_ENV: Final = "DISTA_WAIT_FOR_HEAD"
WAIT_FLAG: Final = "--wait-for-head"
DEFAULT_WAIT_S: Final = 60.0
_FIRST_S: Final = 0.1
_MAX_S: Final = 2.0
_JITTER: Final = 0.2
_SAY_EVERY_S: Final = 10.0

#: The errors (by errno) that say nothing answers at the head's address yet, as people say
#: them. Negative ones are the resolver's (`socket.gaierror`).
_ABSENT: Final = {
    errno.ECONNREFUSED: "connection refused",
    errno.ENOENT: "no socket there",  # a Unix socket's path, not made yet
    errno.ECONNRESET: "connection reset",
    errno.ECONNABORTED: "connection aborted",
    errno.ETIMEDOUT: "timed out",
    errno.EHOSTUNREACH: "host unreachable",
    errno.EHOSTDOWN: "host down",
    errno.ENETUNREACH: "network unreachable",
    errno.ENETDOWN: "network down",
    socket.EAI_NONAME: "name does not resolve",
    socket.EAI_AGAIN: "name does not resolve yet",
    socket.EAI_FAIL: "name does not resolve",
    getattr(socket, "EAI_NODATA", socket.EAI_NONAME): "name has no address",
}
_ERRNO: Final = re.compile(r"\[Errno (-?\d+)\]")
#: Failures of TLS, which waiting does not mend (asyncio's handshake is part of its dial).
_TLS: Final = re.compile(r"SSL|certificate", re.IGNORECASE)


def backoff(tries: int, first: float, cap: float, jitter: float = 0.0) -> float:
    """Seconds to wait after failed try number ``tries`` (from 1): ``first``, doubling up
    to ``cap``, each spread by up to ``jitter`` of itself either way (so that processes that
    failed together do not try again in step)."""
    delay = min(cap, first * 2.0 ** min(tries - 1, 60))  # a day of tries: no overflow
    if jitter:
        delay *= 1.0 + random.uniform(-jitter, jitter)
    return delay


def wait_for_head_s() -> float:
    """``DISTA_WAIT_FOR_HEAD`` (60 s if unset; 0 gives up at once)."""
    return seconds_env(WAIT_ENV, DEFAULT_WAIT_S)


def absence(error: str) -> str:
    """What ``error`` (why a dial of the head failed, as the loop says it) tells of the head
    when it tells that none answers there yet ("connection refused", "name does not resolve
    yet", "timed out"); '' for any other failure (TLS, a bad port, a permission denied)."""
    if not error or _TLS.search(error):
        return ""
    # Every address tried has its reason (asyncio: "Multiple exceptions: [Errno 111] ...,
    # [Errno 99] ..." for localhost's ::1 and 127.0.0.1): none answered if one was absent.
    for number in _ERRNO.findall(error):
        said = _ABSENT.get(int(number))
        if said:
            return said
    if error in ("TimeoutError", "timed out"):  # a loop's own timeout, or gevent's socket's
        return "timed out"
    if error.startswith("no address for "):  # the anyio binding's resolver found none
        return "name has no address"
    return ""


class Patience:
    """How long a worker keeps trying to reach a head that is not there yet (``timeout``
    seconds from its first failure), how long it waits between tries, and what it says.

    ``next`` after each failed try gives the wait before the next one, or None once the
    time is up; `gave_up` then says why, for the worker's last line."""

    def __init__(self, where: str, timeout: float, role: str = "worker") -> None:
        self.where = where
        self.timeout = timeout
        self.role = role
        self.log = logging.getLogger(f"dista.{role}")
        self.tries = 0
        self._since = 0.0
        self._said = 0.0
        self._why = ""
        self._last = ""

    @property
    def waited(self) -> float:
        """Seconds since the first failed try (0 before it)."""
        return time.monotonic() - self._since if self.tries else 0.0

    def next(self, error: str) -> float | None:
        """A try failed with ``error`` (an `absence`): seconds until the next one, or None
        when the time is up. Logs the first failure, then every ~10 s, or a new reason."""
        now = time.monotonic()
        why = absence(error) or error
        who = f"dista {self.role} pid {os.getpid()}"
        if not self.tries:
            self._since = self._said = now
            self.log.warning(
                "%s: no head at %s yet (%s); trying again for up to %g s (%s, %s)",
                who,
                self.where,
                why,
                self.timeout,
                WAIT_FLAG,
                WAIT_ENV,
            )
        elif why != self._why or now - self._said >= _SAY_EVERY_S:
            self._said = now
            self.log.warning(
                "%s: still no head at %s after %.0f s (%s; %d tries)",
                who,
                self.where,
                now - self._since,
                why,
                self.tries + 1,
            )
        self.tries += 1
        self._why, self._last = why, error
        left = self.timeout - (now - self._since)
        if left <= 0:
            return None
        return min(backoff(self.tries, _FIRST_S, _MAX_S, _JITTER), left)

    def reached(self) -> None:
        """The head answered: say so if this process had said it waits for it."""
        if self.tries:
            self.log.warning(
                "dista %s pid %d: reached the head at %s after %.1f s",
                self.role,
                os.getpid(),
                self.where,
                self.waited,
            )

    def gave_up(self) -> str:
        """Why the worker stops: the address, how long it tried, and the last failure."""
        return (
            f"no head at {self.where} after trying for {self.waited:.1f} s ({WAIT_FLAG} or "
            f"{WAIT_ENV}: {self.timeout:g} s; {self.tries} tries; last: {self._last})"
        )


def resolve_head(
    head_host: str, patience: Patience, sleep: Callable[[float], object] = time.sleep
) -> str:
    """Block until ``head_host`` resolves and routes (what a worker's object server needs to
    know where it listens: `advertised_host`), while ``patience`` lasts: '' once it does,
    or fails in another way (starting the worker then says how), else why it gave up."""
    while True:
        try:
            advertised_host(head_host)
        except OSError as e:
            error = str(e) or type(e).__name__
            if not absence(error):
                return ""
            delay = patience.next(error)
            if delay is None:
                return patience.gave_up()
            sleep(delay)
        else:
            return ""
