"""Several "hosts" on one Linux machine: a network namespace each, wired to one switch.

`Network` builds, for a tag unique to the run (``dmh<pid>``), one namespace per host and one
for the switch (a bridge); each host gets a veth pair whose other end is a port of that
bridge, an IPv4 address in ``10.77.0.0/24`` and its loopback up. Nothing is added to the
machine's own namespace, so deleting the namespaces removes every link and the bridge
with them. `Network.cut` takes a host's switch port down (its cable pulled: the host keeps
its address and routes, its packets go nowhere), `Network.heal` puts it back.

`Network.spawn` runs a command inside a host's namespace (``ip netns exec``) in a process
group of its own, its stdout and stderr into one log file; `Network.close` kills every
process it started (their groups, then whatever is left in the namespaces) and deletes the
namespaces. `remove_leftovers` does the same for the namespaces of earlier runs whose
process is gone (a run killed before its cleanup).

Needs root and iproute2; `unavailable` says why not, for a skip.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "PREFIX",
    "Host",
    "Network",
    "NetnsError",
    "Process",
    "remove_leftovers",
    "unavailable",
    "wait_until",
]

#: Every namespace this harness makes is named ``PREFIX<pid>-<role>``.
PREFIX = "dmh"
_OURS = re.compile(rf"^{PREFIX}(\d+)-")
_IP_TIMEOUT_S = 10.0


class NetnsError(RuntimeError):
    """An ``ip`` command failed; the message has its command line and stderr."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``ip ARGS``; `NetnsError` with its stderr if it fails (and ``check``)."""
    done = subprocess.run(
        ["ip", *args], capture_output=True, text=True, check=False, timeout=_IP_TIMEOUT_S
    )
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def unavailable() -> str | None:
    """Why network namespaces cannot be used here (for a skip), or None if they can."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux only (this is {sys.platform})"
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) on PATH"
    probe = f"{PREFIX}{os.getpid()}-probe"
    try:
        ip("netns", "add", probe)
    except (NetnsError, OSError, subprocess.TimeoutExpired) as e:
        return f"cannot create a network namespace: {e}"
    try:
        ip("netns", "delete", probe)
    except (NetnsError, OSError, subprocess.TimeoutExpired) as e:
        return f"cannot delete a network namespace: {e}"
    return None


def namespaces() -> list[str]:
    """The names of every named network namespace (``ip netns list``)."""
    out = ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_inside(netns: str) -> None:
    """SIGKILL every process still running in ``netns`` (they were started in it by us)."""
    out = ip("netns", "pids", netns, check=False).stdout
    for pid in {int(p) for p in out.split() if p.isdigit()}:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _delete(netns: str) -> None:
    _kill_inside(netns)
    ip("netns", "delete", netns, check=False)


def remove_leftovers() -> list[str]:
    """Delete the namespaces of earlier runs whose process is gone (and what runs in them);
    their names."""
    removed = []
    for name in namespaces():
        match = _OURS.match(name)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            _delete(name)
            removed.append(name)
    return removed


@dataclass(frozen=True)
class Host:
    """One "machine": its namespace, its address, and its port on the switch."""

    role: str
    netns: str
    address: str
    port: str  # its veth end in the switch's namespace


@dataclass
class Process:
    """A command running in a host's namespace; its output goes to ``log``."""

    name: str
    host: Host
    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError as e:
            return f"<cannot read {self.log}: {e}>"

    def tail(self, lines: int = 30) -> str:
        text = self.output().rstrip("\n").splitlines()[-lines:]
        state = self.popen.poll()
        status = "running" if state is None else f"exited {state}"
        body = "\n".join(f"    {line}" for line in text) or "    <no output>"
        return f"--- {self.name} (pid {self.popen.pid}, {status}) in {self.host.netns}:\n{body}"

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM its process group, then SIGKILL it after ``grace`` seconds."""
        pgid = self.popen.pid  # start_new_session: it leads its own group
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)  # the group's stragglers too
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(grace)


@dataclass
class Network:
    """Hosts in namespaces on one bridge; ``close`` removes it all (see the module doc)."""

    logs: Path
    subnet: str = "10.77.0"
    tag: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}")
    hosts: dict[str, Host] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)
    _made: list[str] = field(default_factory=list)

    @property
    def switch(self) -> str:
        return f"{self.tag}-switch"

    def _add_namespace(self, name: str) -> None:
        if name in namespaces():  # a namespace of ours from a run with our pid
            _delete(name)
        ip("netns", "add", name)
        self._made.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def start(self) -> None:
        """The switch: a namespace with a bridge, up."""
        self._add_namespace(self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")

    def add_host(self, role: str, number: int) -> Host:
        """A host ``role`` at ``<subnet>.<number>``, its ``eth0`` a port of the bridge."""
        host = Host(role, f"{self.tag}-{role}", f"{self.subnet}.{number}", f"p-{role}"[:15])
        self._add_namespace(host.netns)
        self.hosts[role] = host
        peer = ("peer", "name", "eth0", "netns", host.netns)
        ip("-n", self.switch, "link", "add", host.port, "type", "veth", *peer)
        ip("-n", self.switch, "link", "set", host.port, "master", "br0", "up")
        ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", "eth0")
        ip("-n", host.netns, "link", "set", "eth0", "up")
        return host

    def cut(self, host: Host) -> None:
        """Pull ``host``'s cable: its switch port goes down."""
        ip("-n", self.switch, "link", "set", host.port, "down")

    def heal(self, host: Host) -> None:
        ip("-n", self.switch, "link", "set", host.port, "up")

    def spawn(
        self,
        host: Host,
        name: str,
        argv: Sequence[str],
        env: dict[str, str],
        cwd: Path | str | None = None,
    ) -> Process:
        """Run ``argv`` in ``host``'s namespace, its own process group, output to a log."""
        log = self.logs / f"{name}.log"
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                ["ip", "netns", "exec", host.netns, *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        process = Process(name, host, popen, log)
        self.processes.append(process)
        return process

    def run(
        self,
        host: Host,
        argv: Sequence[str],
        env: dict[str, str],
        timeout: float,
        cwd: Path | str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` in ``host``'s namespace to its end (stdout and stderr captured)."""
        return subprocess.run(
            ["ip", "netns", "exec", host.netns, *argv],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=timeout,
            check=False,
        )

    def can_connect(self, host: Host, address: str, port: int, timeout: float = 1.0) -> bool:
        """Whether a TCP connection from ``host`` to ``address:port`` opens in ``timeout``."""
        code = f"import socket; socket.create_connection(({address!r}, {port}), {timeout})"
        argv = [sys.executable, "-c", code]
        return self.run(host, argv, dict(os.environ), timeout + 10).returncode == 0

    def tails(self, lines: int = 30) -> str:
        """The end of every process's output, for a failure message."""
        return "\n".join(p.tail(lines) for p in self.processes)

    def close(self) -> None:
        """Kill every process started here, then delete the namespaces (and with them the
        veths and the bridge). Safe to call twice, and after a partial start."""
        for process in self.processes:
            process.stop()
        for name in reversed(self._made):
            _delete(name)
        self._made.clear()


def wait_until(check: Callable[[], object], timeout: float, every: float = 0.1) -> bool:
    """Poll ``check`` until it is true (True), or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)
    return True
