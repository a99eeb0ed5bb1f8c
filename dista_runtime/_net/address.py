"""Where a head listens: ``HOST:PORT`` over TCP, or ``unix:PATH`` on this machine.

A local cluster's head listens on a Unix socket in a private directory (mode 0700): a send
on a Unix socket costs about a quarter of one on loopback TCP, whose sender also runs the
receiver's whole TCP path, and only this user can connect. Everything that takes a head
address passes it around as ``(host, port)``; a Unix one is ``("unix:PATH", 0)``.
Object servers stay on TCP: their addresses are IPv4 on the wire.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Final

from .._errors import AddressError

__all__ = [
    "UNIX",
    "advertised_host",
    "format_head",
    "listen_socket",
    "parse_head",
    "socket_address",
    "unix_path",
]

UNIX: Final = "unix:"


def parse_head(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``unix:PATH`` as ``(host, port)``; `AddressError` (a ValueError)
    says what is wrong."""
    if text.startswith(UNIX):
        if len(text) == len(UNIX):
            raise AddressError(
                f"a Unix head address names a socket, like unix:/tmp/x, not {text!r}"
            )
        return text, 0
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise AddressError(
            f"a head address is HOST:PORT (like 127.0.0.1:7420, a port from 1 to 65535) "
            f"or unix:PATH, not {text!r}"
        )
    return host or "127.0.0.1", int(port)


def format_head(host: str, port: int) -> str:
    return host if host.startswith(UNIX) else f"{host}:{port}"


def unix_path(host: str) -> str | None:
    """The socket path of a ``unix:PATH`` host; None for a TCP one."""
    return host[len(UNIX) :] if host.startswith(UNIX) else None


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (``unix:PATH``: a Unix socket there)."""
    path = unix_path(host)
    if path is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        sock.listen(1024)
        return sock
    return socket.create_server((host, port), backlog=1024)


def socket_address(sock: socket.socket) -> tuple[str, int]:
    """Where ``sock`` listens, as head addresses are passed around (``unix:PATH``, 0)."""
    name = sock.getsockname()
    if isinstance(name, str):
        return f"{UNIX}{name}", 0
    return name[0], name[1]


def advertised_host(head_host: str) -> str:
    """The address other peers reach this machine at: the interface that routes to the
    head, or loopback for a head on this machine."""
    if unix_path(head_host) is not None:
        return "127.0.0.1"  # a head on this machine
    try:
        if ipaddress.ip_address(head_host).is_loopback:
            return "127.0.0.1"
    except ValueError:
        head_host = socket.gethostbyname(head_host)
        if ipaddress.ip_address(head_host).is_loopback:
            return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((head_host, 9))
        host: str = probe.getsockname()[0]
        return host
