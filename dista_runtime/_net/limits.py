"""Resource bounds per peer: how many connections a head or a worker's object server takes,
and how long a connection may stay silent before it says hello. Read one way, as
`_liveness` reads the recovery settings: a bad value is one line naming its variable or
flag, at start.

Defaults, and why:

- ``DISTA_MAX_CONNECTIONS`` / ``--max-connections``: the soft ``RLIMIT_NOFILE`` of the
  process minus a reserve, and at most `MAX_CONNECTIONS_CEILING` (10,000); 1024
  descriptors give 768, 256 give 64. The reserve is an eighth of the limit (at least
  `FD_RESERVE`, 64) for what the process opens besides its peers (the listener, the event
  loop, log and checkpoint files, an object server's dials to fetch from others), plus
  `ACCEPT_BATCH` (128) for connections accepted but not attached yet (asyncio accepts up to
  100 at a time before it attaches any, and an evicted connection's descriptor is freed
  only on the loop's next turn). So the cap is met before ``accept`` fails with "Too many
  open files" (measured: with the eighth alone, a head under ``ulimit -n 256`` hit it during
  a burst): then the runtime, not the kernel, chooses who goes (the oldest connection that
  has not said hello; see `dista_runtime._net.admission`). The ceiling bounds the memory the
  connections' buffers take (10,000 peers is far beyond what one head schedules).
- ``DISTA_MAX_CONNECTIONS_PER_HOST`` / ``--max-connections-per-host``: 512 per peer
  address (IP; every Unix-socket peer counts as one host). A local cluster on loopback (a
  head, a worker process per core, their task sessions, a few drivers and ``dista
  status``) stays far under it, while one host alone cannot take every connection.
- ``DISTA_HELLO_TIMEOUT`` / ``--hello-timeout``: 10 s for a connection to say hello (the
  head's core enforces it). A driver or worker sends its hello as soon as it is connected;
  10 s covers a loaded machine and a slow TLS handshake.
- ``DISTA_HELLO_IDLE_TIMEOUT`` / ``--hello-idle-timeout``: 5 s a connection that has not
  said hello may go without sending a byte (a silent or slowloris peer goes sooner than the
  hello deadline).

- ``DISTA_HANDSHAKE_TIMEOUT`` / ``--handshake-timeout``: 5 s for a TLS handshake that came
  in (a peer that answers does it in milliseconds; a silent one goes soon).
- ``DISTA_MAX_HANDSHAKES`` / ``--max-handshakes``: 72 TLS handshakes pending at once (with
  the `EVICTING` margin of 28, the `UNATTACHED` 100 descriptors kept for them; a higher
  cap needs that many descriptors more, beyond the open-file reserve), and
  ``DISTA_MAX_HANDSHAKES_PER_HOST`` / ``--max-handshakes-per-host``: 64 from one address.
  Past either the OLDEST pending one is closed for the new one
  (`dista_runtime._net.pending`): never the new one refused. A handshake timeout of 0 is
  no deadline: only the caps then close a silent connection.
- ``DISTA_IDLE_TIMEOUT`` / ``--idle-timeout``: 60 s a driver or observer that said hello
  may go without sending a byte (drivers send a keepalive every
  ``DISTA_KEEPALIVE_INTERVAL``, 15 s; workers a heartbeat every second).
- ``DISTA_MAX_OBSERVERS`` / ``--max-observers``: 64 observers at once: the connections
  they cannot take are left for drivers and workers.
- ``DISTA_MIN_RATE`` / ``--min-rate``: 1024 bytes a second, the least average rate at
  which a frame begun must keep arriving once ``DISTA_RATE_GRACE`` (10 s) has passed (time
  the head paused reading the peer does not count): a slow-drip peer is closed.

- ``DISTA_HEAD_INLINE_CAP`` / ``--inline-cap``: 256 MiB of inline results the head keeps
  for one driver (the head's core enforces it, `dista_proto.INLINE_CAP_BYTES`): past it
  that driver's results stay on workers, so a driver that never releases cannot fill the
  head. A size in bytes, or with a unit (``64MiB``, ``1GiB``, ``500MB``); 0 turns it off.
- ``DISTA_HEAD_PARTIAL_CAP`` / ``--partial-cap``: a quarter of the machine's memory, at
  least 2 GiB (twice `dista_proto.PARTIAL_CAP_BYTES`, the largest frame), of large frames
  (1 MiB or more) the head's connections hold partly received, all together; a frame that
  would pass it is refused from its header. A size as above; 0 turns it off.

A timeout of 0 turns it off; a cap is a whole number of at least 1.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ACCEPT_BATCH",
    "DEFAULT_HELLO_IDLE_S",
    "DEFAULT_HELLO_TIMEOUT_S",
    "DEFAULT_MAX_PER_HOST",
    "EVICTING",
    "FD_RESERVE",
    "IDLE_TIMEOUT_ENV",
    "KEEPALIVE_ENV",
    "MAX_HANDSHAKES_ENV",
    "MAX_HANDSHAKES_PER_HOST_ENV",
    "MAX_OBSERVERS_ENV",
    "MIN_RATE_ENV",
    "RATE_GRACE_ENV",
    "keepalive_interval",
    "FETCH_GRANT_WAIT_ENV",
    "HELLO_IDLE_ENV",
    "HELLO_TIMEOUT_ENV",
    "INLINE_CAP_ENV",
    "PARTIAL_CAP_ENV",
    "MAX_CONNECTIONS_CEILING",
    "UNATTACHED",
    "MAX_CONNECTIONS_ENV",
    "MAX_PER_HOST_ENV",
    "Limits",
    "add_limit_options",
    "default_max_connections",
    "fetch_grant_wait_ns",
    "env_size",
    "inline_cap",
    "partial_cap",
    "limits_from_args",
    "limits_from_env",
    "size",
]

MAX_CONNECTIONS_ENV: Final = "DISTA_MAX_CONNECTIONS"
MAX_PER_HOST_ENV: Final = "DISTA_MAX_CONNECTIONS_PER_HOST"
HELLO_TIMEOUT_ENV: Final = "DISTA_HELLO_TIMEOUT"
HELLO_IDLE_ENV: Final = "DISTA_HELLO_IDLE_TIMEOUT"
INLINE_CAP_ENV: Final = "DISTA_HEAD_INLINE_CAP"
HANDSHAKE_TIMEOUT_ENV: Final = "DISTA_HANDSHAKE_TIMEOUT"
MAX_HANDSHAKES_ENV: Final = "DISTA_MAX_HANDSHAKES"
MAX_HANDSHAKES_PER_HOST_ENV: Final = "DISTA_MAX_HANDSHAKES_PER_HOST"
IDLE_TIMEOUT_ENV: Final = "DISTA_IDLE_TIMEOUT"
KEEPALIVE_ENV: Final = "DISTA_KEEPALIVE_INTERVAL"
MAX_OBSERVERS_ENV: Final = "DISTA_MAX_OBSERVERS"
MIN_RATE_ENV: Final = "DISTA_MIN_RATE"
RATE_GRACE_ENV: Final = "DISTA_RATE_GRACE"
PARTIAL_CAP_ENV: Final = "DISTA_HEAD_PARTIAL_CAP"
_UNITS: Final = {
    "": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30,
}  # fmt: skip

MAX_CONNECTIONS_CEILING: Final = 10_000
#: Descriptors kept for what is not a peer's connection, at least (see the docstring).
FD_RESERVE: Final = 64
#: Descriptors kept for connections accepted in one burst, before they are counted.
ACCEPT_BATCH: Final = 128
#: Connections a listener has accepted and not counted yet (made into transports, or in
#: their TLS handshake), at most: the descriptors `ACCEPT_BATCH` keeps for them, less a
#: margin for connections closed whose descriptors go on the loop's next turn. Each counts
#: against the caps once attached; until then nothing else bounds a burst (uvloop makes a
#: transport a turn or two after its accept: unbounded, a head under ``ulimit -n 256`` ran
#: out of descriptors), and a listener at the bound accepts again when one is settled.
UNATTACHED: Final = 100
DEFAULT_MAX_PER_HOST: Final = 512
DEFAULT_HELLO_TIMEOUT_S: Final = 10.0
DEFAULT_HELLO_IDLE_S: Final = 5.0
DEFAULT_HANDSHAKE_TIMEOUT_S: Final = 5.0
#: Connections a TLS listener takes past the pending-handshake cap before it waits: each
#: closes the oldest pending one, whose descriptor is freed (and whose place the listener
#: counts again) only on the loop's next turn. A listener at exactly the cap would stop
#: accepting there, and the new connections it should let in would wait in the kernel.
EVICTING: Final = 28
#: So that the default cap and its margin are `UNATTACHED`, the descriptors kept for them.
DEFAULT_MAX_HANDSHAKES: Final = UNATTACHED - EVICTING
DEFAULT_MAX_HANDSHAKES_PER_HOST: Final = 64
DEFAULT_IDLE_TIMEOUT_S: Final = 60.0
DEFAULT_KEEPALIVE_S: Final = 15.0
DEFAULT_MAX_OBSERVERS: Final = 64
DEFAULT_MIN_RATE: Final = 1024
DEFAULT_RATE_GRACE_S: Final = 10.0


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds one head or object server keeps (see the module docstring)."""

    max_connections: int
    max_per_host: int = DEFAULT_MAX_PER_HOST
    hello_timeout: float = DEFAULT_HELLO_TIMEOUT_S  # seconds; 0: off
    hello_idle_timeout: float = DEFAULT_HELLO_IDLE_S  # seconds; 0: off
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT_S  # seconds; 0: off
    max_handshakes: int = DEFAULT_MAX_HANDSHAKES
    max_handshakes_per_host: int = DEFAULT_MAX_HANDSHAKES_PER_HOST
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S  # seconds, after hello; 0: off
    max_observers: int = DEFAULT_MAX_OBSERVERS
    min_rate: int = DEFAULT_MIN_RATE  # bytes a second; 0: off
    rate_grace: float = DEFAULT_RATE_GRACE_S  # seconds

    def __post_init__(self) -> None:
        _at_least_one("the connection cap", self.max_connections)
        _at_least_one("the per-host connection cap", self.max_per_host)
        _at_least_one("the pending handshake cap", self.max_handshakes)
        _at_least_one("the per-host pending handshake cap", self.max_handshakes_per_host)
        _at_least_one("the observer cap", self.max_observers)
        if (
            isinstance(self.min_rate, bool)
            or not isinstance(self.min_rate, int)
            or (self.min_rate < 0)
        ):
            raise ValueError(f"the rate floor must be a whole number >= 0, not {self.min_rate!r}")
        for what, value in (
            ("the hello timeout", self.hello_timeout),
            ("the hello idle timeout", self.hello_idle_timeout),
            ("the handshake timeout", self.handshake_timeout),
            ("the idle timeout", self.idle_timeout),
            ("the rate grace", self.rate_grace),
        ):
            if not value >= 0:  # NaN too
                raise ValueError(f"{what} must be at least 0 seconds, not {value!r}")


def _at_least_one(what: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a whole number at least 1, not {value!r}")


def default_max_connections(soft_nofile: int | None = None) -> int:
    """The total cap for a process whose soft ``RLIMIT_NOFILE`` is ``soft_nofile``
    (default: this process's; unlimited or unknown gives the ceiling)."""
    if soft_nofile is None:
        try:
            import resource

            soft_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        except (ImportError, OSError, ValueError):
            return MAX_CONNECTIONS_CEILING
        if soft_nofile == resource.RLIM_INFINITY:
            return MAX_CONNECTIONS_CEILING
    if soft_nofile < 0:
        return MAX_CONNECTIONS_CEILING
    spare = soft_nofile - max(FD_RESERVE, soft_nofile // 8) - ACCEPT_BATCH
    return max(1, min(MAX_CONNECTIONS_CEILING, spare))


# -- reading: environment, then flags ---------------------------------------------------------


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"must be a whole number at least 1, not {text!r}") from None
    if value < 1:
        raise ValueError(f"must be a whole number at least 1, not {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"must be a number of seconds, not {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"must be a number of seconds at least 0, not {text!r}")
    return value


def _env_count(env: str) -> int | None:
    raw = os.environ.get(env, "")
    if not raw:
        return None
    try:
        return _count(raw)
    except ValueError as e:
        raise ValueError(f"{env} {e}") from None


def _env_seconds(env: str, default: float) -> float:
    raw = os.environ.get(env, "")
    if not raw:
        return default
    try:
        return _seconds(raw)
    except ValueError as e:
        raise ValueError(f"{env} {e}") from None


def limits_from_env() -> Limits:
    """The limits the ``DISTA_*`` variables set (defaults where unset); ValueError naming
    the variable for a bad value (``dista.init`` raises it; the CLI prints it, exit 2)."""
    total = _env_count(MAX_CONNECTIONS_ENV)
    per_host = _env_count(MAX_PER_HOST_ENV)
    return Limits(
        max_connections=total if total is not None else default_max_connections(),
        max_per_host=per_host if per_host is not None else DEFAULT_MAX_PER_HOST,
        hello_timeout=_env_seconds(HELLO_TIMEOUT_ENV, DEFAULT_HELLO_TIMEOUT_S),
        hello_idle_timeout=_env_seconds(HELLO_IDLE_ENV, DEFAULT_HELLO_IDLE_S),
        handshake_timeout=_env_seconds(HANDSHAKE_TIMEOUT_ENV, DEFAULT_HANDSHAKE_TIMEOUT_S),
        max_handshakes=_env_count(MAX_HANDSHAKES_ENV) or DEFAULT_MAX_HANDSHAKES,
        max_handshakes_per_host=_env_count(MAX_HANDSHAKES_PER_HOST_ENV)
        or DEFAULT_MAX_HANDSHAKES_PER_HOST,
        idle_timeout=_env_seconds(IDLE_TIMEOUT_ENV, DEFAULT_IDLE_TIMEOUT_S),
        max_observers=_env_count(MAX_OBSERVERS_ENV) or DEFAULT_MAX_OBSERVERS,
        min_rate=_env_rate(),
        rate_grace=_env_seconds(RATE_GRACE_ENV, DEFAULT_RATE_GRACE_S),
    )


def _env_rate() -> int:
    raw = os.environ.get(MIN_RATE_ENV, "")
    if not raw:
        return DEFAULT_MIN_RATE
    try:
        value = size(raw)
    except ValueError as e:
        raise ValueError(f"{MIN_RATE_ENV} {e}") from None
    return value


def keepalive_interval() -> float:
    """Seconds between a driver's keepalives when it sends nothing else, from
    ``DISTA_KEEPALIVE_INTERVAL`` (default 15; 0: none); ValueError naming it."""
    return _env_seconds(KEEPALIVE_ENV, DEFAULT_KEEPALIVE_S)


def size(text: str) -> int:
    """Bytes from ``text``: a whole number, or one with a unit (``64MiB``, ``1GB``)."""
    cleaned = text.strip().lower().replace(" ", "")
    number = cleaned.rstrip("kmgib")
    unit = cleaned[len(number) :]
    try:
        value = int(number)
    except ValueError:
        value = -1
    if value < 0 or unit not in _UNITS:
        raise ValueError(f"must be a size in bytes (such as 268435456 or 256MiB), not {text!r}")
    return value * _UNITS[unit]


def inline_cap() -> int:
    """Bytes of inline results the head keeps for one driver (0: no cap), from
    ``DISTA_HEAD_INLINE_CAP``; ValueError naming it for a bad value."""
    import dista_proto as dp

    return env_size(INLINE_CAP_ENV, dp.INLINE_CAP_BYTES)


def partial_cap() -> int:
    """Bytes of large frames the head's connections may hold partly received (0: no cap),
    from ``DISTA_HEAD_PARTIAL_CAP``; ValueError naming it for a bad value."""
    import dista_proto as dp

    # A quarter of the machine's memory: the largest frame (1 GiB) alone must not fill the
    # cap, or one peer announcing it would make the head refuse every other large frame
    # until its link is closed.
    ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return env_size(PARTIAL_CAP_ENV, max(2 * dp.PARTIAL_CAP_BYTES, ram // 4))


def env_size(env: str, default: int) -> int:
    """Bytes from the variable ``env`` (`size`'s forms), or ``default`` when it is unset;
    ValueError naming it for a bad value."""
    raw = os.environ.get(env, "")
    if not raw:
        return default
    try:
        return size(raw)
    except ValueError as e:
        raise ValueError(f"{env} {e}") from None


def _flag(parse: type[int | float]) -> Callable[[str], int | float]:
    """An argparse ``type`` whose error argparse prints as one line naming the flag."""

    def convert(text: str) -> int | float:
        try:
            return _count(text) if parse is int else _seconds(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = "count" if parse is int else "seconds"
    return convert


def add_limit_options(p: argparse.ArgumentParser) -> None:
    """The flags of `Limits` for ``dista head`` and ``dista worker`` (each overrides its
    variable; a bad value is argparse's one-line error, exit 2)."""
    group = p.add_argument_group("resource bounds")
    group.add_argument(
        "--max-connections",
        type=_flag(int),
        default=None,
        metavar="N",
        help=f"connections taken in total; past it the oldest one that has not said hello "
        f"is closed for a new one, else the new one (default: {MAX_CONNECTIONS_ENV}, else "
        f"the open-file limit less an eighth (at least {FD_RESERVE}) and {ACCEPT_BATCH}, at most "
        f"{MAX_CONNECTIONS_CEILING:,})",
    )
    group.add_argument(
        "--max-connections-per-host",
        type=_flag(int),
        default=None,
        metavar="N",
        help=f"connections taken from one address; past it new ones are refused (default: "
        f"{MAX_PER_HOST_ENV}, else {DEFAULT_MAX_PER_HOST})",
    )
    group.add_argument(
        "--hello-timeout",
        type=_flag(float),
        default=None,
        metavar="SECONDS",
        help=f"a connection that has not said hello by then is closed (default: "
        f"{HELLO_TIMEOUT_ENV}, else {DEFAULT_HELLO_TIMEOUT_S:g}; 0 turns it off)",
    )
    group.add_argument(
        "--hello-idle-timeout",
        type=_flag(float),
        default=None,
        metavar="SECONDS",
        help=f"a connection that has not said hello and sends nothing for this long is "
        f"closed (default: {HELLO_IDLE_ENV}, else {DEFAULT_HELLO_IDLE_S:g}; 0 turns it off)",
    )
    group.add_argument(
        "--handshake-timeout",
        type=_flag(float),
        default=None,
        metavar="SECONDS",
        help=f"a TLS handshake not done by then is closed (default: {HANDSHAKE_TIMEOUT_ENV}, "
        f"else {DEFAULT_HANDSHAKE_TIMEOUT_S:g}; 0 turns it off)",
    )
    group.add_argument(
        "--max-handshakes",
        type=_flag(int),
        default=None,
        metavar="N",
        help=f"TLS handshakes pending at once; past it the oldest is closed for the newest "
        f"(default: {MAX_HANDSHAKES_ENV}, else {DEFAULT_MAX_HANDSHAKES})",
    )
    group.add_argument(
        "--max-handshakes-per-host",
        type=_flag(int),
        default=None,
        metavar="N",
        help=f"TLS handshakes pending at once from one address; past it that address's "
        f"oldest is closed for its newest (default: {MAX_HANDSHAKES_PER_HOST_ENV}, else "
        f"{DEFAULT_MAX_HANDSHAKES_PER_HOST})",
    )
    group.add_argument(
        "--idle-timeout",
        type=_flag(float),
        default=None,
        metavar="SECONDS",
        help=f"a driver or observer past its hello that sends nothing for this long is "
        f"closed (drivers send keepalives) (default: {IDLE_TIMEOUT_ENV}, else "
        f"{DEFAULT_IDLE_TIMEOUT_S:g}; 0 turns it off)",
    )
    group.add_argument(
        "--max-observers",
        type=_flag(int),
        default=None,
        metavar="N",
        help=f"observers (dista status, timeline, stop) connected at once; past it a new "
        f"one gets an error frame (default: {MAX_OBSERVERS_ENV}, else {DEFAULT_MAX_OBSERVERS})",
    )
    group.add_argument(
        "--min-rate",
        default=None,
        metavar="BYTES",
        help=f"the least average rate, in bytes a second, at which a frame begun must keep "
        f"arriving after the grace (default: {MIN_RATE_ENV}, else {DEFAULT_MIN_RATE}; "
        f"0 turns it off)",
    )
    group.add_argument(
        "--rate-grace",
        type=_flag(float),
        default=None,
        metavar="SECONDS",
        help=f"how long a frame may take before the rate floor applies (default: "
        f"{RATE_GRACE_ENV}, else {DEFAULT_RATE_GRACE_S:g})",
    )


def limits_from_args(args: argparse.Namespace) -> Limits:
    """The limits of `add_limit_options`'s flags, each falling back on its variable, then
    its default; ValueError naming the variable for a bad one (print it, exit 2). The flags
    given are set as their variables too, so that processes started from here (a worker's
    supervised processes) share them."""
    for flag, name in (
        ("max_connections", MAX_CONNECTIONS_ENV),
        ("max_connections_per_host", MAX_PER_HOST_ENV),
        ("hello_timeout", HELLO_TIMEOUT_ENV),
        ("hello_idle_timeout", HELLO_IDLE_ENV),
        ("handshake_timeout", HANDSHAKE_TIMEOUT_ENV),
        ("max_handshakes", MAX_HANDSHAKES_ENV),
        ("max_handshakes_per_host", MAX_HANDSHAKES_PER_HOST_ENV),
        ("idle_timeout", IDLE_TIMEOUT_ENV),
        ("max_observers", MAX_OBSERVERS_ENV),
        ("min_rate", MIN_RATE_ENV),
        ("rate_grace", RATE_GRACE_ENV),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            os.environ[name] = str(value)
    for flag, name in (("inline_cap", INLINE_CAP_ENV), ("partial_cap", PARTIAL_CAP_ENV)):
        cap = getattr(args, flag, None)
        if cap is not None:
            try:
                size(cap)
            except ValueError as e:
                raise ValueError(f"--{flag.replace('_', '-')} {e}") from None
            os.environ[name] = cap
    inline_cap()
    partial_cap()
    return limits_from_env()


#: How long an object server lets a fetch wait for the head's grant before refusing it.
FETCH_GRANT_WAIT_ENV: Final = "DISTA_FETCH_GRANT_WAIT"


def fetch_grant_wait_ns() -> int:
    """`FETCH_GRANT_WAIT_ENV` in nanoseconds (default 5 s: a grant races its fetch on
    another link); ValueError naming it for a bad value."""
    import dista_proto as dp

    default = dp.FETCH_GRANT_WAIT_NS / 1e9
    return int(_env_seconds(FETCH_GRANT_WAIT_ENV, default) * 1e9)
