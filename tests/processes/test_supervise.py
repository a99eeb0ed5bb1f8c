"""Worker supervision with real processes and real signals: a local cluster's driver and
`dista worker --processes N` replace workers that die, name how they died, and give up with
the reason when workers die on start; SIGTERM to a driver leaves nothing behind.

Every driver here is its own process (its task module lives in a temporary directory, so no
other test's workers are asked to import it), and every process a test starts is gone when
it ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dista_runtime.logs import message_of
from tests.support.cluster import alive, assert_gone, head_process, stop_process

ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join([str(ROOT), *sys.path])
CLI = [sys.executable, "-m", "dista_runtime.cli"]

TASKS = textwrap.dedent(
    """
    import ctypes
    import os
    import time

    import dista_runtime as dista


    @dista.task(max_retries=1)
    def segfault() -> int:
        ctypes.string_at(0)  # reads address 0: SIGSEGV
        return 0


    @dista.task(max_retries=0)
    def exit_with(code: int) -> int:
        os._exit(code)


    @dista.task
    def hello(text: str) -> int:
        print(text)
        return os.getpid()


    @dista.task
    def nap(seconds: float) -> int:
        time.sleep(seconds)
        return os.getpid()
    """
)


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(") ", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return sorted(found)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A directory holding the task module ``crashy`` and a private TMPDIR (``tmp/``)."""
    (tmp_path / "crashy.py").write_text(TASKS)
    (tmp_path / "tmp").mkdir()
    return tmp_path


def env_for(workdir: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=PYTHONPATH, TMPDIR=str(workdir / "tmp"))


def run_driver(workdir: Path, code: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=False,
        capture_output=True,
        text=True,
        env=env_for(workdir),
        cwd=workdir,
        timeout=timeout,
    )


def last_json(stdout: str) -> dict[str, object]:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, stdout
    result: dict[str, object] = json.loads(lines[-1])
    return result


def assert_no_socket_directory(workdir: Path) -> None:
    left = [p.name for p in (workdir / "tmp").iterdir() if p.name.startswith("dista-")]
    assert not left, f"left behind: {left}"


# -- a local cluster ----------------------------------------------------------------------------


def test_crashed_workers_are_named_replaced_and_their_prints_prefixed(workdir: Path) -> None:
    result = run_driver(
        workdir,
        """
        import json, os, time
        import dista_runtime as dista
        import crashy

        out = {}
        t = time.perf_counter()
        with dista.init(workers=2):
            out["init_s"] = time.perf_counter() - t
            out["workers_after_init"] = dista.stats().workers
            out["hello_pid"] = crashy.hello.remote("hello from a task").get(timeout=60)
            for name, make in [  # one at a time: each kills the worker it runs on
                ("segfault", crashy.segfault.remote),
                ("exit3", lambda: crashy.exit_with.remote(3)),
                ("exit0", lambda: crashy.exit_with.remote(0)),
            ]:
                try:
                    make().get(timeout=120)
                except dista.TaskError as e:
                    out[name] = str(e)
            deadline = time.monotonic() + 120
            while dista.stats().workers < 2 or len(dista.local_pids()) != 2:
                assert time.monotonic() < deadline, "the workers did not come back"
                time.sleep(0.05)
            out["pids"] = dista.local_pids()
            out["names"] = sorted({e["name"] for e in dista.chrome_trace(dista.timeline())
                                   ["traceEvents"] if e["ph"] == "X"})
        time.sleep(0.5)  # no worker was started during the shutdown
        out["children"] = [t for t in os.listdir("/proc/self/task")
                           if open(f"/proc/self/task/{t}/children").read().strip()]
        print(json.dumps(out))
        """,
    )
    assert result.returncode == 0, result.stderr
    out = last_json(result.stdout)
    assert out["workers_after_init"] == 2  # init returned once both had joined
    # What a lost worker's tasks say: its pid and how it ended.
    assert "worker pid " in str(out["segfault"]), out["segfault"]
    assert "died: SIGSEGV" in str(out["segfault"]), out["segfault"]
    assert "gave up after 2 attempts" in str(out["segfault"])
    assert "exited with code 3" in str(out["exit3"]), out["exit3"]
    assert "exited with code 0" in str(out["exit0"]), out["exit0"]
    # Replaced: two live workers, none of them one that died (the hello worker died too,
    # or is one of the two).
    pids = out["pids"]
    assert isinstance(pids, list) and len(pids) == 2
    # Task prints come through the driver with the worker's pid in front.
    assert f"(pid={out['hello_pid']}) hello from a task" in result.stdout, result.stdout
    # A segfault shows where it happened (faulthandler), prefixed too.
    assert "Fatal Python error: Segmentation fault" in result.stderr
    assert "crashy.py" in result.stderr
    # The timeline names tasks by module.function.
    assert "crashy.hello" in out["names"], out["names"]  # type: ignore[operator]
    assert out["children"] == []
    assert_gone([int(p) for p in pids])
    assert_no_socket_directory(workdir)


def test_a_killed_worker_is_replaced_within_seconds(workdir: Path) -> None:
    result = run_driver(
        workdir,
        """
        import json, os, signal, time
        import dista_runtime as dista
        import crashy

        out = {}
        with dista.init(workers=2):
            victim = dista.local_pids()[0]
            os.kill(victim, signal.SIGKILL)  # as the OOM killer does
            t = time.perf_counter()
            deadline = time.monotonic() + 120
            while victim in dista.local_pids():
                assert time.monotonic() < deadline
                time.sleep(0.001)
            out["noticed_s"] = time.perf_counter() - t
            while dista.stats().workers < 2 or len(dista.local_pids()) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.005)
            out["rejoined_s"] = time.perf_counter() - t
            out["victim"] = victim
            out["pids"] = dista.local_pids()
            # Both workers take work again: two naps at once land on two processes.
            out["nap_pids"] = dista.get([crashy.nap.remote(1.0) for _ in range(2)], timeout=60)
        print(json.dumps(out))
        """,
    )
    assert result.returncode == 0, result.stderr
    out = last_json(result.stdout)
    print(f"SIGKILL -> noticed in {out['noticed_s']:.4f} s, rejoined in {out['rejoined_s']:.3f} s")
    assert out["victim"] not in out["pids"]  # type: ignore[operator]
    assert len(set(out["nap_pids"])) == 2  # type: ignore[arg-type]
    assert float(out["rejoined_s"]) < 60  # type: ignore[arg-type]
    assert_gone([int(p) for p in out["pids"]])  # type: ignore[union-attr]


def test_workers_that_cannot_start_fail_init_with_the_reason(workdir: Path) -> None:
    result = run_driver(
        workdir,
        """
        import json, os, pathlib, shutil, time
        import dista_runtime as dista
        import crashy  # registered here, then gone: the workers cannot import it

        pathlib.Path("crashy.py").unlink()
        shutil.rmtree("__pycache__", ignore_errors=True)
        t = time.perf_counter()
        try:
            dista.init(workers=2, timeout=120)
        except dista.DistaError as e:
            error = str(e)
        else:
            error = ""
        took = time.perf_counter() - t
        time.sleep(0.2)
        children = [p for p in os.listdir("/proc/self/task")
                    if open(f"/proc/self/task/{p}/children").read().strip()]
        print(json.dumps({"error": error, "took": took, "children": children}))
        """,
    )
    assert result.returncode == 0, result.stderr
    out = last_json(result.stdout)
    error = str(out["error"])
    assert "keep failing to start" in error, error
    assert "cannot import the task modules" in error, error
    assert "crashy" in error, error
    assert float(out["took"]) < 60  # type: ignore[arg-type]
    assert out["children"] == []
    assert_no_socket_directory(workdir)


def test_sigterm_to_a_driver_leaves_nothing_behind(workdir: Path) -> None:
    driver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, time
                import dista_runtime as dista
                cluster = dista.init(workers=2)
                print(" ".join(map(str, cluster.pids())), flush=True)
                time.sleep(120)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(workdir),
        cwd=workdir,
    )
    try:
        assert driver.stdout is not None
        pids = [int(p) for p in driver.stdout.readline().split()]
        assert len(pids) == 2
        assert [p.name for p in (workdir / "tmp").iterdir()]  # the socket directory
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(30) == -signal.SIGTERM  # it still dies of the signal
        assert_gone(pids)
        assert_no_socket_directory(workdir)
        assert driver.stderr is not None
        assert "Traceback" not in driver.stderr.read()
    finally:
        stop_process(driver)


def test_an_apps_own_sigterm_handler_is_kept(workdir: Path) -> None:
    result = run_driver(
        workdir,
        """
        import os, signal, sys
        import dista_runtime as dista

        def mine(signum, frame):
            print("my handler ran", flush=True)
            sys.exit(3)

        signal.signal(signal.SIGTERM, mine)
        dista.init(workers=1)
        assert signal.getsignal(signal.SIGTERM) is mine
        os.kill(os.getpid(), signal.SIGTERM)
        """,
    )
    assert result.returncode == 3, result.stderr
    assert "my handler ran" in result.stdout
    assert_no_socket_directory(workdir)  # atexit still shut the cluster down


# -- the CLI's worker supervisor ----------------------------------------------------------------


def _workers_of(address: str) -> int:
    import dista_proto as dp
    from dista_runtime._hosts.observer import ask
    from dista_runtime._net.address import parse_head
    from dista_runtime.loops import run

    answer = run(lambda loop: ask(loop, *parse_head(address), dp.Status(), 5.0))
    assert isinstance(answer, dp.Status)
    line = answer.text.splitlines()[1]  # "drivers: 0  workers: 2  observers: 1"
    return int(line.split("workers:")[1].split()[0])


def wait_for_head_workers(address: str, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while _workers_of(address) != n:
        assert time.monotonic() < deadline, f"the head did not get {n} workers"
        time.sleep(0.1)


class Lines:
    """A process's stream, read line by line on a thread."""

    def __init__(self, stream: object) -> None:
        self.lines: list[str] = []
        self._stream = stream
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self._stream:  # type: ignore[attr-defined]
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            for line in self.lines:
                if text in line:
                    return line
            assert time.monotonic() < deadline, f"no {text!r} in {self.lines}"
            time.sleep(0.05)


@pytest.fixture
def head(workdir: Path) -> Iterator[str]:
    """A `dista head` on a free port; its address."""
    with head_process(env=env_for(workdir)) as address:
        yield address


def test_cli_worker_processes_replace_the_dead_and_stop_on_sigterm(
    workdir: Path, head: str
) -> None:
    supervisor = subprocess.Popen(
        [*CLI, "worker", "--head", head, "--processes", "2", "--import", "crashy"],
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(workdir),
        cwd=workdir,
    )
    children: list[int] = []
    try:
        err = Lines(supervisor.stderr)
        wait_for_head_workers(head, 2)
        children = children_of(supervisor.pid)
        assert len(children) == 2, children
        victim = children[0]
        os.kill(victim, signal.SIGKILL)
        line = err.wait_for(f"pid {victim} died: SIGKILL")
        assert message_of(line).startswith("dista worker: ") and "restarting" in line, line
        assert f"supervisor pid {supervisor.pid} WARNING " in line, line
        wait_for_head_workers(head, 2)
        children = children_of(supervisor.pid)
        assert len(children) == 2 and victim not in children, children
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(30) == 128 + signal.SIGTERM
        assert_gone(children)
        assert "Traceback" not in "".join(err.lines), err.lines
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if supervisor.stderr is not None:
            supervisor.stderr.close()


def test_cli_worker_processes_end_cleanly_when_the_head_stops_them(
    workdir: Path, head: str
) -> None:
    """`dista stop`: every worker process exits, none is replaced, and the supervisor
    exits 0 saying so (not "workers keep failing to start")."""
    supervisor = subprocess.Popen(
        [*CLI, "worker", "--head", head, "--processes", "2", "--import", "crashy"],
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(workdir),
        cwd=workdir,
    )
    children: list[int] = []
    try:
        wait_for_head_workers(head, 2)
        children = children_of(supervisor.pid)
        stopped = subprocess.run(
            [*CLI, "stop", "--head", head], check=False, capture_output=True, timeout=30
        )
        assert stopped.returncode == 0
        assert supervisor.wait(30) == 0
        assert supervisor.stderr is not None
        err = supervisor.stderr.read()
        assert "stopped us" in err and "failing" not in err and "exited" not in err, err
        assert_gone(children)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if supervisor.stderr is not None:
            supervisor.stderr.close()


def test_cli_worker_imports_from_the_current_directory(workdir: Path, head: str) -> None:
    """`dista worker --import crashy` (the console script: no `python -m`) in crashy's
    directory, with no PYTHONPATH pointing there."""
    script = Path(sys.executable).with_name("dista")
    command = [str(script)] if script.exists() else CLI
    worker = subprocess.Popen(
        [*command, "worker", "--head", head, "--import", "crashy"],
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=PYTHONPATH),  # not the workdir: the cwd must do
        cwd=workdir,
    )
    try:
        wait_for_head_workers(head, 1, timeout=60)
        assert worker.poll() is None
    finally:
        worker.terminate()
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        assert worker.stderr is not None
        err = worker.stderr.read()
        worker.stderr.close()
    assert "cannot import" not in err, err


def test_cli_workers_that_cannot_start_stop_with_the_reason(workdir: Path) -> None:
    out = subprocess.run(
        [*CLI, "worker", "--head", "127.0.0.1:9", "--processes", "2", "--import", "nowhere"],
        check=False,
        capture_output=True,
        text=True,
        env=env_for(workdir),
        cwd=workdir,
        timeout=120,
    )
    assert out.returncode == 1
    lines = [message_of(line) for line in out.stderr.splitlines()]
    assert "restarting in 0.25 s" in out.stderr, out.stderr  # a backoff, then it stops
    assert lines[-1].startswith("dista worker: workers keep failing to start; stopping"), lines
    assert "exited with code 2 before it joined the head" in lines[-1]
    assert "No module named 'nowhere'" in out.stderr
    assert "Traceback" not in out.stderr
