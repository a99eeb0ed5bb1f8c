"""What a binding uses of the runtime: one public, typed surface, so that no binding
reaches into the runtime's private modules, and nothing more than bindings use.

A binding package names one `Backend` subclass (``backend_class``: a role's main, a loop
for blocking callers, a wait for a `Latch`, joining a cluster, its `Loop` class) and
implements `Loop` for its event loop (`dista_runtime._net.contract`). It reads its
connections into the `Connections` a listen or dial is given: by `Link` for
protocol-style connections; a binding whose loop runs tasks instead implements
`TaskLoop` (how its tasks wait for what `Steps` ask), and `serve_socket` and
`SocketListener` do the rest (plain or TLS, as `Secure` says). Everything else (the roles, joining, a worker's tasks) is the runtime's,
written once against the contract. `docs/bindings.md` is the guide.
"""

from __future__ import annotations

from ._execution.coroutines import Coroutines, CoroutineTask
from ._hosts.connect import joining, joining_on
from ._net.address import listen_socket, socket_address, unix_path
from ._net.admission import AcceptErrors
from ._net.contract import (
    AsyncBackend,
    Backend,
    Connections,
    Listener,
    Loop,
    Secure,
    Start,
    Stop,
    Timer,
    Tls,
)
from ._net.latch import CallQueue, Handle, Latch
from ._net.limits import UNATTACHED
from ._net.sockets import Steps, TaskLoop, Wait, connect_socket, running
from ._net.streams import ACCEPT_LATER, Link, peer_of
from ._net.threads import LoopThread
from ._tls.config import HANDSHAKE_TIMEOUT_S, SHUTDOWN_TIMEOUT_S
from ._tls.stream import SocketListener, serve_socket

__all__ = [
    "ACCEPT_LATER",
    "HANDSHAKE_TIMEOUT_S",
    "SHUTDOWN_TIMEOUT_S",
    "AcceptErrors",
    "AsyncBackend",
    "Backend",
    "CallQueue",
    "Connections",
    "CoroutineTask",
    "Coroutines",
    "Handle",
    "Latch",
    "Link",
    "Listener",
    "Loop",
    "LoopThread",
    "Secure",
    "SocketListener",
    "Start",
    "Steps",
    "Stop",
    "TaskLoop",
    "Timer",
    "Tls",
    "UNATTACHED",
    "Wait",
    "connect_socket",
    "joining",
    "joining_on",
    "listen_socket",
    "peer_of",
    "running",
    "serve_socket",
    "socket_address",
    "unix_path",
]
