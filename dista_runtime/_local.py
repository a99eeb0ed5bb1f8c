"""The embedded local cluster: a head and workers as child processes on loopback.

The parent binds the head's listening socket itself (port 0, loopback) and hands it to the
head process, so the head and every worker start at the same time: workers connect into
the backlog while the head is still importing. Children never outlive the parent: each
asks the kernel for SIGKILL when its parent dies (Linux), the head stops itself and its
workers when its last driver disconnects, and `close` waits for them, then kills what is
left. Children run in their own session so a terminal's Ctrl-C reaches only the parent,
which tears down in order.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

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
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1024)
        self.address: tuple[str, int] = listener.getsockname()
        env = _child_env()
        parent = str(os.getpid())
        cli = [sys.executable, "-m", "dista_runtime.cli"]
        self.processes: list[subprocess.Popen[bytes]] = []
        self._closing = False
        try:
            fd = listener.fileno()
            self.processes.append(
                subprocess.Popen(
                    [*cli, "head", "--local", "--fd", str(fd), "--parent", parent],
                    pass_fds=[fd],
                    env=env,
                    start_new_session=True,
                )
            )
            head = f"{self.address[0]}:{self.address[1]}"
            imports = [arg for m in modules for arg in ("--import", m)]
            for _ in range(workers):
                command = [*cli, "worker", "--head", head, "--parent", parent, *imports]
                command += ["--threads", str(worker_threads)]
                self.processes.append(subprocess.Popen(command, env=env, start_new_session=True))
        except BaseException:
            self.close(0)
            raise
        finally:
            listener.close()

    def watch(self, on_broken: Callable[[str], object], interval: float = 0.5) -> None:
        """In the background: when the head, or every worker, has died, say why once."""

        def run() -> None:
            while not self._closing:
                head, *workers = self.processes
                if head.poll() is not None or all(w.poll() is not None for w in workers):
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
