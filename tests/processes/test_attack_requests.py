"""Bounded work per request against real processes (issue 24, attack 5), plain TCP.

A timeline flood: after 5,000 finished tasks, an observer writes 1,235 timeline requests
at once and reads one answer; another driver's gets stay quick, the head's memory stays
near its idle size, and it is idle soon after the observer goes. A partial-frame flood:
with the head's cap at 64 MiB, connections announcing 48 MiB task frames get one in
progress and the rest refused with an error frame naming the cap; the head holds about
what that one sent.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

import dista_proto as dp
from dista_proto import frame as F
from tests.processes.support.hostile_cluster import ROOT, Cluster
from tests.processes.support.hostile_raw import RawPeer

pytestmark = pytest.mark.timeout(120)
MIB = 1 << 20

_DRIVER = """
import sys, time
import dista_runtime as dista
from tests.processes.support.hostile_tasks import add
dista.init(sys.argv[1])
if sys.argv[2] == "fill":
    assert dista.get([add.remote(i, 1) for i in range(5000)])[-1] == 5000
    print("filled", flush=True)
else:
    print("ready", flush=True)
    sys.stdin.readline()
    worst = 0.0
    for _ in range(40):
        t = time.monotonic()
        assert add.remote(1, 2).get(timeout=30) == 3
        worst = max(worst, time.monotonic() - t)
    print(worst, flush=True)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("requests"), workers=1, head_args=("--partial-cap", "64MiB")
    )
    try:
        c.wait_for_workers()
        yield c
    finally:
        c.close()


def _driver(cluster: Cluster, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _DRIVER, cluster.address, mode],
        env=cluster.env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_a_timeline_flood_is_answered_as_read_and_dropped_with_the_observer(
    cluster: Cluster,
) -> None:
    fill = _driver(cluster, "fill")
    assert fill.communicate(timeout=90)[0].strip() == "filled"
    head = psutil.Process(cluster.head.pid)
    idle = head.memory_info().rss
    other = _driver(cluster, "gets")
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "ready"
        cpu = sum(head.cpu_times()[:2])
        attacker = RawPeer(cluster.host, cluster.port)
        attacker.send(dp.Hello(F.ROLE_OBSERVER, 0), *[dp.Timeline()] * 1235)
        reply = attacker.next(10.0)
        assert isinstance(reply, dp.Timeline) and reply.records is not None
        assert len(reply.records) == 5000
        assert other.stdin is not None
        other.stdin.write("go\n")
        other.stdin.flush()
        worst = float(other.stdout.readline())
        assert worst < 1.0, f"another driver's get took {worst:.2f} s during the flood"
        assert head.memory_info().rss < idle + 64 * MIB
        attacker.close()
        time.sleep(1.0)
        before = sum(head.cpu_times()[:2])
        time.sleep(1.0)
        assert sum(head.cpu_times()[:2]) - before < 0.3, "the head still works for the observer"
        assert sum(head.cpu_times()[:2]) - cpu < 10.0
    finally:
        other.kill()
        other.communicate()
    assert not cluster.deaths(), cluster.why()


def test_large_frames_past_the_partial_cap_are_refused_naming_it(cluster: Cluster) -> None:
    head = psutil.Process(cluster.head.pid)
    idle = head.memory_info().rss
    header = struct.Struct("<IBQQ")
    peers = [RawPeer(cluster.host, cluster.port) for _ in range(4)]
    errors: list[str] = []
    for i, peer in enumerate(peers):
        number = peer.hello_driver()
        frame = header.pack(F.HEADER + 48 * MIB, F.KIND_TASK, number << 40 | 1, 7)
        try:
            peer.sock.sendall(frame + bytes(8 * MIB))
        except OSError:
            pass
        if i:
            event = peer.next(10.0)
            assert isinstance(event, dp.Error)
            errors.append(event.message)
    assert len(errors) == 3
    assert all("past its cap of 67108864 bytes" in e for e in errors), errors
    assert head.memory_info().rss < idle + 40 * MIB
    for peer in peers:
        peer.close()
    assert not cluster.deaths(), cluster.why()
