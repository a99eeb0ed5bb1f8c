"""``dista.init(dashboard=True)``: the dashboard of the cluster this process joined, in a
process of its own (``dista dashboard``), stopped with the cluster.

Its own process, so that serving pages and building views never takes this process's
GIL from the user's work; it dies with this one (``--parent``) if this one is killed.
It serves on `DEFAULT_PORT` when that is free, else on any free port; the URL it prints
first is returned and logged.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import subprocess
import sys
import time
from typing import Final

from .._errors import DistaError

__all__ = ["DEFAULT_PORT", "Dashboard"]

#: Ray's dashboard port, which its users already know to forward.
DEFAULT_PORT: Final = 8265
_log = logging.getLogger("dista.driver")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Dashboard:
    """A ``dista dashboard`` process watching the head at ``head`` (as `format_head`)."""

    def __init__(self, head: str, timeout: float = 20.0) -> None:
        port = DEFAULT_PORT if _free(DEFAULT_PORT) else 0
        command = [sys.executable, "-m", "dista_runtime.cli", "dashboard", "--head", head]
        command += ["--port", str(port), "--parent", str(os.getpid())]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.url = self._read_url(timeout)
        _log.info("the dashboard: %s", self.url)

    def _read_url(self, timeout: float) -> str:
        stdout = self.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if selector.select(deadline - time.monotonic()):
                    line = stdout.readline()
                    if not line:
                        break  # it exited (its error is on stderr)
                    for word in line.split():
                        if word.startswith(("http://", "https://")):
                            return word
        self.close()
        raise DistaError(f"the dashboard did not start in {timeout} s (see its error above)")

    def close(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 5 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
