"""A gevent WSGI service whose requests run Dista tasks, in a monkey-patched process.

    python examples/gevent_wsgi.py --head HOST:PORT --port 8080
    curl 'localhost:8080/square?n=7'   # {"n": 7, "square": 49}, computed on a worker
    curl 'localhost:8080/square?n=7&sleep=2'   # the same, the task taking 2 s
    curl 'localhost:8080/ping'         # answers at once, even while tasks run

The process patches itself first, as gunicorn's gevent worker does, and joins the cluster
with ``dista_gevent.connect(...)`` on the hub its request greenlets share: a handler's
``ref.get()`` suspends only that request's greenlet, and the server goes on answering.
Without ``--head`` (and no ``DISTA_ADDRESS``) it starts a local cluster first. SIGTERM or
Ctrl-C stops the server, lets the requests in flight finish, and leaves the cluster.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()  # first, before anything imports socket or threading

import argparse
import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

import dista_gevent
import gevent
from gevent.event import Event
from gevent.pool import Pool
from gevent.pywsgi import WSGIServer

import dista_runtime as dista


@dista.task
def square(n: int, seconds: float = 0.0) -> int:
    """``n * n``, taking ``seconds`` first (as real work would)."""
    time.sleep(seconds)
    return n * n


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    query = parse_qs(environ.get("QUERY_STRING", ""))
    path = environ.get("PATH_INFO", "")
    if path == "/square":
        n = int(query.get("n", ["0"])[0])
        seconds = float(query.get("sleep", ["0"])[0])
        answer: object = {"n": n, "square": square.remote(n, seconds).get(timeout=60)}
    elif path == "/ping":
        answer = {"ok": True}
    else:
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]
    body = json.dumps(answer).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


def cluster(head: str | None, workers: int) -> contextlib.AbstractContextManager[object]:
    if head:
        return dista_gevent.connect(head)
    return dista.init(workers=workers, loop="gevent")  # the same hub, a local cluster


def main(head: str | None, host: str, port: int, workers: int) -> None:
    with cluster(head, workers):
        # Handlers in a pool: `stop` waits for the pool's requests in flight to finish.
        server = WSGIServer((host, port), app, log=None, spawn=Pool(1000))
        server.start()
        print(f"serving on http://{host}:{server.server_port}", flush=True)
        stopping = Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            gevent.signal_handler(sig, stopping.set)
        stopping.wait()
        server.stop(timeout=10)  # the requests in flight finish first


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--head", default=os.environ.get("DISTA_ADDRESS"), help="HOST:PORT")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="0: any free port")
    parser.add_argument("--workers", type=int, default=2, help="for a local cluster")
    args = parser.parse_args()
    main(args.head, args.host, args.port, args.workers)
