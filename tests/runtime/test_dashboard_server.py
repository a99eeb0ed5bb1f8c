"""The dashboard's server over real HTTP on 127.0.0.1: page, assets, JSON, events, metrics."""

from __future__ import annotations

import datetime
import http.client
import json
import re
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dista_runtime._dashboard import Board, Server, serve
from tests.support.fake_board import FakeCluster, task_id

T0 = 1_700_000_000_000_000_000
SECOND = 1_000_000_000


@pytest.fixture
def fake() -> FakeCluster:
    return FakeCluster(workers=4, seed=3)


@pytest.fixture
def board(fake: FakeCluster) -> Board:
    board = Board()
    board.update(fake.snapshot(T0), fake.rows(200, T0 - 60 * SECOND, T0))
    return board


@pytest.fixture
def server(board: Board) -> Iterator[Server]:
    server = serve(board, "127.0.0.1", 0, heartbeat_s=0.1)
    yield server
    server.close()


def get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10, context=context) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


def test_the_page_and_its_assets_load(server: Server) -> None:
    assert server.url == f"http://127.0.0.1:{server.port}/" and server.port > 0
    status, kind, page = get(server.url)
    assert (status, kind) == (200, "text/html; charset=utf-8")
    assets = re.findall(rb'(?:src|href)="(/static/[^"]+)"', page)
    assert {b"/static/dashboard.js", b"/static/gantt.js", b"/static/dashboard.css"} <= set(assets)
    for asset in assets:
        status, kind, body = get(server.url + asset.decode()[1:])
        assert status == 200 and body, asset
        assert kind.startswith(("text/javascript", "text/css")), asset
    # No asset from anywhere else: the page works without internet.
    assert not re.findall(rb'(?:src|href)="(?:https?:)?//', page)
    for ids in (
        b'id="workers"',
        b'id="gantt"',
        b'id="queues"',
        b'id="objects"',
        b'id="actors"',
        b'id="progress"',
    ):
        assert ids in page


@pytest.mark.parametrize(
    "path",
    ["nope", "static/", "static/../server.py", "static/missing.js", "static/%2e%2e/board.py"],
)
def test_unknown_paths_are_404(server: Server, path: str) -> None:
    assert get(server.url + path)[0] == 404


def test_api_state_is_the_view_model(server: Server, board: Board, fake: FakeCluster) -> None:
    kept = len(board.rows_after(0)[0])
    status, kind, body = get(server.url + "api/state")
    assert (status, kind) == (200, "application/json")
    state = json.loads(body)
    assert [w["address"] for w in state["workers"]] == fake.addresses
    assert state["rows"]["count"] == kept > 150 and state["up"] is True
    assert "model.train_step" in state["names"]
    rows = json.loads(get(server.url + "api/rows?after=150")[2])
    assert len(rows["rows"]) == kept - 150 and rows["next"] == kept


class Stream:
    """A reader of /events: each `next` is one event's (name, decoded data)."""

    def __init__(self, server: Server) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        self.conn.request("GET", "/events")
        self.answer = self.conn.getresponse()
        assert self.answer.status == 200
        assert self.answer.headers["Content-Type"] == "text/event-stream"

    def next(self) -> tuple[str, object]:
        name, data = "", b""
        while True:
            line = self.answer.fp.readline()
            assert line, "the stream ended"
            if line == b"\n" and name:
                return name, json.loads(data)
            if line.startswith(b"event: "):
                name = line[7:].strip().decode()
            elif line.startswith(b"data: "):
                data += line[6:]

    def close(self) -> None:
        self.answer.close()
        self.conn.close()


def test_events_send_the_state_then_only_what_changed(
    server: Server, board: Board, fake: FakeCluster
) -> None:
    kept = len(board.rows_after(0)[0])
    stream = Stream(server)
    try:
        name, state = stream.next()
        assert name == "state" and state["version"] == board.version  # type: ignore[index]
        name, rows = stream.next()
        assert name == "rows" and rows["first"] is True  # type: ignore[index]
        assert len(rows["rows"]) == kept and rows["next"] == kept  # type: ignore[index]
        new = fake.rows(8, T0, T0 + SECOND)
        board.update(fake.snapshot(T0 + SECOND), new)
        name, state = stream.next()
        assert name == "state" and state["version"] == board.version  # type: ignore[index]
        name, rows = stream.next()
        assert name == "rows" and rows["first"] is False  # type: ignore[index]
        assert [r[7] for r in rows["rows"]] == [hex(r.object_id) for r in new]  # type: ignore[index]
        board.unreachable("connection refused")
        name, state = stream.next()
        assert state["up"] is False and state["why"] == "connection refused"  # type: ignore[index]
    finally:
        stream.close()


def test_a_page_that_goes_away_frees_its_thread(server: Server) -> None:
    before = threading.active_count()
    stream = Stream(server)
    stream.next()
    assert server.streams == 1
    stream.close()
    deadline = time.monotonic() + 5
    while server.streams and time.monotonic() < deadline:
        time.sleep(0.02)  # two heartbeats: the first write after a close may still succeed
    assert server.streams == 0
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert threading.active_count() <= before


def test_close_ends_open_streams(board: Board) -> None:
    server = serve(board, "127.0.0.1", 0, heartbeat_s=30)
    stream = Stream(server)
    stream.next()
    started = time.monotonic()
    server.close()
    deadline = time.monotonic() + 5
    while server.streams and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.streams == 0 and time.monotonic() - started < 5
    stream.close()


def test_metrics_are_the_snapshots_numbers(
    server: Server, board: Board, fake: FakeCluster
) -> None:
    fake.lose(fake.addresses[3])
    board.update(fake.snapshot(T0 + SECOND), [])
    status, kind, body = get(server.url + "metrics")
    assert status == 200 and kind.startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }
    assert samples["dista_head_up", ()] == 1
    train = fake.done[task_id("model.train_step")]
    label = (("function", "model.train_step"),)
    assert samples["dista_tasks_submitted_total", label] == train[0] + 30
    assert samples["dista_tasks_failed_total", label] == train[2]
    assert samples["dista_tasks_retried_total", label] == 1
    assert ("dista_tasks_finished_total", (("function", hex(task_id("<unnamed>"))),)) in samples
    assert samples["dista_workers", (("state", "lost"),)] == 1
    assert samples["dista_workers", (("state", "draining"),)] == 0  # worker 5 of only 3
    assert samples["dista_workers", (("state", "ready"),)] == 3
    assert samples["dista_checkpoint_bytes_total", ()] == 48 << 20
    assert samples["dista_checkpoint_seconds_total", ()] == 3.25
    assert samples["dista_frames_refused_total", ()] == 2
    assert samples["dista_head_restarts_total", ()] == 0
    assert samples["dista_actor_calls_total", ()] == 6000
    queued = sum(v for (n, labels), v in samples.items() if n == "dista_queue_tasks")
    assert queued == samples["dista_tasks_pending", ()]
    first = fake.addresses[0]
    worker = f"{first} (pid {fake.pids[first]})"
    assert ("dista_worker_bytes", (("worker", worker),)) in samples
    assert ("dista_driver_objects", (("driver", "driver 1 (10.0.9.1, pid 900)"),)) in samples
    board.unreachable("gone")
    families = list(text_string_to_metric_families(get(server.url + "metrics")[2].decode()))
    assert [(f.name, f.samples[0].value) for f in families] == [("dista_head_up", 0)]


def test_metrics_without_prometheus_client_say_what_to_install(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.setitem(sys.modules, "dista_runtime._dashboard.metrics", None)
    status, _, body = get(server.url + "metrics")
    assert status == 503 and b"pip install 'dista[dashboard]'" in body


def self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_https_with_an_ssl_context(board: Board, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = serve(board, "127.0.0.1", 0, context)
    try:
        assert server.url.startswith("https://127.0.0.1:")
        client = ssl.create_default_context(cafile=str(cert))
        status, _, body = get(server.url + "api/state", client)
        assert status == 200 and json.loads(body)["up"] is True
        with pytest.raises(OSError):
            get(server.url.replace("https:", "http:") + "api/state")  # plain HTTP: no answer
        assert get(server.url, client)[0] == 200  # the server still serves after that
    finally:
        server.close()
