"""The orchestrator's rehearsal's harness: a head, workers and drivers as real processes, each
in a network namespace of its own as a pod would be (`netns`), every link mutual TLS, a
shared file:// checkpoint store. Used by tests/processes/test_rehearsal.py and by
benchmarks/rehearsal.py (which times a rolling restart against a run without one)."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.processes.support import netns

ROOT = Path(__file__).resolve().parents[3]
PORT = 7420
CLI = [sys.executable, "-m", "dista_runtime.cli"]
TASKS = "tests.processes.support.rehearsal_tasks"
WORKERS = 4


@dataclass
class Cluster:
    net: netns.Network
    head_host: netns.Host
    hosts: list[netns.Host]
    driver_host: netns.Host
    env: dict[str, str]
    head: netns.Process | None = None
    workers: dict[str, netns.Process] = field(default_factory=dict)
    started: int = 0

    @property
    def address(self) -> str:
        return f"{self.head_host.address}:{PORT}"

    def start_head(self) -> None:
        name = f"head{self.started}"
        self.started += 1
        argv = [*CLI, "head", "--host", self.head_host.address, "--port", str(PORT)]
        argv += ["--on-sigterm", "restart"]  # as deployed: a pod's SIGTERM moves the head
        self.head = self.net.spawn(self.head_host, name, argv, self.env, ROOT)
        listening = netns.wait_until(lambda: "listening on" in self.head_output(), 20)
        assert listening, self.why("the head did not listen within 20 s")

    def head_output(self) -> str:
        return self.head.output() if self.head is not None else ""

    def start_worker(self, host: netns.Host, n: int = 0) -> netns.Process:
        argv = [*CLI, "worker", "--no-supervise", "--head", self.address, "--import", TASKS]
        process = self.net.spawn(host, f"{host.role}-{n}", argv, self.env, ROOT)
        self.workers[host.role] = process
        return process

    def status(self) -> str:
        argv = [*CLI, "status", "--head", self.address, "--timeout", "5"]
        try:
            done = self.net.run(self.driver_host, argv, self.env, timeout=20, cwd=ROOT)
        except Exception as e:
            return f"<dista status: {e!r}>"
        return done.stdout if done.returncode == 0 else f"<status: {done.stderr.strip()}>"

    def workers_joined(self) -> int:
        found = re.search(r"\bworkers: (\d+)", self.status())
        return int(found.group(1)) if found else -1

    def wait_workers(self, n: int, timeout: float = 40) -> None:
        joined = netns.wait_until(lambda: self.workers_joined() == n, timeout, every=0.3)
        assert joined, self.why(f"{n} workers did not join within {timeout} s", self.status())

    def run_driver(self, name: str, tasks: int) -> netns.Process:
        argv = [sys.executable, "-m", "tests.processes.support.rehearsal_driver", self.address]
        driver = self.net.spawn(self.driver_host, name, [*argv, "--tasks", str(tasks)], self.env)
        started = netns.wait_until(
            lambda: "driver: started" in driver.output() or driver.popen.poll() is not None, 60
        )
        assert started and driver.popen.poll() is None, self.why("the driver did not start")
        return driver

    def finish(self, driver: netns.Process, timeout: float = 240) -> dict[str, object]:
        try:
            code = driver.popen.wait(timeout)
        except Exception:
            raise AssertionError(self.why(f"the driver did not end in {timeout} s")) from None
        lines = [x for x in driver.output().splitlines() if x.startswith("driver summary: ")]
        assert code == 0 and lines, self.why(f"the driver exited {code}")
        summary: dict[str, object] = json.loads(lines[-1].split(": ", 1)[1])
        return summary

    def drain(self, process: netns.Process, timeout: float = 90) -> None:
        """SIGTERM, as an orchestrator stops a pod; it must drain and exit 0 in time."""
        os.kill(process.popen.pid, signal.SIGTERM)
        try:
            code = process.popen.wait(timeout)
        except Exception:
            why = self.why(f"{process.name} did not drain in {timeout} s")
            raise AssertionError(why) from None
        assert code == 0, self.why(f"{process.name} exited {code} after SIGTERM")

    def why(self, what: str, status: str | None = None) -> str:
        text = what + (f"\n--- dista status:\n{status.rstrip()}" if status else "")
        return f"{text}\n{self.net.tails()}"


class Unavailable(RuntimeError):
    """This machine cannot run the rehearsal (not root, no iproute2, no cryptography)."""


@contextmanager
def rehearsal_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Hosts for a head, four workers and a driver; TLS and a shared checkpoint store.
    Everything started is stopped and the namespaces removed on the way out."""
    reason = netns.unavailable()
    if reason is not None:
        raise Unavailable(f"no network namespaces: {reason}")
    try:
        from dista_runtime._tls.certs import write_quickstart
    except ImportError:
        raise Unavailable("dista certs needs the tls extra (cryptography)") from None

    netns.remove_leftovers()
    net = netns.Network(tmp_path)
    try:
        try:
            net.start()
            head = net.add_host("head", 1)
            hosts = [net.add_host(f"w{n}", 10 + n) for n in range(1, WORKERS + 1)]
            driver = net.add_host("driver", 20)
        except netns.NetnsError as e:
            raise Unavailable(f"cannot build the namespaces' network: {e}") from None
        write_quickstart(tmp_path / "tls")
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]),
            PYTHONUNBUFFERED="1",
            DISTA_TLS_DIR=str(tmp_path / "tls"),
            DISTA_CHECKPOINT_URI=(tmp_path / "checkpoints").as_uri(),
            DISTA_DRAIN_TIMEOUT="60",
            DISTA_LIVENESS_TIMEOUT="3",
            DISTA_WAIT_FOR_HEAD="60",
            DISTA_RECONNECT_TIMEOUT="60",
        )
        env.pop("DISTA_ADDRESS", None)
        yield Cluster(net, head, hosts, driver, env)
    finally:
        net.close()
