"""`dista certs DIR`: the files it writes, and that real TLS handshakes accept its
certificates, carry their roles, and refuse another CA's or an expired one."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import ssl
import stat
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("cryptography")

from dista_runtime._tls import certs
from dista_runtime._tls.roles import ROLE_WORDS, roles_of

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ("ca", "head", "worker", "driver", "observer")


def dista_certs(*args: str) -> int:
    """``dista certs ARGS`` as the CLI runs it: the subcommand registered by add_parser."""
    top = argparse.ArgumentParser(prog="dista")
    certs.add_parser(top.add_subparsers(dest="command", required=True))
    parsed = top.parse_args(["certs", *args])
    code: int = parsed.func(parsed)
    return code


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("certs") / "tls"
    assert dista_certs(str(folder), "--san", "10.1.2.3", "--san", "node1.example") == 0
    return folder


# -- handshakes ------------------------------------------------------------------------------

Pair = tuple[bytes, bytes]


def pair_of(folder: Path, name: str) -> Pair:
    return (folder / f"{name}.pem").read_bytes(), (folder / f"{name}.key").read_bytes()


def context(
    tmp: Path, side: str, ca_pem: bytes, pair: Pair, hostname: bool = False
) -> ssl.SSLContext:
    """A context as a mutual-TLS peer makes one: CERT_REQUIRED, strict X.509 checks."""
    server = side == "server"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    ctx.load_verify_locations(cadata=ca_pem.decode())
    (tmp / f"{side}.pem").write_bytes(pair[0])
    (tmp / f"{side}.key").write_bytes(pair[1])
    ctx.load_cert_chain(tmp / f"{side}.pem", tmp / f"{side}.key")
    return ctx


@dataclass
class Outcome:
    """What each end of one connection saw: the peer's roles, or the error it got."""

    server: frozenset[str] | Exception
    client: frozenset[str] | Exception


def handshake(
    tmp: Path,
    ca_pem: bytes,
    server_pair: Pair,
    client_pair: Pair,
    server_hostname: str | None = None,
) -> Outcome:
    """A TLS handshake over a socket pair, the server in a thread. The client also reads
    the server's b"ok": under TLS 1.3 a client learns only then that the server refused it."""
    server_ctx = context(tmp, "server", ca_pem, server_pair)
    client_ctx = context(tmp, "client", ca_pem, client_pair, server_hostname is not None)
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    seen: dict[str, frozenset[str] | Exception] = {}

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(a, server_side=True) as s:
                seen["server"] = roles_of(s.getpeercert())
                s.sendall(b"ok")
        except (ssl.SSLError, OSError) as e:
            seen["server"] = e

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_ctx.wrap_socket(b, server_hostname=server_hostname) as c:
            roles = roles_of(c.getpeercert())
            reply = c.recv(2)
            seen["client"] = roles if reply == b"ok" else ConnectionError("refused")
    except (ssl.SSLError, OSError) as e:
        seen["client"] = e
    finally:
        thread.join(10)
        a.close()
        b.close()
    assert not thread.is_alive()
    return Outcome(seen["server"], seen["client"])


def refused_by_verification(error: frozenset[str] | Exception, reason: str) -> bool:
    return isinstance(error, ssl.SSLCertVerificationError) and reason in str(error)


# -- the quick-start set ---------------------------------------------------------------------


def test_writes_a_ca_and_a_pair_per_role_with_private_keys(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "tls"
    old = os.umask(0)  # keys are created private, not made private afterwards
    try:
        assert dista_certs(str(folder)) == 0
    finally:
        os.umask(old)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{n}{s}" for n in QUICKSTART for s in (".pem", ".key")
    )
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in QUICKSTART:
        assert stat.S_IMODE((folder / f"{name}.key").stat().st_mode) == 0o600
        assert stat.S_IMODE((folder / f"{name}.pem").stat().st_mode) == 0o644


@pytest.mark.parametrize(
    ("client", "roles"),
    [
        ("driver", {"driver"}),
        ("worker", {"worker"}),
        ("observer", {"observer", "stop"}),
        ("head", {"head"}),
    ],
)
def test_each_certificate_verifies_and_carries_its_roles(
    tls_dir: Path, tmp_path: Path, client: str, roles: set[str]
) -> None:
    ca = (tls_dir / "ca.pem").read_bytes()
    seen = handshake(tmp_path, ca, pair_of(tls_dir, "head"), pair_of(tls_dir, client))
    assert seen == Outcome(server=frozenset(roles), client=frozenset({"head"}))


def test_head_and_worker_certificates_pass_hostname_checks(tls_dir: Path, tmp_path: Path) -> None:
    ca = (tls_dir / "ca.pem").read_bytes()
    driver = pair_of(tls_dir, "driver")
    for server in ("head", "worker"):
        for name in ("localhost", "127.0.0.1", "10.1.2.3", "node1.example"):
            seen = handshake(tmp_path, ca, pair_of(tls_dir, server), driver, name)
            assert seen.client == frozenset({server}), (server, name)
    seen = handshake(tmp_path, ca, pair_of(tls_dir, "head"), driver, "elsewhere.example")
    assert refused_by_verification(seen.client, "Hostname mismatch")


def test_only_head_and_worker_certificates_name_hosts(tls_dir: Path) -> None:
    from cryptography import x509

    def names(role: str) -> list[str]:
        cert = x509.load_pem_x509_certificate((tls_dir / f"{role}.pem").read_bytes())
        try:
            alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        except x509.ExtensionNotFound:
            return []
        return [str(name.value) for name in alt.value]

    for server in ("head", "worker"):
        assert names(server) == ["localhost", "127.0.0.1", "::1", "10.1.2.3", "node1.example"]
    assert names("driver") == names("observer") == []


def test_a_certificate_from_another_ca_is_refused(tls_dir: Path, tmp_path: Path) -> None:
    ca = (tls_dir / "ca.pem").read_bytes()
    intruder = certs.issue(certs.make_ca("another cluster", days=30), "intruder", ["admin"])
    seen = handshake(tmp_path, ca, pair_of(tls_dir, "head"), intruder)
    assert refused_by_verification(seen.server, "unable to get local issuer certificate")
    assert not isinstance(seen.client, frozenset)
    seen = handshake(tmp_path, ca, intruder, pair_of(tls_dir, "driver"))
    assert refused_by_verification(seen.client, "unable to get local issuer certificate")


def test_an_expired_certificate_is_refused(tls_dir: Path, tmp_path: Path) -> None:
    ca = (tls_dir / "ca.pem").read_bytes()
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=10)
    expired = certs.issue(certs.load_ca(tls_dir), "old", ["driver"], days=1, not_before=long_ago)
    seen = handshake(tmp_path, ca, pair_of(tls_dir, "head"), expired)
    assert refused_by_verification(seen.server, "certificate has expired")
    assert not isinstance(seen.client, frozenset)


# -- refusing to overwrite, issuing more -----------------------------------------------------


def test_an_existing_ca_is_replaced_only_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "tls"
    folder.mkdir()
    (folder / "notes.txt").write_text("a directory without a CA is fine")
    assert dista_certs(str(folder)) == 0
    first = (folder / "ca.pem").read_bytes()
    capsys.readouterr()
    assert dista_certs(str(folder)) == 2
    assert "--force" in capsys.readouterr().err
    assert (folder / "ca.pem").read_bytes() == first
    assert dista_certs(str(folder), "--force") == 0
    assert (folder / "ca.pem").read_bytes() != first
    assert (folder / "notes.txt").exists()


def test_issue_adds_a_pair_from_the_existing_ca(
    tls_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dista_certs(str(tls_dir), "--issue", "status", "--roles", "observer") == 0
    assert dista_certs(str(tls_dir), "--issue", "boss", "--roles", "admin,stop") == 0
    assert "status.pem" in capsys.readouterr().out
    assert stat.S_IMODE((tls_dir / "status.key").stat().st_mode) == 0o600
    ca = (tls_dir / "ca.pem").read_bytes()
    head = pair_of(tls_dir, "head")
    seen = handshake(tmp_path, ca, head, pair_of(tls_dir, "status"))
    assert seen.server == frozenset({"observer"})  # read-only: no stop
    seen = handshake(tmp_path, ca, head, pair_of(tls_dir, "boss"))
    assert seen.server == frozenset({"admin", "stop"})
    # The pair exists now: replacing it takes --force.
    assert dista_certs(str(tls_dir), "--issue", "status", "--roles", "observer") == 2
    assert "--force" in capsys.readouterr().err
    assert dista_certs(str(tls_dir), "--issue", "status", "--roles", "observer", "--force") == 0


def test_issue_needs_a_ca(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert dista_certs(str(tmp_path), "--issue", "status", "--roles", "observer") == 2
    assert f"dista certs {tmp_path}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--issue", "x", "--roles", "observer,wizard"], "unknown role 'wizard'"),
        (["--issue", "x"], "--issue needs --roles"),
        (["--roles", "admin"], "--roles goes with --issue"),
        (["--issue", "ca", "--roles", "admin"], "not 'ca'"),
        (["--issue", "../x", "--roles", "admin"], "bad certificate name"),
        (["--san", "not a name!"], "neither an IP address nor a DNS name"),
        (["--days", "0"], "1 to 36500"),
        (["--days", "99999"], "1 to 36500"),
    ],
)
def test_bad_arguments_exit_2_saying_what_to_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    try:
        code = dista_certs(str(tmp_path), *args)
    except SystemExit as e:  # argparse's own errors
        code = int(str(e.code))
    assert code == 2
    err = capsys.readouterr().err
    assert says in err
    if "unknown role" in says:
        assert all(word in err for word in ROLE_WORDS)
    assert list(tmp_path.iterdir()) == []  # checked before anything is written


def test_a_certificate_ends_no_later_than_its_ca() -> None:
    from cryptography import x509

    ca = certs.make_ca("short-lived", days=10)
    naive_start = dt.datetime.now() - dt.timedelta(days=1)  # taken as UTC
    for start in (None, naive_start):
        pem, _ = certs.issue(ca, "w", ["worker"], days=365, not_before=start)
        end = x509.load_pem_x509_certificate(pem).not_valid_after_utc
        assert end == ca.certificate.not_valid_after_utc


def test_the_api_names_the_valid_roles() -> None:
    ca = certs.make_ca("test", days=1)
    with pytest.raises(ValueError, match="admin, driver, head, observer, stop, worker"):
        certs.issue(ca, "x", ["wizard"])
    with pytest.raises(ValueError, match="no role given"):
        certs.issue(ca, "x", [])


# -- reading roles, and running without cryptography -----------------------------------------


def test_roles_of_reads_ou_words_and_ignores_the_rest() -> None:
    subject = (
        (("organizationalUnitName", "worker"),),
        (("organizationalUnitName", "Engineering"), ("organizationalUnitName", "stop")),
        (("commonName", "admin"),),
    )
    assert roles_of({"subject": subject}) == {"worker", "stop"}
    assert roles_of({}) == roles_of(None) == frozenset()


def test_without_cryptography_it_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "cryptography", None)  # import fails as if missing
    assert dista_certs(str(tmp_path / "tls")) == 2
    assert "pip install 'dista[tls]'" in capsys.readouterr().err
    assert not (tmp_path / "tls").exists()


def test_the_command_loads_without_cryptography_and_explains_itself() -> None:
    code = (
        "import sys, argparse; sys.modules['cryptography'] = None\n"
        "from dista_runtime._tls import certs\n"
        "top = argparse.ArgumentParser(prog='dista')\n"
        "certs.add_parser(top.add_subparsers())\n"
        "top.parse_args(['certs', '--help'])\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())  # argparse wraps the help to the terminal
    assert "--tls-dir DIR" in out and "DISTA_TLS_DIR=DIR" in out
    assert "dista[tls]" in out
