"""``dista certs DIR``: a cluster CA and per-role certificates for mutual TLS.

``write_quickstart`` makes DIR/ca.pem and DIR/ca.key (the CA), and DIR/ROLE.pem with
DIR/ROLE.key for each role of ``QUICKSTART_ROLES``; ``write_issued`` adds one more pair from
that CA later. ``make_ca`` and ``issue`` are the same in memory, for tests that need an
expired certificate or one from another CA.

A certificate grants roles as organizationalUnitName attributes of its subject (see
``_cert_roles``); connections verify the chain and those roles, not host names, so the SANs
on head and worker certificates are only for users who turn hostname checks on.

``cryptography`` is an optional extra (``dista[tls]``): it is imported only when a
certificate is made, so that ``dista --help`` and every other command work without it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .roles import HEAD, QUICKSTART_ROLES, ROLE_WORDS, WORKER, check_roles, roles_of

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

__all__ = [
    "CA",
    "CA_CERT",
    "CA_KEY",
    "INSTALL_HINT",
    "ROLE_WORDS",
    "add_parser",
    "cmd_certs",
    "issue",
    "load_ca",
    "make_ca",
    "roles_of",
    "sans_for",
    "write_issued",
    "write_quickstart",
]

INSTALL_HINT: Final = "pip install 'dista[tls]' (from a checkout: pip install '.[tls]')"
CA_CERT: Final = "ca.pem"
CA_KEY: Final = "ca.key"
DEFAULT_DAYS: Final = 365
#: A hundred years: well inside X.509's dates (up to 9999), and longer than anyone needs.
MAX_DAYS: Final = 36500
#: The quick-start CA outlives its first certificates, so that more can be issued later.
CA_DAYS: Final = 3650
#: Certificates start this long before now: a peer whose clock is a little behind accepts them.
CLOCK_SKEW: Final = dt.timedelta(minutes=5)
#: Always on head and worker certificates: a local cluster passes hostname checks too.
LOCAL_SANS: Final = ("localhost", "127.0.0.1", "::1")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_DNS_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)")


def _need_cryptography() -> None:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise ModuleNotFoundError(
            f"making certificates needs the cryptography package: {INSTALL_HINT}"
        ) from None


@dataclass(frozen=True, slots=True)
class CA:
    """A certificate authority: its certificate and the private key that signs with it."""

    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey

    @property
    def cert_pem(self) -> bytes:
        from cryptography.hazmat.primitives.serialization import Encoding

        return self.certificate.public_bytes(Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _key_pem(self.key)

    @classmethod
    def from_pem(cls, cert_pem: bytes, key_pem: bytes) -> CA:
        """A CA from its PEM certificate and key; ValueError if they are not a CA's pair."""
        _need_cryptography()
        from cryptography import x509
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            PublicFormat,
            load_pem_private_key,
        )

        cert = x509.load_pem_x509_certificate(cert_pem)
        try:
            key = load_pem_private_key(key_pem, password=None)
        except TypeError:  # what cryptography raises for a key that needs a password
            raise ValueError("the CA key is encrypted: give it unencrypted") from None
        spki = (Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
        if cert.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
            raise ValueError("the CA key does not belong to the CA certificate")
        try:
            is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            is_ca = False
        if not is_ca:
            raise ValueError("the CA certificate is not a CA's (no BasicConstraints ca=True)")
        if isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            return cls(cert, key)
        raise ValueError("the CA key must be an ECDSA or RSA key")


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
    )

    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())


def _validity(days: int, not_before: dt.datetime | None) -> tuple[dt.datetime, dt.datetime]:
    """[now - CLOCK_SKEW, now + days], or [not_before, not_before + days] when given."""
    if not 1 <= days <= MAX_DAYS:
        raise ValueError(f"a certificate is valid for 1 to {MAX_DAYS} days, not {days}")
    if not_before is None:
        now = dt.datetime.now(dt.UTC)
        return now - CLOCK_SKEW, now + dt.timedelta(days=days)
    if not_before.tzinfo is None:  # compared with the CA's end below, which is in UTC
        not_before = not_before.replace(tzinfo=dt.UTC)
    return not_before, not_before + dt.timedelta(days=days)


def make_ca(
    name: str = "dista cluster CA", *, days: int = CA_DAYS, not_before: dt.datetime | None = None
) -> CA:
    """A new CA (ECDSA P-256, SHA-256) that may sign certificates but no other CA."""
    _need_cryptography()
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    start, end = _validity(days, not_before)
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dista"),
            x509.NameAttribute(NameOID.COMMON_NAME, name),
        ]
    )
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CA(cert, key)


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    from cryptography import x509

    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def issue(
    ca: CA,
    name: str,
    roles: Sequence[str],
    *,
    days: int = DEFAULT_DAYS,
    not_before: dt.datetime | None = None,
    sans: Sequence[str] = (),
) -> tuple[bytes, bytes]:
    """A certificate granting ``roles`` (one OU each), CN ``name``, signed by ``ca``: its
    PEM and its key's PEM. It is valid for either end of a connection, and ends no later
    than the CA does. ValueError for an unknown role word or a SAN that is neither an IP
    address nor a DNS name."""
    _need_cryptography()
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    words = check_roles(roles)
    alt_names = _alt_names(sans)
    start, end = _validity(days, not_before)
    end = min(end, ca.certificate.not_valid_after_utc)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            *(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, w) for w in words),
            x509.NameAttribute(NameOID.COMMON_NAME, name),
        ]
    )
    try:
        ca_ski = ca.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
        aki = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski.value)
    except x509.ExtensionNotFound:  # a CA made elsewhere
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key())
    usage = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .add_extension(aki, critical=False)
    )
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    return cert.public_bytes(Encoding.PEM), _key_pem(key)


def _alt_names(sans: Sequence[str]) -> list[x509.GeneralName]:
    from cryptography import x509

    names: list[x509.GeneralName] = []
    for text in dict.fromkeys(sans):  # once each, in order
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(text)))
            continue
        except ValueError:
            pass
        labels = text.removeprefix("*.").removesuffix(".").split(".")
        if len(text) > 253 or not all(_DNS_LABEL.fullmatch(label) for label in labels):
            raise ValueError(f"SAN {text!r} is neither an IP address nor a DNS name")
        names.append(x509.DNSName(text))
    return names


def sans_for(roles: Sequence[str], extra: Sequence[str] = ()) -> tuple[str, ...]:
    """The SANs a quick-start certificate with ``roles`` gets: for a head or a worker (the
    ends others dial), the loopback names and then ``extra``; for the others, none."""
    if not {HEAD, WORKER} & set(roles):
        return ()
    return tuple(dict.fromkeys([*LOCAL_SANS, *extra]))


def load_ca(directory: str | os.PathLike[str]) -> CA:
    """The CA in DIR/ca.pem and DIR/ca.key; FileNotFoundError saying how to make one."""
    folder = Path(directory)
    try:
        cert_pem = (folder / CA_CERT).read_bytes()
        key_pem = (folder / CA_KEY).read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no CA in {folder} ({CA_CERT} and {CA_KEY}): make one with 'dista certs {folder}'"
        ) from None
    try:
        return CA.from_pem(cert_pem, key_pem)
    except ValueError as e:
        raise ValueError(f"the CA in {folder} cannot sign: {e}") from None


def write_quickstart(
    directory: str | os.PathLike[str],
    *,
    days: int = DEFAULT_DAYS,
    sans: Sequence[str] = (),
    force: bool = False,
) -> list[Path]:
    """A new CA and a pair for each quick-start role in ``directory`` (made 0700 if
    missing): the files written. FileExistsError if it holds a CA already, unless
    ``force``. The CA's files are written last, so that a run cut short can run again."""
    folder = Path(directory)
    existing = [folder / n for n in (CA_CERT, CA_KEY) if (folder / n).exists()]
    if existing and not force:
        raise FileExistsError(
            f"{existing[0]} exists: pass --force to make a new CA and quick-start "
            "certificates (every certificate the old CA signed stops working)"
        )
    # A name of its own, so that two clusters' CAs are told apart in errors and by OpenSSL.
    ca = make_ca(f"dista cluster CA {os.urandom(4).hex()}", days=max(days, CA_DAYS))
    pairs = {
        role: issue(ca, f"dista {role}", grants, days=days, sans=sans_for(grants, sans))
        for role, grants in QUICKSTART_ROLES.items()
    }
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    written: list[Path] = []
    for role, (cert_pem, key_pem) in pairs.items():
        written += _write_pair(folder, role, cert_pem, key_pem)
    written += _write_pair(folder, "ca", ca.cert_pem, ca.key_pem)
    return written


def write_issued(
    directory: str | os.PathLike[str],
    name: str,
    roles: Sequence[str],
    *,
    days: int = DEFAULT_DAYS,
    sans: Sequence[str] = (),
    force: bool = False,
) -> list[Path]:
    """DIR/NAME.pem and DIR/NAME.key granting ``roles``, from the CA in ``directory``."""
    if not _NAME.fullmatch(name) or name == "ca":
        raise ValueError(
            f"bad certificate name {name!r}: use letters, digits, '.', '_' and '-' "
            "(at most 64, not 'ca')"
        )
    words = check_roles(roles)
    folder = Path(directory)
    existing = [
        folder / f"{name}{s}" for s in (".pem", ".key") if (folder / f"{name}{s}").exists()
    ]
    if existing and not force:
        raise FileExistsError(f"{existing[0]} exists: pass --force to replace it")
    # SANs asked for by name go on whatever the roles.
    alt = [*sans_for(words, sans), *sans]
    cert_pem, key_pem = issue(load_ca(folder), name, words, days=days, sans=alt)
    return _write_pair(folder, name, cert_pem, key_pem)


def _write_pair(folder: Path, name: str, cert_pem: bytes, key_pem: bytes) -> list[Path]:
    return [
        _write(folder / f"{name}.pem", cert_pem, 0o644),
        _write(folder / f"{name}.key", key_pem, 0o600),
    ]


def _write(path: Path, data: bytes, mode: int) -> Path:
    """Write ``data`` to a new file made with ``mode`` (a key is never readable by others,
    not even for a moment) and move it over ``path``."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)  # left by a run that was killed
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


# -- the command -----------------------------------------------------------------------------


def _days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        days = 0
    if not 1 <= days <= MAX_DAYS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number of days, 1 to {MAX_DAYS}"
        )
    return days


def _roles(text: str) -> list[str]:
    try:
        return list(check_roles(w.strip() for w in text.split(",") if w.strip()))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dista certs`` with ``dista``'s subcommands."""
    quick = ", ".join(f"{r}.pem" for r in QUICKSTART_ROLES)
    p = sub.add_parser(
        "certs",
        help="make a cluster CA and certificates for mutual TLS",
        description=f"Make a cluster CA (DIR/{CA_CERT}, with its key DIR/{CA_KEY}: keep it "
        f"private) and a certificate and key per role ({quick}, each with its .key) for a "
        "quick start; then start every process with --tls-dir DIR, or DISTA_TLS_DIR=DIR. "
        "A certificate's roles bound what its holder may do: the observer's may also stop "
        "the cluster. Another machine needs ca.pem and the pairs of the roles it runs; "
        "ca.key only issues more certificates: keep it on one. With --issue, add one more pair from the CA in DIR, e.g. a read-only "
        "observer (--issue status --roles observer) or an admin (--roles admin). Needs the "
        f"cryptography package: {INSTALL_HINT}.",
    )
    p.add_argument("dir", metavar="DIR", help="where to write (made with mode 0700 if missing)")
    p.add_argument(
        "--days",
        type=_days,
        default=DEFAULT_DAYS,
        metavar="N",
        help=f"how long the certificates are valid (default {DEFAULT_DAYS}; the CA lasts "
        f"at least {CA_DAYS})",
    )
    p.add_argument(
        "--san",
        action="append",
        default=[],
        metavar="NAME",
        help="a DNS name or IP address for head and worker certificates, for those who turn "
        "hostname checks on (repeat; localhost, 127.0.0.1 and ::1 are always there; with "
        "--issue, on that certificate whatever its roles)",
    )
    p.add_argument(
        "--force", action="store_true", help="replace an existing CA (or --issue NAME pair)"
    )
    p.add_argument(
        "--issue",
        metavar="NAME",
        help="issue DIR/NAME.pem and DIR/NAME.key from the CA in DIR (needs --roles)",
    )
    p.add_argument(
        "--roles",
        type=_roles,
        action="append",
        metavar="ROLE[,ROLE...]",
        help=f"what --issue's certificate grants: {', '.join(sorted(ROLE_WORDS))} "
        "(stop: may stop the cluster; admin: may do anything)",
    )
    p.set_defaults(func=cmd_certs)


def cmd_certs(args: argparse.Namespace) -> int:
    """Make the quick-start set or, with --issue, one more pair; print what was written."""
    roles = [w for group in args.roles or () for w in group]
    if roles and args.issue is None:
        return _fail("--roles goes with --issue NAME")
    if args.issue is not None and not roles:
        return _fail(f"--issue needs --roles, one or more of {', '.join(sorted(ROLE_WORDS))}")
    try:
        _need_cryptography()
        if args.issue is None:
            write_quickstart(args.dir, days=args.days, sans=args.san, force=args.force)
        else:
            write_issued(
                args.dir, args.issue, roles, days=args.days, sans=args.san, force=args.force
            )
    except (ImportError, ValueError, FileExistsError, FileNotFoundError) as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(str(e), code=1)
    _summary(Path(args.dir), args.issue, roles)
    return 0


def _summary(folder: Path, issued: str | None, roles: Sequence[str]) -> None:
    names = {issued: tuple(roles)} if issued else {"ca": (), **QUICKSTART_ROLES}
    print(f"dista certs: wrote to {folder}:")
    for name, grants in names.items():
        what = f"roles {', '.join(grants)}" if grants else "the cluster CA (keep ca.key private)"
        print(f"  {name + '.pem':<14} {name + '.key':<14} {what}{_until(folder / f'{name}.pem')}")
    if issued:
        # --tls-dir alone picks DIR/ROLE.pem for a process's role: name this pair instead.
        pair = f"--tls-cert {folder / issued}.pem --tls-key {folder / issued}.key"
        print(f"Use it with --tls-dir {folder} {pair} (or DISTA_TLS_CERT and DISTA_TLS_KEY).")
    else:
        print(f"Start every process with --tls-dir {folder}, or DISTA_TLS_DIR={folder}.")


def _until(path: Path) -> str:
    from cryptography import x509

    end = x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc
    return f", until {end:%Y-%m-%d}"


def _fail(message: str, code: int = 2) -> int:
    print(f"dista certs: {message}", file=sys.stderr)
    return code
