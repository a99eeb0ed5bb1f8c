"""The image's health check: is this container's Dista role doing its job, seen from inside.

    python healthcheck.py [ROLE]    # exit 0 healthy, 1 not (ROLE: head, worker, dashboard)

The role and its ports come from PID 1's command line (`dista head --port 7420`, also behind
a wrapper such as ``tini``); ROLE overrides the role. What each role must show:

- head: a socket listening on its port (default 7420). Read from the kernel's table, not
  dialed: a bare TCP connect to a TLS head is a failed handshake, and the head logs each.
- worker: an established connection to its head's port: it joined, or rejoined after a
  head restart (while it waits for a head, it is not healthy yet).
- dashboard: an HTTP(S) GET of / answers 200. With DISTA_TLS_DIR the dashboard serves
  HTTPS to the cluster's certificates only, so this shows its observer pair, as a browser
  holding one would.

Standard library only: it runs in the image as it is, and in Kubernetes exec probes.
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.request
from pathlib import Path

ROLES = ("head", "worker", "dashboard")
LISTEN, ESTABLISHED = "0A", "01"


def command_line() -> list[str]:
    raw = Path("/proc/1/cmdline").read_bytes()
    return [part.decode() for part in raw.split(b"\0") if part]


def option(args: list[str], name: str, default: str) -> str:
    """The value of ``--name VALUE`` or ``--name=VALUE`` in ``args``, else ``default``."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def sockets(state: str) -> list[tuple[int, int]]:
    """(local port, remote port) of this network namespace's TCP sockets in ``state``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == state:
                found.append((int(fields[1].split(":")[1], 16), int(fields[2].split(":")[1], 16)))
    return found


def dashboard_answers(port: int) -> bool:
    tls_dir = os.environ.get("DISTA_TLS_DIR")
    context = None
    if tls_dir:
        context = ssl.create_default_context(cafile=f"{tls_dir}/ca.pem")
        context.check_hostname = False  # identity is the cluster CA's chain, not a name
        context.load_cert_chain(f"{tls_dir}/observer.pem", f"{tls_dir}/observer.key")
    url = f"{'https' if context else 'http'}://127.0.0.1:{port}/"
    with urllib.request.urlopen(url, context=context, timeout=5) as answer:
        return bool(answer.status == 200)


def healthy(role: str, args: list[str]) -> bool:
    if role == "head":
        port = int(option(args, "--port", "7420"))
        return any(local == port for local, _ in sockets(LISTEN))
    if role == "worker":
        head = option(args, "--head", os.environ.get("DISTA_ADDRESS", "127.0.0.1:7420"))
        if head.startswith("unix:"):
            return True  # a head on this machine: nothing to see in the TCP table
        port = int(head.rsplit(":", 1)[1])
        return any(remote == port for _, remote in sockets(ESTABLISHED))
    return dashboard_answers(int(option(args, "--port", "8265")))


def main() -> int:
    args = command_line()
    role = sys.argv[1] if len(sys.argv) > 1 else next((a for a in args if a in ROLES), "")
    if role not in ROLES:
        print(f"healthcheck: no Dista role in {args!r} (give one of {', '.join(ROLES)})")
        return 1
    try:
        ok = healthy(role, args)
    except (OSError, ValueError) as exc:
        print(f"healthcheck: {role}: {exc}")
        return 1
    print(f"healthcheck: {role} {'healthy' if ok else 'not healthy'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
