"""The embedded local cluster: workers as child processes, the head in this process.

The head runs on the driver's own I/O loop, as Dask's local cluster runs its scheduler in
the client's process: one process fewer to start and to keep in memory (about 26 MiB), and
no socket between the driver and the head (an in-memory link on that loop). The driver binds the head's listening
socket before it starts the workers, so they connect into the backlog while this process
brings the head up. It is a Unix socket in a private directory where the platform has them
(`dista_runtime._address` says why), else loopback TCP on a free port. Children never outlive the parent: each
asks the kernel for SIGKILL when its parent dies (Linux), the head stops itself and its
workers when its last driver disconnects, and `close` waits for them, then kills what is
left. Children run in their own session so a terminal's Ctrl-C reaches only the parent,
which tears down in order.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from ._address import UNIX, format_head

__all__ = ["LocalCluster"]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # Workers import the driver's task modules by name: give them the driver's path.
    paths = [p or os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


class LocalCluster:
    def __init__(self, workers: int, modules: list[str], worker_threads: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"a local cluster needs at least one worker, not {workers}")
        self._dir: str | None = None
        self._listener: socket.socket | None = self._listen()
        listener = self._listener
        self.address: tuple[str, int]
        if self._dir is not None:
            self.address = (UNIX + listener.getsockname(), 0)
        else:
            self.address = listener.getsockname()[:2]
        env = _child_env()
        parent = str(os.getpid())
        cli = [sys.executable, "-m", "dista_runtime.cli"]
        self.processes: list[subprocess.Popen[bytes]] = []
        self._closing = False
        try:
            head = format_head(*self.address)
            imports = [arg for m in modules for arg in ("--import", m)]
            for _ in range(workers):
                command = [*cli, "worker", "--head", head, "--parent", parent, *imports]
                command += ["--threads", str(worker_threads)]
                self.processes.append(subprocess.Popen(command, env=env, start_new_session=True))
        except BaseException:
            self.close(0)
            raise

    def take_listener(self) -> socket.socket:
        """The head's listening socket, for the head to serve (and close) from now on."""
        listener, self._listener = self._listener, None
        if listener is None:
            raise RuntimeError("the local cluster's listener was already taken")
        return listener

    def _listen(self) -> socket.socket:
        if hasattr(socket, "AF_UNIX"):
            self._dir = tempfile.mkdtemp(prefix="dista-")  # mode 0700: only we can connect
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listener.bind(os.path.join(self._dir, "head"))
            except OSError:  # a path too long for a Unix socket: TMPDIR is deep
                listener.close()
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
            else:
                listener.listen(1024)
                return listener
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1024)
        return listener

    def watch(self, on_broken: Callable[[str], object], interval: float = 0.5) -> None:
        """In the background: when every worker has died, say why once."""

        def run() -> None:
            while not self._closing:
                if all(w.poll() is not None for w in self.processes):
                    on_broken(self.failed() or "the local cluster's processes exited")
                    return
                time.sleep(interval)

        threading.Thread(target=run, name="dista-local-watch", daemon=True).start()

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def failed(self) -> str:
        """Why the cluster is broken (a child exited), or ''."""
        for p in self.processes:
            code = p.poll()
            if code is not None and code != 0:
                return f"a local cluster process (pid {p.pid}) exited with code {code}"
        return ""

    def close(self, grace: float = 3.0) -> None:
        """Wait up to ``grace`` seconds for the children to stop on their own, then kill."""
        self._closing = True
        if self._listener is not None:  # never served
            self._listener.close()
            self._listener = None
        deadline = time.monotonic() + grace
        for p in self.processes:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.processes:
            if p.poll() is None:
                p.kill()
                p.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
