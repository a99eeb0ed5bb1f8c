"""The roles at the two ends of a connection.

Who may send which kind to whom, and how large, is the kinds table (`_kinds.py`): each row
lists the links its kind travels on, as pairs of these roles.
"""

from __future__ import annotations

import enum

from . import frame as F

__all__ = ["Role", "receives_welcome"]


class Role(enum.IntEnum):
    """The end of a connection. The four peer roles have their hello byte as value."""

    DRIVER = F.ROLE_DRIVER
    WORKER = F.ROLE_WORKER
    CLIENT = F.ROLE_CLIENT
    OBSERVER = F.ROLE_OBSERVER
    HEAD = 16
    #: A worker's object server, answering fetches.
    OBJECT_SERVER = 17
    #: A driver or worker connected to an object server to fetch from it.
    FETCHER = 18


def receives_welcome(role: Role) -> bool:
    """Drivers (and clients, which the head treats as drivers) are numbered by a welcome."""
    return role in (Role.DRIVER, Role.CLIENT)
