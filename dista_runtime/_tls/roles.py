"""The roles a TLS certificate grants, as a peer's ``getpeercert()`` shows them.

A certificate grants a role by carrying it as one organizationalUnitName (OU) attribute of
its subject, one attribute per role; ``dista certs`` writes them so. This module reads them
back on the other end of a connection, and imports only the standard library, so that a
process checking its peers' roles needs no ``cryptography`` (only ``dista certs`` does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = [
    "ADMIN",
    "DRIVER",
    "HEAD",
    "OBSERVER",
    "QUICKSTART_ROLES",
    "ROLE_ATTRIBUTE",
    "ROLE_WORDS",
    "STOP",
    "WORKER",
    "check_roles",
    "roles_of",
]

HEAD: Final = "head"
WORKER: Final = "worker"
DRIVER: Final = "driver"
OBSERVER: Final = "observer"
#: Not a role one says hello as: a grant that lets the holder stop the cluster.
STOP: Final = "stop"
#: May do anything any role may.
ADMIN: Final = "admin"

ROLE_WORDS: Final[frozenset[str]] = frozenset({HEAD, WORKER, DRIVER, OBSERVER, STOP, ADMIN})

#: The subject attribute that carries a role, as ``ssl`` names it in ``getpeercert()``.
ROLE_ATTRIBUTE: Final = "organizationalUnitName"

#: What ``dista certs DIR`` writes: DIR/NAME.pem and DIR/NAME.key granting these roles. The
#: observer may stop the cluster, so that ``dista stop --tls-dir DIR`` works out of the box.
QUICKSTART_ROLES: Final[Mapping[str, tuple[str, ...]]] = {
    HEAD: (HEAD,),
    WORKER: (WORKER,),
    DRIVER: (DRIVER,),
    OBSERVER: (OBSERVER, STOP),
}


def roles_of(cert: Mapping[str, Any] | None) -> frozenset[str]:
    """The role words a peer's certificate grants, from ``SSLSocket.getpeercert()``.

    Unknown OU values are ignored (a certificate from another tool may carry its own); no
    certificate, or one not verified (``getpeercert()`` gives ``{}`` or None), grants none.
    """
    if not cert:
        return frozenset()
    subject = cert.get("subject", ())
    found: set[str] = set()
    # The subject is a tuple of RDNs, each a tuple of (name, value) pairs: an RDN may hold
    # several attributes, and each role is an attribute of its own.
    for rdn in subject:
        for pair in rdn:
            if len(pair) == 2 and pair[0] == ROLE_ATTRIBUTE and pair[1] in ROLE_WORDS:
                found.add(pair[1])
    return frozenset(found)


def check_roles(words: Iterable[str]) -> tuple[str, ...]:
    """The role words given, each once and in order; ValueError naming the valid ones for
    an unknown word or for none at all."""
    roles: list[str] = []
    for word in words:
        if word not in ROLE_WORDS:
            raise ValueError(f"unknown role {word!r}: the roles are {_valid()}")
        if word not in roles:
            roles.append(word)
    if not roles:
        raise ValueError(f"no role given: name one or more of {_valid()}")
    return tuple(roles)


def _valid() -> str:
    return ", ".join(sorted(ROLE_WORDS))
