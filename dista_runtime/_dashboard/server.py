"""The dashboard's web server: the page, its assets, a live event stream, JSON and metrics.

The standard library's `ThreadingHTTPServer`, a daemon thread per request: the dashboard
serves a handful of people, and a thread per open page is simpler than a second event loop
beside the watcher's. Routes:

    /               the page                   /static/NAME   its assets (shipped in the package)
    /events         Server-Sent Events: "state" (the view model) on connect and on each
                    change, "rows" (the timeline: the kept window once, then only new rows),
                    and a comment every ``heartbeat_s`` so proxies keep the stream open and a
                    page that went away is noticed (its write fails, its thread ends)
    /api/state      the view model as JSON     /api/rows?after=N   rows from sequence N
    /metrics        Prometheus text (503 without prometheus-client)
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .board import Board

__all__ = ["Server", "serve"]

log = logging.getLogger("dista.dashboard")

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}
#: The page loads nothing from elsewhere (no CDN, no internet), and says so to the browser.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
#: Rows per "rows" event: the first window comes in pieces so the page draws early.
ROWS_PER_EVENT = 20_000
NO_METRICS = b"metrics need prometheus-client: pip install 'dista[dashboard]'\n"


def _assets() -> dict[str, bytes]:
    folder = resources.files(__package__ or "dista_runtime._dashboard").joinpath("static")
    return {item.name: item.read_bytes() for item in folder.iterdir() if item.is_file()}


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a page left open never holds the process

    def __init__(
        self,
        address: tuple[str, int],
        board: Board,
        heartbeat_s: float,
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.board = board
        self.heartbeat_s = heartbeat_s
        self.ssl_context = ssl_context
        self.assets = _assets()
        self.closing = threading.Event()
        self.streams = 0
        self.streams_lock = threading.Lock()
        super().__init__(address, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The TLS handshake happens here, on the request's own thread: a client that stalls
        # in it holds that thread only, never the accepting one.
        if self.ssl_context is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(_Handler.timeout)
        # The TLS socket takes the connection's descriptor over: the server closes the
        # plain one it knows of, so this one is closed here.
        with self.ssl_context.wrap_socket(request, server_side=True) as tls:
            super().finish_request(tls, client_address)
            try:
                tls.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the client went first

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Called inside the server's `except`: the exception is the one being handled.
        log.debug("dashboard request from %s failed", client_address, exc_info=sys.exc_info())


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    timeout = 30  # seconds a read or write may block: a stuck client is dropped
    server_version = "dista-dashboard"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path = url.path
        if path in ("/", "/index.html"):
            self._asset("index.html")
        elif path.startswith("/static/"):
            self._asset(path.removeprefix("/static/"))
        elif path == "/events":
            self._events()
        elif path == "/api/state":
            self._send(200, "application/json", self.server.board.state_json()[1])
        elif path == "/api/rows":
            after = parse_qs(url.query).get("after", ["0"])[0]
            seq = int(after) if after.isdigit() else 0
            rows, next_seq = self.server.board.rows_after(seq)
            body = json.dumps({"rows": rows, "next": next_seq}, separators=(",", ":"))
            self._send(200, "application/json", body.encode())
        elif path == "/metrics":
            self._metrics()
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _asset(self, name: str) -> None:
        # Only the files shipped in static/ by name: no path from the URL reaches the disk.
        body = self.server.assets.get(name)
        suffix = name[name.rfind(".") :] if "." in name else ""
        if body is None or suffix not in CONTENT_TYPES:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")
        else:
            self._send(200, CONTENT_TYPES[suffix], body)

    def _metrics(self) -> None:
        try:
            from .metrics import metrics_text
        except ImportError:  # the `dashboard` extra is not installed
            self._send(503, "text/plain; charset=utf-8", NO_METRICS)
            return
        self._send(
            200, "text/plain; version=0.0.4; charset=utf-8", metrics_text(self.server.board)
        )

    def _events(self) -> None:
        server = self.server
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Accel-Buffering", "no")  # nginx: pass each event on at once
        self.end_headers()
        with server.streams_lock:
            server.streams += 1
        try:
            self.wfile.write(b"retry: 2000\n\n")
            version, seq = self._send_changes(-1, -1)
            while not server.closing.is_set():
                now = server.board.wait(version, server.heartbeat_s)
                if server.closing.is_set():
                    break
                if now == version:
                    self.wfile.write(b": alive\n\n")
                else:
                    version, seq = self._send_changes(version, seq)
        except OSError:
            pass  # the page went away (closed, reloaded): its thread ends here
        finally:
            with server.streams_lock:
                server.streams -= 1

    def _send_changes(self, version: int, seq: int) -> tuple[int, int]:
        """Send the state if it changed since ``version``, then the rows from ``seq`` up to
        those it covers (so the page can name every row it gets); ``seq`` -1 on connect:
        the whole kept window, its first event marked ``first`` (even empty) so a page that
        reconnected starts its chart afresh."""
        board = self.server.board
        now, state, until = board.state_json()
        if now != version:
            self._event("state", state)
        first = seq < 0
        seq = max(seq, 0)
        while True:
            rows, next_seq = board.rows_after(seq, ROWS_PER_EVENT, until)
            if rows or first:
                body = {"rows": rows, "next": next_seq, "first": first}
                self._event("rows", json.dumps(body, separators=(",", ":")).encode())
            if not rows:
                return now, next_seq
            seq, first = next_seq, False

    def _event(self, name: str, data: bytes) -> None:
        self.wfile.write(b"event: " + name.encode() + b"\ndata: " + data + b"\n\n")


class Server:
    """A running dashboard server; `close` stops it and ends every open stream."""

    def __init__(self, httpd: _HTTPServer, thread: threading.Thread) -> None:
        self._httpd = httpd
        self._thread = thread

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = str(self._httpd.server_address[0])
        scheme = "https" if self._httpd.ssl_context is not None else "http"
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{self.port}/"

    @property
    def streams(self) -> int:
        """Event streams open now (one per page watching)."""
        with self._httpd.streams_lock:
            return self._httpd.streams

    def close(self) -> None:
        self._httpd.closing.set()
        self._httpd.board.wake()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def serve(
    board: Board,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None = None,
    *,
    heartbeat_s: float = 15.0,
) -> Server:
    """Serve ``board`` on ``host:port`` (0: any free port) from a daemon thread; HTTPS
    when given an ``ssl_context``. The caller decides who may connect: bind loopback
    unless the context authenticates clients."""
    httpd = _HTTPServer((host, port), board, heartbeat_s, ssl_context)
    # Polling for `shutdown` every 0.1 s (not the default 0.5): `close` returns that soon.
    thread = threading.Thread(
        target=httpd.serve_forever, args=(0.1,), name="dista-dashboard", daemon=True
    )
    thread.start()
    return Server(httpd, thread)
