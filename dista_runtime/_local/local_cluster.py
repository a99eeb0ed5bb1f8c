"""The embedded local cluster: workers as child processes, the head in this process.

The head runs on the driver's own I/O loop, as Dask's local cluster runs its scheduler in
the client's process: one process fewer to start and to keep in memory (about 26 MiB), and
no socket between the driver and the head (an in-memory link on that loop). The driver binds the head's listening
socket before it starts the workers, so they connect into the backlog while this process
brings the head up. It is a Unix socket in a private directory where the platform has them
(`dista_runtime._net.address` says why), else loopback TCP on a free port. Children never outlive the parent: each
asks the kernel for SIGKILL when its parent dies (Linux), the head stops itself and its
workers when its last driver disconnects, and `close` waits for them, then kills what is
left. Children run in their own session so a terminal's Ctrl-C reaches only the parent,
which tears down in order.

A `Supervisor` keeps the workers alive: a worker that dies (a segfault, an OOM kill, a Stop
from the head that force-cancelled its task) is replaced, the head names its fate in the
errors of the tasks it took along (`why_lost`), and workers that die on start again and
again (a task module they cannot import) stop the cluster with the reason and their last
stderr lines (`watch`). Their stdout and stderr pass through this process: their log lines
as they wrote them (with their time and ``worker pid 1234``), every other line (a task's
prints) prefixed with ``(pid=1234)``.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Callable

from .._net.address import UNIX, format_head
from .supervise import Supervisor

__all__ = ["LocalCluster"]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # Workers import the driver's task modules by name: give them the driver's path.
    paths = [p or os.getcwd() for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


class LocalCluster:
    def __init__(
        self, workers: int, modules: list[str], worker_threads: int = 1, loop: str = "asyncio"
    ) -> None:
        if workers < 1:
            raise ValueError(f"a local cluster needs at least one worker, not {workers}")
        #: How many workers the cluster keeps alive.
        self.expected = workers
        self._dir: str | None = None
        self._listener: socket.socket | None = self._listen()
        listener = self._listener
        self.address: tuple[str, int]
        if self._dir is not None:
            self.address = (UNIX + listener.getsockname(), 0)
        else:
            self.address = listener.getsockname()[:2]
        self._lock = threading.Lock()
        self._broken: list[Callable[[str], object]] = []
        head = format_head(*self.address)
        command = [sys.executable, "-m", "dista_runtime.cli", "worker", "--head", head]
        command += ["--parent", str(os.getpid()), "--threads", str(worker_threads)]
        command += [arg for m in modules for arg in ("--import", m)]
        command += ["--loop", loop]
        self.supervisor: Supervisor = Supervisor(
            command,
            workers,
            env=_child_env(),
            capture=True,
            on_give_up=self._gave_up,
            name="dista-local-workers",
        )
        try:
            self.supervisor.start()
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

    def watch(self, on_broken: Callable[[str], object]) -> None:
        """Call ``on_broken(reason)`` once, if the workers keep dying on start (at once if
        they already did)."""
        with self._lock:
            reason = self.supervisor.failure
            if not reason:
                self._broken.append(on_broken)
                return
        on_broken(_broken_text(reason))

    def _gave_up(self, reason: str) -> None:
        with self._lock:
            listeners, self._broken = self._broken, []
        for on_broken in listeners:
            on_broken(_broken_text(reason))

    def why_lost(self, pid: int) -> str | None:
        """How worker process ``pid`` ended ("worker pid 4242 died: SIGSEGV"), None while it
        runs: for the head's errors about what a lost worker took along."""
        return self.supervisor.fate(pid)

    def pids(self) -> list[int]:
        """The worker processes alive now."""
        return self.supervisor.pids()

    def failed(self) -> str:
        """Why the cluster is broken (its workers keep dying on start), or ''."""
        reason = self.supervisor.failure
        return _broken_text(reason) if reason else ""

    def grow_to(self, workers: int) -> None:
        """Run at least ``workers`` worker processes from now on (never fewer)."""
        self.supervisor.grow_to(workers)

    def head_exited(self) -> None:
        """The head stopped: its workers exit, and none should replace them."""
        self.supervisor.stop_restarting()

    def begin_close(self) -> None:
        """The cluster is shutting down: workers that exit from now on stay dead."""
        self.supervisor.stop_restarting()

    def close(self, grace: float = 3.0) -> None:
        """Wait up to ``grace`` seconds for the children to stop on their own, then kill."""
        self.supervisor.stop_restarting()
        if self._listener is not None:  # never served
            self._listener.close()
            self._listener = None
        self.supervisor.close(grace)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _broken_text(reason: str) -> str:
    return f"the local cluster's workers keep failing to start: {reason}"
