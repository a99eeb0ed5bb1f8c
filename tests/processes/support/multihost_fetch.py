"""A raw fetcher for the multi-host test: ``python -m tests.processes.support.multihost_fetch CERT
OBJECT HOST:PORT...`` fetches OBJECT from each object server, in TLS with the pair
``CERT.pem``/``CERT.key`` of ``DISTA_TLS_DIR``, and prints one JSON line: per server, the
kind of the answer (``result``, ``part``, ``error``, or ``closed``), its error text, and the
seconds it took."""

from __future__ import annotations

import json
import os
import socket
import ssl
import sys
import time

from dista_proto import frame as F


def fetch(address: str, context: ssl.SSLContext, oid: int) -> dict[str, object]:
    host, port = address.rsplit(":", 1)
    body = bytes([F.KIND_FETCH]) + oid.to_bytes(8, "little") + bytes(8)
    body += (1 << 20).to_bytes(8, "little")  # parts of 1 MiB
    started = time.monotonic()
    with (
        socket.create_connection((host, int(port)), timeout=20) as raw,
        context.wrap_socket(raw) as sock,
    ):
        sock.sendall(len(body).to_bytes(4, "little") + body)
        head = b""
        while len(head) < 21:
            chunk = sock.recv(21 - len(head))
            if not chunk:
                return {"kind": "closed", "seconds": time.monotonic() - started}
            head += chunk
        kind = {F.KIND_RESULT: "result", F.KIND_PART: "part", F.KIND_ERROR: "error"}
        out: dict[str, object] = {"kind": kind.get(head[4], str(head[4]))}
        out["seconds"] = round(time.monotonic() - started, 2)
        if head[4] == F.KIND_ERROR:
            length = int.from_bytes(head[:4], "little") - 17
            text = head[21:]
            while len(text) < length:
                text += sock.recv(length - len(text))
            out["error"] = text.decode(errors="replace")
        return out


def main() -> int:
    cert, oid, servers = sys.argv[1], int(sys.argv[2], 0), sys.argv[3:]
    folder = os.environ["DISTA_TLS_DIR"]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.load_verify_locations(os.path.join(folder, "ca.pem"))
    context.load_cert_chain(
        os.path.join(folder, f"{cert}.pem"), os.path.join(folder, f"{cert}.key")
    )
    print(json.dumps({server: fetch(server, context, oid) for server in servers}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
