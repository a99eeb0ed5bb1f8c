"""Exceptions that say who is at fault.

`LocalProtocolError` comes from encoding and `Connection.send()`: the caller asked for a frame
the protocol cannot carry. `RemoteProtocolError` comes only from decoding and
`Connection.next_event()`: the peer sent bytes the protocol forbids. Both name the frame kind
and the field so that the message is enough to act on.
"""

from __future__ import annotations

__all__ = ["LocalProtocolError", "ProtocolError", "RemoteProtocolError"]


class ProtocolError(Exception):
    """A frame broke the protocol; `kind` and `field` say where, when known."""

    def __init__(self, message: str, *, kind: int | None = None, field: str | None = None) -> None:
        self.kind = kind
        self.field = field
        super().__init__(message)


class LocalProtocolError(ProtocolError):
    """We (or our caller) tried to send something the protocol cannot carry."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol forbids."""
