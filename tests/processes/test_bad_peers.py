"""Peers that break the protocol, against a real head: bounded memory, one log line each.

A 21-byte header announcing 1 GiB (a hello, or a task before any hello) used to make the
head allocate and fault in 1 GiB within seconds; four such connections took it to 3.6 GiB.
Now the head refuses each from its header, stays small, and serves drivers as before. And a
head logs one line for a bad peer, naming it and the reason, never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

import dista_proto as dp
from dista_proto import frame as F
from dista_runtime.logs import message_of
from tests.support.cluster import CliHead, assert_gone

ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
HELLO_LIMIT = 58  # a resume hello with its secret (docs/wire.md)
#: How far the head's resident memory may grow under the attack.
MOST_GROWTH = 100 << 20
LINE = re.compile(
    r"^dista head: refused peer 127\.0\.0\.1:(\d+) \(link \d+\): protocol error: (.+)$"
)

DRIVER = textwrap.dedent(
    """
    import sys
    import dista_runtime as dista
    from tests.support import tasks

    with dista.init(sys.argv[1]):
        refs = [tasks.add.remote(i, 1) for i in range(20)]
        assert dista.get(refs, timeout=60) == [i + 1 for i in range(20)], "wrong values"
        del refs
        print("ok")
    """
)


def header(kind: int, length: int) -> bytes:
    return struct.pack("<IBQQ", length, kind, 1, 0)


def answer(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything the head sends ``sock`` until it closes it."""
    sock.settimeout(timeout)
    chunks = []
    while chunk := sock.recv(1 << 16):
        chunks.append(chunk)
    return b"".join(chunks)


def refusal(data: bytes) -> str:
    """The message of the one error frame in ``data``."""
    event = dp.decode_event(data, from_head=True)
    assert isinstance(event, dp.Error), event
    return event.message


def test_four_1_gib_headers_leave_a_real_head_small_and_serving() -> None:
    cluster = CliHead(workers=1)
    socks: list[socket.socket] = []
    try:
        host, port = cluster.address.rsplit(":", 1)
        head = psutil.Process(cluster.head.pid)
        before = head.memory_info().rss
        attacks = [header(F.KIND_HELLO, GIB)] * 4 + [header(F.KIND_TASK, GIB)] * 4
        for attack in attacks:
            sock = socket.create_connection((host, int(port)), timeout=10)
            socks.append(sock)
            sock.sendall(attack)
        peak = before
        deadline = time.monotonic() + 2.0  # the old head faulted in 1 GiB in about this
        while time.monotonic() < deadline:
            peak = max(peak, head.memory_info().rss)
            time.sleep(0.05)
        messages = [refusal(answer(sock)) for sock in socks]
        peak = max(peak, head.memory_info().rss)
        assert peak - before < MOST_GROWTH, f"the head grew by {(peak - before) >> 20} MiB"
        for message in messages[:4]:
            assert message.startswith("protocol error: hello: ")
            assert str(GIB) in message and f"limit of {HELLO_LIMIT}" in message
        for message in messages[4:]:
            assert message == "protocol error: the first frame must be hello, not task"
        # The head still serves a driver, and its worker.
        driver = subprocess.run(
            [sys.executable, "-c", DRIVER, cluster.address],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=cluster_env(),
            check=False,
        )
        assert driver.returncode == 0 and driver.stdout.strip() == "ok", driver.stderr
        # One line per bad peer on the head's stderr, no traceback.
        cluster.head.terminate()
        cluster.head.wait(10)
        assert cluster.head.stderr is not None
        log = cluster.head.stderr.read()
        assert "Traceback" not in log, log
        lines = [m for line in log.splitlines() if (m := LINE.match(message_of(line)))]
        assert len(lines) == 8, log
        ports = {sock.getsockname()[1] for sock in socks}
        assert {int(m.group(1)) for m in lines} == ports
    finally:
        for sock in socks:
            sock.close()
        cluster.close()
    assert_gone(cluster.pids())


def cluster_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))


# -- one line, no traceback -----------------------------------------------------------------------

GARBAGE = b"garbage!" * 8  # "garb" announces 1.6 GB: over MAX_FRAME
HELLO_THEN_BAD = (
    dp.encode_event(dp.Hello(F.ROLE_DRIVER, 0xABC)) + dp.encode_event(dp.Stats()) + header(0, 17)
)


async def _bad_peers(payloads: list[bytes]) -> list[tuple[int, bytes]]:
    """Each payload from its own raw connection to an in-process head: (port, answer)."""
    from dista_asyncio import AsyncioLoop

    from dista_runtime._hosts.head import start_head

    server = start_head(AsyncioLoop(asyncio.get_running_loop()), "127.0.0.1", 0)
    out = []
    try:
        host, port = server.address
        for payload in payloads:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(payload)
            data = await asyncio.wait_for(reader.read(), 10)  # until the head closes it
            out.append((writer.get_extra_info("sockname")[1], data))
            writer.close()
            await writer.wait_closed()
        # A good driver after them: welcomed.
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(dp.encode_event(dp.Hello(F.ROLE_DRIVER, 0xABC)))
        welcome = await asyncio.wait_for(reader.readexactly(37), 10)
        assert isinstance(dp.decode_event(welcome, from_head=True), dp.Welcome)
        writer.close()
        await writer.wait_closed()
    finally:
        assert server.listener is not None
        server.listener.close()
        server.close_all()
        await asyncio.sleep(0.05)  # let the closed transports report their loss
    return out


def test_a_bad_peer_gets_one_warning_line_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG):
        answers = asyncio.run(_bad_peers([GARBAGE, HELLO_THEN_BAD]))
    records = [r for r in caplog.records if r.name.startswith("dista")]
    assert [r.name for r in records] == ["dista.head", "dista.head"], caplog.text
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in records)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert "Traceback" not in caplog.text
    for record, (port, data) in zip(records, answers, strict=True):
        match = LINE.match(record.getMessage())
        assert match is not None, record.getMessage()
        assert int(match.group(1)) == port
        assert f"protocol error: {match.group(2)}" == refusal(data)
    assert "MAX_FRAME" in records[0].getMessage()
    assert "unknown frame kind 0" in records[1].getMessage()


def test_peer_names() -> None:
    from dista_runtime._net.streams import peer_name

    assert peer_name(("127.0.0.1", 54321)) == "127.0.0.1:54321"
    assert peer_name(("::1", 7420, 0, 0)) == "[::1]:7420"
    assert peer_name("/tmp/dista/head.sock") == "unix:/tmp/dista/head.sock"
    assert peer_name(b"") == peer_name("") == "(a local socket)"
    assert peer_name(None) == "(unknown address)"
