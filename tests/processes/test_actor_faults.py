"""Actors through real faults: workers SIGKILLed mid-stream, stores that cannot be written,
calls that outgrow their budget. Each test runs its own local cluster (the checkpoint store
and the budget are read from the environment the workers start with)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import dista_runtime as dista
from dista_runtime._session import context as _context
from tests.processes.support import actor_classes as ac
from tests.processes.support import recovery_tasks as rt
from tests.processes.support.restartable_cluster import processes
from tests.support.cluster import assert_gone, settle_to_zero, stop_process, wait_for_workers
from tests.support.processes import ROOT


def _cluster(workers: int = 2) -> Iterator[dista.Cluster]:
    with dista.init(workers=workers) as c:
        wait_for_workers(workers)
        yield c
    assert_gone(c.pids())


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A local cluster whose workers checkpoint to a directory: that directory."""
    store = tmp_path / "checkpoints"
    monkeypatch.setenv("DISTA_CHECKPOINT_URI", store.as_uri())
    for _ in _cluster():
        yield store


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def test_a_counter_keeps_every_increment_through_two_sigkills(stored: Path) -> None:
    counter = ac.Counter.remote()  # checkpoint_every=10
    refs = []
    killed = []
    for i in range(1000):
        refs.append(counter.add.remote(1, 0.001))
        if i in (300, 700):
            pid = counter.pid.remote().get(timeout=30)
            _kill(pid)
            killed.append(pid)
    values = dista.get(refs, timeout=120)
    # Each call answered once, each increment applied once: 1..1000, in order.
    assert values == list(range(1, 1001))
    assert counter.value.remote().get(timeout=30) == 1000
    assert counter.pid.remote().get(timeout=30) not in killed
    # The head's restore point, and those written since (at most the frames in flight).
    assert len(list((stored / f"{counter.actor_id:016x}").glob("*.ckpt"))) <= 3
    counter.kill()
    del refs
    settle_to_zero()
    deadline = time.monotonic() + 10
    while _left(stored / f"{counter.actor_id:016x}"):
        assert time.monotonic() < deadline, "a killed actor's checkpoints stay"
        time.sleep(0.05)


def _left(folder: Path) -> list[Path]:
    """What is left in ``folder`` (nothing once it is removed, even mid-listing)."""
    try:
        return list(folder.iterdir())
    except FileNotFoundError:
        return []


def test_without_checkpoints_every_call_runs_again_from_the_constructor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DISTA_CHECKPOINT_URI", raising=False)
    for _ in _cluster():
        plain = ac.Plain.remote()
        first = [plain.add.remote(1) for _ in range(200)]
        assert dista.get(first, timeout=30)[-1] == 200
        _kill(plain.pid.remote().get(timeout=30))
        later = [plain.add.remote(1) for _ in range(100)]
        # The old answers stand; the rebuilt actor saw all 200 again, then 100 more.
        assert dista.get(later, timeout=60) == list(range(201, 301))
        assert dista.get(first, timeout=10) == list(range(1, 201))
        plain.kill()


def test_state_goes_through_getstate_and_setstate(stored: Path) -> None:
    actor = ac.Stateful.remote()
    dista.get([actor.add.remote(k) for k in range(1, 11)], timeout=30)
    actor.checkpoint(timeout=30)
    dista.get([actor.add.remote(k) for k in range(11, 16)], timeout=30)
    _kill(actor.pid.remote().get(timeout=30))
    assert actor.add.remote(100).get(timeout=60) == sum(range(1, 16)) + 100
    # Restored by __setstate__ (the cache is not saved), then calls 11..15 and 100 ran again.
    assert actor.cached.remote().get(timeout=30) == 6
    actor.kill()


def test_a_missing_store_is_an_error_from_checkpoint_and_a_warning_on_the_handle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DISTA_CHECKPOINT_URI", raising=False)
    for _ in _cluster(1):
        counter = ac.Counter.remote()  # checkpoint_every=10
        dista.get([counter.add.remote(1) for _ in range(10)], timeout=30)
        time.sleep(0.5)  # the head's own request, after call 10, fails
        with pytest.warns(dista.CheckpointWarning, match="DISTA_CHECKPOINT_URI"):
            assert counter.add.remote(1).get(timeout=30) == 11
        # Once per reason: the same failure again does not warn again.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            dista.get([counter.add.remote(1) for _ in range(20)], timeout=30)
            time.sleep(0.5)
            assert counter.add.remote(1).get(timeout=30) == 32
        with pytest.raises(dista.CheckpointError, match="DISTA_CHECKPOINT_URI"):
            counter.checkpoint(timeout=30)
        counter.kill()


def test_an_unwritable_store_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("DISTA_CHECKPOINT_URI", (blocker / "store").as_uri())
    for _ in _cluster(1):
        plain = ac.Plain.remote()
        plain.add.remote(1).get(timeout=30)
        with pytest.raises(dista.CheckpointError, match="cannot write a checkpoint to file://"):
            plain.checkpoint(timeout=30)
        assert plain.add.remote(1).get(timeout=30) == 2  # the actor goes on
        plain.kill()


def test_kept_calls_stay_within_the_budget_without_a_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DISTA_CHECKPOINT_URI", raising=False)
    monkeypatch.setenv("DISTA_ACTOR_KEEP_BYTES", str(100_000))
    for _ in _cluster(1):
        sink = ac.Sink.remote()
        core = _context.session().session.core
        blob = b"x" * 10_000
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(100):
                assert sink.take.remote(blob).get(timeout=30) == 10_000
                assert core.kept_bytes <= 2 * 100_000 + 20_000
        said = [str(w.message) for w in caught if w.category is dista.CheckpointWarning]
        # Past the budget the driver asked for a checkpoint, which failed; it then cut the
        # oldest calls and said what that costs.
        assert any("no checkpoint store" in m for m in said), said
        assert any("cannot be rebuilt exactly" in m for m in said), said
        sink.kill()


def test_kept_calls_drop_once_a_checkpoint_covers_them(stored: Path) -> None:
    counter = ac.Counter.remote()  # checkpoint_every=10
    dista.get([counter.add.remote(1) for _ in range(95)], timeout=30)
    core = _context.session().session.core
    deadline = time.monotonic() + 10
    while core.kept(counter.actor_id) > 5:
        assert time.monotonic() < deadline, core.kept(counter.actor_id)
        time.sleep(0.05)
    counter.checkpoint(timeout=30)
    deadline = time.monotonic() + 10
    while core.kept(counter.actor_id):
        assert time.monotonic() < deadline, core.kept(counter.actor_id)
        time.sleep(0.05)
    counter.kill()


def test_a_local_cluster_starts_a_worker_for_each_actor(monkeypatch: pytest.MonkeyPatch) -> None:
    # init(workers=1) keeps one worker for tasks: an actor made while it is busy starts on
    # a worker started for it, without waiting for the task, and tasks still run.
    monkeypatch.delenv("DISTA_CHECKPOINT_URI", raising=False)
    for cluster in _cluster(1):
        busy = ac.sleep_then.remote(3.0, 5)
        time.sleep(0.3)
        plain = ac.Plain.remote()
        assert plain.add.remote(1).get(timeout=20) == 1
        assert not busy.done()  # it did not wait for the task
        wait_for_workers(2)
        assert len(cluster.pids()) == 2
        assert ac.sleep_then.remote(0, 6).get(timeout=30) == 6  # a task runs beside it
        assert busy.get(timeout=30) == 5
        plain.kill()


def test_a_restored_numpy_state_is_writable(stored: Path) -> None:
    grid = ac.Grid.remote(1 << 20)  # 8 MiB: out of band, mapped back on restore
    assert grid.bump.remote(5).get(timeout=30) == 1
    grid.checkpoint(timeout=30)
    _kill(grid.pid.remote().get(timeout=30))
    assert grid.bump.remote(5).get(timeout=60) == 2
    assert grid.bump.remote(7).get(timeout=30) == 3
    grid.kill()


def test_kill_force_ends_the_worker_of_an_actor_stuck_in_c(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DISTA_CHECKPOINT_URI", raising=False)
    for cluster in _cluster(1):
        stuck = ac.Stuck.remote()
        pid = stuck.pid.remote().get(timeout=30)
        spinning = stuck.spin.remote()
        time.sleep(0.3)
        stuck.kill(force=True)
        with pytest.raises(dista.TaskError, match="killed"):
            spinning.get(timeout=30)
        assert_gone([pid])
        assert ac.sleep_then.remote(0, 6).get(timeout=30) == 6  # the workers serve tasks
        assert pid not in cluster.pids()


#: A driver that checkpoints actors, then leaves without kill(): through `with`, or
#: through `shutdown()` with one actor still inside a call, then the interpreter's exit.
_LEAVES = {
    "with": """
        with dista.init(workers=1) as cluster:
            counter = ac.Counter.remote()
            counter.add.remote(1).get(timeout=30)
            counter.checkpoint(timeout=30)
            print("pids", *cluster.pids(), flush=True)
        """,
    "shutdown": """
        cluster = dista.init(workers=2)
        counter, napping = ac.Counter.remote(), ac.Counter.remote()
        dista.get([counter.add.remote(1), napping.add.remote(1)], timeout=30)
        counter.checkpoint(timeout=30)
        napping.checkpoint(timeout=30)
        napping.add.remote(1, 30.0)  # still running when the cluster goes
        time.sleep(0.3)
        print("pids", *cluster.pids(), flush=True)
        dista.shutdown()
        """,
}


def test_a_cluster_shut_down_without_kill_leaves_no_checkpoint(tmp_path: Path) -> None:
    runs = {}
    for name, body in _LEAVES.items():
        store = tmp_path / name
        store.mkdir()
        script = "import time\nimport dista_runtime as dista\n"
        script += "from tests.processes.support import actor_classes as ac\n"
        env = dict(os.environ, DISTA_CHECKPOINT_URI=store.as_uri())
        argv = [sys.executable, "-c", script + textwrap.dedent(body)]
        runs[name] = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    try:
        for name, run in runs.items():
            out, _ = run.communicate(timeout=60)
            assert run.returncode == 0, out
            pids = [int(p) for p in out.split("pids", 1)[1].split()]
            assert_gone(pids)
            # Every actor's folder went with its actor: the driver's leave kills them, and
            # the workers finish removing before they exit.
            assert list((tmp_path / name).iterdir()) == [], (name, out)
    finally:
        for run in runs.values():
            stop_process(run)


def test_a_head_stopped_by_a_signal_leaves_no_checkpoint(tmp_path: Path) -> None:
    # SIGTERM to the head stops the cluster: its actors end, and their checkpoints go.
    store = tmp_path / "store"
    store.mkdir()
    with processes(tmp_path, DISTA_CHECKPOINT_URI=store.as_uri()) as procs:
        head = procs.start_head()
        worker = procs.start_worker()
        with dista.init(procs.address):
            wait_for_workers(1)
            recorder = rt.Recorder.remote("kept")
            for i in range(20):  # (a checkpoint every 7 calls)
                recorder.record.remote(str(i)).get(timeout=30)
            assert list(store.iterdir()), "no checkpoint written"
            head.send_signal(signal.SIGTERM)
            assert head.wait(30) == 0
            assert worker.wait(30) is not None
        assert list(store.iterdir()) == []
