"""What a binding uses of the runtime: one public, typed surface, so that no binding
reaches into the runtime's private modules.

A binding implements `Loop` (`dista_runtime._net.loop`) for its event loop, reads its
connections into an `Engine` (by `Link`, for protocol-style connections, or by
`dista_runtime._net.sockets` for task-style ones), and waits for a `Latch` the way its loop
waits. Everything else (the roles, joining, a worker's tasks) is the runtime's, written
once against `Loop`. `docs/bindings.md` is the guide.
"""

from __future__ import annotations

from ._errors import DistaError
from ._hosts.engine import Engine
from ._hosts.join import Cluster, begin, joined
from ._net.address import format_head, listen_socket, parse_head, socket_address, unix_path
from ._net.admission import AcceptErrors
from ._net.loop import (
    Background,
    CallQueue,
    Connections,
    Latch,
    Listener,
    Loop,
    TaskHandle,
    Timer,
)
from ._net.streams import ACCEPT_LATER, HIGH_WATER, LOW_WATER, Link, Stream, nodelay
from ._tls.config import HANDSHAKE_TIMEOUT_S
from ._tls.stream import socket_stream

__all__ = [
    "ACCEPT_LATER",
    "HANDSHAKE_TIMEOUT_S",
    "HIGH_WATER",
    "LOW_WATER",
    "AcceptErrors",
    "Background",
    "CallQueue",
    "Cluster",
    "Connections",
    "DistaError",
    "Engine",
    "Latch",
    "Link",
    "Listener",
    "Loop",
    "Stream",
    "TaskHandle",
    "Timer",
    "begin",
    "format_head",
    "joined",
    "listen_socket",
    "nodelay",
    "parse_head",
    "socket_stream",
    "socket_address",
    "unix_path",
]
