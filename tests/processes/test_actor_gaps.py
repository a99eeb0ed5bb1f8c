"""Smaller actor gaps on real processes: an actor call's ref refuses cancel (a task's still
cancels), actor calls show in the timeline under ``module.Class.method``, and an actor
restores only on a worker with a checkpoint store (status says which have one, and why an
actor waits when none that could host it has)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

import dista_runtime as dista
from dista_runtime._api.trace import chrome_trace, task_label
from tests.processes.support import actor_classes as ac
from tests.processes.support.restartable_cluster import processes, wait_for_workers
from tests.support.cluster import wait_for_workers as wait_local

NO_STORE = "no connected worker has a checkpoint store: set DISTA_CHECKPOINT_URI on the workers"


def test_an_actor_calls_ref_refuses_cancel_and_its_calls_are_in_the_timeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DISTA_CHECKPOINT_URI", raising=False)
    with dista.init(workers=2):
        wait_local(2)
        plain = ac.Plain.remote()
        calls = [plain.add.remote(k) for k in (1, 2, 3)]
        with pytest.raises(ValueError, match=r"cannot be cancelled.*kill the actor"):
            calls[0].cancel()
        with pytest.raises(ValueError, match="cannot be cancelled"):
            calls[2].cancel(force=True)
        assert dista.get(calls, timeout=30) == [1, 3, 6]  # each ran, in order
        with pytest.raises(ValueError, match="cannot be cancelled"):
            calls[1].cancel()  # answered: still refused, not silently ignored
        slow = ac.sleep_then.remote(30, 1)
        slow.cancel()  # a task's ref cancels as before
        with pytest.raises(dista.TaskCancelledError):
            slow.get(timeout=30)
        wanted = {c.object_id for c in calls}
        records = [r for r in dista.timeline() if r.object_id in wanted]
        assert len(records) == 3
        name = f"{ac.__name__}.Plain.add"
        assert {task_label(r.task_id) for r in records} == {name}
        assert all(0 < r.started <= r.ended and r.settled for r in records)
        trace = chrome_trace(records)
        slices = [e for e in trace["traceEvents"] if e.get("ph") == "X"]  # type: ignore[attr-defined]
        assert [e["name"] for e in slices] == [name] * 3  # run slices on the actor's worker
        plain.kill()


def _status_until(procs: object, text: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        status: str = procs.status()  # type: ignore[attr-defined]
        if text in status:
            return status
        assert time.monotonic() < deadline, f"status never said {text!r}:\n{status}"
        time.sleep(0.1)


@pytest.mark.timeout(90)
def test_an_actor_restores_only_on_a_worker_with_a_checkpoint_store(tmp_path: Path) -> None:
    store = tmp_path / "checkpoints"
    with processes(tmp_path) as procs:
        procs.start_head()
        procs.env["DISTA_CHECKPOINT_URI"] = store.as_uri()
        stored = procs.start_worker()
        procs.env.pop("DISTA_CHECKPOINT_URI")
        bare = procs.start_worker()
        with dista.init(procs.address):
            wait_for_workers(2)
            status = procs.status()
            # Each worker's line says whether it has a store (then its pid and memory).
            stores = re.findall(r"^worker .*?, ((?:no )?checkpoint store)\b", status, re.MULTILINE)
            assert sorted(stores) == ["checkpoint store", "no checkpoint store"], status
            counter = ac.Counter.remote()  # checkpoint_every=10
            assert dista.get([counter.add.remote(1) for _ in range(3)], timeout=30) == [1, 2, 3]
            # The worker with a store is preferred for any actor.
            assert counter.pid.remote().get(timeout=30) == stored.pid
            counter.checkpoint(timeout=30)
            stored.kill()
            stored.wait(10)
            # The other worker is free, but has no store: the actor waits, and says why.
            later = counter.add.remote(1)
            _status_until(procs, f"WAITING: {NO_STORE}")
            assert not later.done()
            procs.env["DISTA_CHECKPOINT_URI"] = store.as_uri()
            second = procs.start_worker()
            assert later.get(timeout=30) == 4  # restored from the checkpoint, not rebuilt
            assert counter.pid.remote().get(timeout=30) == second.pid != bare.pid
            counter.kill()
