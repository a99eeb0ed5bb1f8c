"""Mutual TLS: which certificates a process uses, and what a peer's certificate lets it do.

Every connection of a cluster (driver, worker and observer to the head; driver and worker
to an object server) is TLS with certificates on both ends once a process is given a
cluster CA and its own pair: ``--tls-dir DIR`` on every CLI role, or ``DISTA_TLS_DIR`` for
every process (`dista.init` included), each taking ``DIR/ca.pem`` and its own role's
``DIR/ROLE.pem`` and ``DIR/ROLE.key`` (`dista certs DIR` writes them). A CA, certificate
and key from elsewhere: ``DISTA_TLS_CA``, ``DISTA_TLS_CERT``, ``DISTA_TLS_KEY`` (or the
``--tls-ca``, ``--tls-cert``, ``--tls-key`` flags), which win over the directory.

Identity is the certificate's chain to the cluster CA and the roles it grants (one
organizationalUnitName per role, `_cert_roles`), not a host name: cluster members move
between hosts and addresses, and a quick-start CA cannot know them. So ``check_hostname``
is off and a dialer checks the role instead: the head's link must present ``head`` and an
object server ``worker`` (or ``admin``). The accepting side hands the peer's roles to its
core (`Head.authenticated`, `Worker.authenticated`), which bounds what the peer may say.

A process whose settings name files that are missing fails at start, saying which file and
how to make one; nothing falls back to plain TCP once TLS is asked for.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
import ssl
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from .roles import ADMIN, HEAD, WORKER, roles_of

__all__ = [
    "TLS",
    "TLS_ENV",
    "check_bind",
    "dial_failure",
    "dialed_ok",
    "expected_role",
    "insecure",
    "NO_IDENTITY",
    "PeerIdentity",
    "peer_identity",
    "peer_roles",
    "resume_key",
    "refusal_hint",
    "tls_for",
]

#: The environment variables that configure TLS, in the order they are documented.
TLS_ENV: Final = ("DISTA_TLS_DIR", "DISTA_TLS_CA", "DISTA_TLS_CERT", "DISTA_TLS_KEY")
#: Set (to 1) by ``--insecure``: listen beyond loopback without TLS.
INSECURE_ENV: Final = "DISTA_INSECURE"
#: How long a TLS handshake may take before the connection is dropped.
HANDSHAKE_TIMEOUT_S: Final = 10.0
#: How long a closing TLS connection waits for its peer's close_notify. A peer that never
#: answers (a refused flood, a dead client) keeps the transport's buffers (asyncio's are
#: 256 KiB each) until then: asyncio's own default is 30 s.
SHUTDOWN_TIMEOUT_S: Final = 2.0


@dataclass(frozen=True)
class TLS:
    """The TLS of one process in one role: ``server`` for what it listens on (None for a
    role that only dials), ``client`` for what it dials."""

    role: str
    server: ssl.SSLContext
    client: ssl.SSLContext
    where: str  # what the settings named, for messages
    ca: str = ""  # the CA file it verifies peers with, for messages
    key: str = ""  # its private key file: a head derives its resume key from it


_cache: dict[tuple[str, tuple[str | None, ...]], TLS | None] = {}


def tls_for(role: str) -> TLS | None:
    """This process's TLS as ``role`` (head, worker, driver, observer) from the
    environment, or None for plain TCP. Raises ValueError saying what to fix when the
    settings name files that are missing or unusable."""
    key = (role, tuple(os.environ.get(name) or None for name in TLS_ENV))
    if key not in _cache:
        _cache[key] = _load(role, *key[1])
    return _cache[key]


def _load(
    role: str, directory: str | None, ca: str | None, cert: str | None, key: str | None
) -> TLS | None:
    if directory is None and ca is None and cert is None and key is None:
        return None
    if directory is not None:
        ca = ca or os.path.join(directory, "ca.pem")
        cert = cert or os.path.join(directory, f"{role}.pem")
        key = key or os.path.join(directory, f"{role}.key")
    named = (("DISTA_TLS_CA", ca), ("DISTA_TLS_CERT", cert), ("DISTA_TLS_KEY", key))
    missing = [name for name, value in named if not value]
    if missing:
        raise ValueError(
            f"TLS needs a CA, a certificate and a key: {', '.join(missing)} not set "
            "(or give DISTA_TLS_DIR / --tls-dir, a directory `dista certs DIR` made)"
        )
    assert ca is not None and cert is not None and key is not None
    # The files themselves, not a variable's name: the CLI's --tls-* flags set the
    # variables too (for child processes), and a user who gave a flag set no variable.
    if directory is not None and (ca, cert, key) == _pair_in(directory, role):
        where = f"certificates from {directory}"
    else:
        where = f"CA {ca}, certificate {cert}, key {key}"
    for path in (ca, cert, key):
        if not os.path.isfile(path):
            raise ValueError(
                f"TLS file {path} does not exist ({where}, role {role}): make a cluster's "
                "certificates with `dista certs DIR` and pass --tls-dir DIR or DISTA_TLS_DIR"
            )
    try:
        server = _context(ssl.PROTOCOL_TLS_SERVER, ca, cert, key)
        client = _context(ssl.PROTOCOL_TLS_CLIENT, ca, cert, key)
    except (ssl.SSLError, OSError) as e:
        raise ValueError(
            f"TLS files for role {role} ({cert}, {key}, CA {ca}) are unusable: {e}"
        ) from None
    return TLS(role, server, client, where, ca, key)


def _pair_in(directory: str, role: str) -> tuple[str, str, str]:
    """The CA, certificate and key of ``role`` in a directory `dista certs` made."""
    join = os.path.join
    return (
        join(directory, "ca.pem"),
        join(directory, f"{role}.pem"),
        join(directory, f"{role}.key"),
    )


def _context(protocol: int, ca: str, cert: str, key: str) -> ssl.SSLContext:
    context = ssl.SSLContext(protocol)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # Identity is the chain and the role (module docstring), not a host name.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cafile=ca)
    context.load_cert_chain(cert, key)
    return context


def peer_roles(transport: Any) -> frozenset[str]:
    """The roles the certificate of ``transport``'s peer grants (none without one)."""
    tls = transport.get_extra_info("ssl_object")
    if tls is None:
        return frozenset()
    cert: dict[str, Any] | None = tls.getpeercert()
    return roles_of(cert)


class PeerIdentity(NamedTuple):
    """Who a TLS peer is beyond its roles: the SHA-256 of its certificate (a driver's
    secret is bound to it) and its subject, for log lines."""

    digest: bytes
    subject: str


#: A peer without a certificate (plain TCP).
NO_IDENTITY: Final = PeerIdentity(b"", "")


def peer_identity(transport: Any) -> PeerIdentity:
    """The identity of ``transport``'s peer's certificate (`NO_IDENTITY` without one)."""
    tls = transport.get_extra_info("ssl_object")
    if tls is None:
        return NO_IDENTITY
    der: bytes | None = tls.getpeercert(binary_form=True)
    if not der:
        return NO_IDENTITY
    cert = tls.getpeercert() or {}
    names = [f"{_SHORT.get(k, k)}={v}" for rdn in cert.get("subject", ()) for k, v in rdn]
    return PeerIdentity(hashlib.sha256(der).digest(), ", ".join(names))


_SHORT: Final = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O"}


def resume_key(tls: TLS | None) -> tuple[bytes, bool]:
    """The key a head computes drivers' secrets with, and whether it outlives the head:
    under TLS, derived from the head's private key file (a head restarted with the same
    key recomputes every secret, so its drivers resume); else drawn at random."""
    if tls is not None and tls.key:
        try:
            with open(tls.key, "rb") as f:
                material = f.read()
        except OSError:
            material = b""
        if material:
            return hmac.new(material, b"dista resume key", hashlib.sha256).digest(), True
    return secrets.token_bytes(32), False


def expected_role(head_link: bool) -> str:
    """The role a dialed peer must show: the head for the head link, else an object
    server's worker."""
    return HEAD if head_link else WORKER


def dialed_ok(roles: frozenset[str], head_link: bool) -> bool:
    return expected_role(head_link) in roles or ADMIN in roles


def refusal_hint(with_tls: bool) -> str:
    """Why a head may close a connection as soon as it opens, before any answer: the
    likeliest causes are TLS on one side only, or a certificate the head does not take."""
    if with_tls:
        return (
            "it may not take this process's certificate (another CA's, expired, or a role "
            "that may not join), or not run TLS"
        )
    return (
        "if it runs with TLS, give this process its certificates (--tls-dir DIR or DISTA_TLS_DIR)"
    )


#: What OpenSSL says when the answer to its hello is not TLS at all (a plain TCP peer).
_NOT_TLS: Final = ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG")


def dial_failure(error: str | BaseException, tls: TLS | None) -> str:
    """Why a dial of the head failed, as messages say it: ``error``, and when the head's
    certificate failed this process's verification, what that means and what to fix (one
    cluster's processes each took another `dista certs` directory's CA)."""
    text = str(error)
    if tls is not None and any(symptom in text for symptom in _NOT_TLS):
        # The peer answered our TLS hello with bytes that are not TLS: a plain head (the
        # reverse case, a plain process and a TLS head, gets `refusal_hint`).
        return (
            f"{text}; the head does not run TLS (or this is not a Dista head): start it "
            "with this cluster's certificates (--tls-dir DIR or DISTA_TLS_DIR), or run "
            "this process without them"
        )
    verify = isinstance(error, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in text
    # An expired or not yet valid certificate says so itself, and is no CA mismatch.
    if not verify or "expired" in text or "not yet valid" in text:
        return text
    ca = tls.ca if tls is not None and tls.ca else "its ca.pem"
    return (
        f"{text}; the head's certificate is not signed by this process's CA ({ca}): both "
        "sides must use certificates from the same `dista certs` directory (or the same "
        "--tls-ca)"
    )


def insecure() -> bool:
    """Whether ``--insecure`` (``DISTA_INSECURE=1``) allows plain TCP beyond loopback."""
    return os.environ.get(INSECURE_ENV, "") not in ("", "0")


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches only this machine ("" is every interface)."""
    if host.startswith("unix:") or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def check_bind(who: str, host: str, tls: TLS | None) -> str | None:
    """Refuse (ValueError, naming TLS and how to enable it) to listen on ``host`` beyond
    loopback without TLS, unless ``--insecure``; with it, the warning to print on every
    start (None when there is nothing to say)."""
    if tls is not None or is_loopback(host):
        return None
    if not insecure():
        raise ValueError(
            f"{who} refuses to listen on {host} without TLS: anyone who can reach it could "
            "run code on this cluster. Enable TLS: make certificates with `dista certs DIR` "
            "and start every process with --tls-dir DIR (or DISTA_TLS_DIR=DIR); or pass "
            "--insecure on a network you trust (docs/security.md)"
        )
    return (
        f"{who} listens on {host} WITHOUT TLS (--insecure): anyone who can reach it can "
        "run code on this cluster and read its objects; see docs/security.md"
    )
