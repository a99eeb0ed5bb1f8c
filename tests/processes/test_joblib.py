"""The joblib backend "dista" (`dista_runtime.joblib`, docs/joblib.md) on a local cluster of
two workers: results equal a sequential run's, ``n_jobs=-1`` is the workers, tiny calls are
batched, an exception comes back as its own type, a large array is stored once and mapped by
every task, a nested ``Parallel`` runs sequentially in its task, a real ``GridSearchCV``
finds the scores a local run finds, and a process that joined no cluster gets one."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

joblib = pytest.importorskip("joblib")
np = pytest.importorskip("numpy")
pytest.importorskip("sklearn")

from joblib import Parallel, delayed

import dista_runtime as dista
import dista_runtime.joblib as dista_joblib
from dista_runtime._joblib import jobs
from tests.support.cluster import assert_gone, settle_to_zero

pytestmark = pytest.mark.timeout(60)


# -- what the tasks run (importable: the workers load them by name) -------------------------


def square(x: int) -> int:
    return x * x


def where(x: int) -> tuple[int, int]:
    return x, os.getpid()


class Refused(Exception):
    """A user's exception with an attribute of its own."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def fails_at(x: int, bad: int) -> int:
    if x == bad:
        raise Refused(f"no {x}", code=x)
    return x


class Unpicklable(Exception):
    def __init__(self) -> None:
        super().__init__("holds a lock")
        self.lock = threading.Lock()


def raises_unpicklable(x: int) -> int:
    raise Unpicklable()


def slow(x: int) -> int:
    if x == 0:
        raise ValueError("first")
    time.sleep(0.25)
    return x


def reads(array: Any, i: int) -> tuple[float, bool, int]:
    """The array's sum plus ``i``, whether the task may write it (a mapped copy may not),
    and the process that read it."""
    return float(array[i]) + float(array.sum()), bool(array.flags.writeable), os.getpid()


def halve(array: Any) -> Any:
    array /= 2  # in place: the task's own copy, as with loky
    return array


def nested(x: int) -> tuple[list[int], str]:
    inner = Parallel(n_jobs=-1)(delayed(square)(x + i) for i in range(4))
    backend, _ = joblib.parallel.get_active_backend()
    return inner, type(backend).__name__


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def dista_backend(cluster: dista.Cluster) -> Iterator[dista.Cluster]:
    with joblib.parallel_config(backend="dista"):
        yield cluster


@pytest.fixture
def puts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every value the backend stores with `dista.put`."""
    made: list[int] = []

    def spy(value: Any) -> dista.ObjectRef[Any]:
        made.append(jobs.nbytes(value))
        return dista.put(value)

    monkeypatch.setattr(jobs, "put", spy)
    return made


# -- the tests ------------------------------------------------------------------------------


def test_the_cluster_runs_the_calls_and_the_results_equal_a_sequential_run(
    dista_backend: dista.Cluster,
) -> None:
    found = Parallel(n_jobs=-1)(delayed(where)(i) for i in range(40))
    assert [x for x, _ in found] == list(range(40))
    assert {pid for _, pid in found} <= set(dista_backend.pids())
    assert os.getpid() not in {pid for _, pid in found}


def test_n_jobs_minus_one_is_the_workers_connected(dista_backend: dista.Cluster) -> None:
    assert joblib.effective_n_jobs(-1) == 2
    assert joblib.effective_n_jobs(-2) == 1
    assert joblib.effective_n_jobs(-5) == 1
    assert joblib.effective_n_jobs(5) == 5
    assert joblib.effective_n_jobs(None) == 2  # the backend's default: every worker


def test_n_jobs_1_runs_here_one_after_another(dista_backend: dista.Cluster) -> None:
    found = Parallel(n_jobs=1)(delayed(where)(i) for i in range(3))
    assert found == [(i, os.getpid()) for i in range(3)]


def test_tiny_calls_are_batched(dista_backend: dista.Cluster) -> None:
    dista.timeline()  # forget the tasks before
    n = 2000
    assert Parallel(n_jobs=-1)(delayed(square)(i) for i in range(n)) == [i * i for i in range(n)]
    tasks = len(dista.timeline())
    assert 0 < tasks < n / 4, f"{tasks} tasks for {n} calls"


def test_the_older_parallel_backend_and_return_as_generators_work(cluster: dista.Cluster) -> None:
    with joblib.parallel_backend("dista"):
        out = Parallel(n_jobs=-1, return_as="generator")(delayed(square)(i) for i in range(20))
        assert list(out) == [i * i for i in range(20)]
        out = Parallel(n_jobs=-1, return_as="generator_unordered")(
            delayed(square)(i) for i in range(20)
        )
        assert sorted(out) == [i * i for i in range(20)]


def test_an_exception_comes_back_as_its_own_type_with_the_remote_traceback(
    dista_backend: dista.Cluster,
) -> None:
    with pytest.raises(Refused) as caught:
        Parallel(n_jobs=-1)(delayed(fails_at)(i, 7) for i in range(20))
    error = caught.value
    assert type(error) is Refused  # the very type, as loky gives it
    assert (str(error), error.code) == ("no 7", 7)
    cause = error.__cause__
    assert isinstance(cause, dista_joblib.RemoteTraceback)
    assert "in fails_at" in str(cause) and "Refused: no 7" in str(cause)
    # The backend is usable afterwards, and nothing is left in the cluster.
    assert Parallel(n_jobs=-1)(delayed(square)(i) for i in range(5)) == [0, 1, 4, 9, 16]
    del caught, error, cause
    settle_to_zero()


def test_an_exception_that_will_not_pickle_is_a_task_error_saying_what_it_was(
    dista_backend: dista.Cluster,
) -> None:
    with pytest.raises(dista.TaskError, match="Unpicklable: holds a lock"):
        Parallel(n_jobs=-1)(delayed(raises_unpicklable)(i) for i in range(4))


def test_after_an_exception_the_calls_still_queued_are_cancelled(
    dista_backend: dista.Cluster,
) -> None:
    start = time.monotonic()
    with pytest.raises(ValueError, match="first"):
        Parallel(n_jobs=-1, pre_dispatch="all", batch_size=1)(delayed(slow)(i) for i in range(40))
    # 39 x 0.25 s on two workers is ~5 s of work: cancelled, the cluster is idle well before.
    while (s := dista.stats()).pending + s.running:
        assert time.monotonic() - start < 4, f"still busy: {s}"
        time.sleep(0.05)
    settle_to_zero()  # and the cancelled batches' refs are let go


def test_a_large_array_is_stored_once_and_mapped_by_every_task(
    dista_backend: dista.Cluster, puts: list[int]
) -> None:
    big = np.arange(20 << 17, dtype=np.float64)  # 20 MiB
    total = float(big.sum())
    found = Parallel(n_jobs=-1)(delayed(reads)(big, i) for i in range(50))
    assert puts == [big.nbytes]  # one put for 50 tasks
    assert [value for value, _, _ in found] == [i + total for i in range(50)]
    assert not any(writeable for _, writeable, _ in found)  # the stored copy, mapped
    assert len({pid for _, _, pid in found}) == 2  # both workers read it

    small = np.ones(1000)
    puts.clear()
    Parallel(n_jobs=-1)(delayed(reads)(small, i) for i in range(10))
    Parallel(n_jobs=-1, max_nbytes=None)(delayed(reads)(big, i) for i in range(4))
    assert puts == []  # under max_nbytes, or sharing turned off: sent with the batch
    Parallel(n_jobs=-1, max_nbytes="4K")(delayed(reads)(small, i) for i in range(10))
    assert puts == [small.nbytes]
    settle_to_zero()  # the stored copies go with the call that stored them


def test_arguments_under_max_nbytes_and_results_are_writable_copies_as_with_loky(
    dista_backend: dista.Cluster,
) -> None:
    arrays = [np.full(n, 4.0) for n in (10, 100_000)]  # 80 B, 800 kB: in the batch
    found = Parallel(n_jobs=-1)(delayed(halve)(a) for a in arrays)
    assert [a.tolist() == [4.0] * len(a) for a in arrays] == [True, True]  # not ours
    for array in found:
        assert np.all(array == 2.0) and array.flags.writeable
        array += 1  # the caller's to write


def test_an_argument_that_does_not_pickle_raises_instead_of_hanging(
    dista_backend: dista.Cluster,
) -> None:
    with pytest.raises((TypeError, pickle.PicklingError), match="lock"):
        Parallel(n_jobs=-1)(delayed(square)(threading.Lock()) for _ in range(8))
    assert Parallel(n_jobs=-1)(delayed(square)(i) for i in range(3)) == [0, 1, 4]


def test_a_nested_parallel_runs_sequentially_inside_its_task(
    dista_backend: dista.Cluster,
) -> None:
    found = Parallel(n_jobs=-1)(delayed(nested)(x) for x in range(6))
    assert found == [([(x + i) ** 2 for i in range(4)], "SequentialBackend") for x in range(6)]


@pytest.mark.timeout(120)
def test_grid_search_cv_finds_the_scores_of_a_local_run(dista_backend: dista.Cluster) -> None:
    from sklearn.datasets import load_iris
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    features, labels = load_iris(return_X_y=True)
    grid = {"C": [0.1, 1.0, 10.0], "kernel": ["linear", "rbf"]}
    remote = GridSearchCV(SVC(), grid, cv=3, n_jobs=-1).fit(features, labels)
    with joblib.parallel_config(backend="sequential"):
        local = GridSearchCV(SVC(), grid, cv=3, n_jobs=1).fit(features, labels)
    for key in ("mean_test_score", "std_test_score", "rank_test_score"):
        assert np.array_equal(remote.cv_results_[key], local.cv_results_[key]), key
    assert remote.best_params_ == local.best_params_
    assert remote.score(features, labels) == local.score(features, labels)


PROGRAM = """
import os, sys
import joblib
import dista_runtime as dista
import dista_runtime.joblib
from joblib import Parallel, delayed
from tests.processes.test_joblib import where

with joblib.parallel_config(backend="dista", workers=2):
    found = Parallel(n_jobs=-1)(delayed(where)(i) for i in range(8))
    assert [x for x, _ in found] == list(range(8))
    pids = set(dista.local_pids())
    assert {pid for _, pid in found} <= pids and len(pids) == 2, (found, pids)
print(" ".join(map(str, sorted(pids))))
"""


def test_a_process_that_joined_no_cluster_starts_one_and_it_stops_at_exit() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DISTA_ADDRESS"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        timeout=50,
        env=env,
        cwd=root,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) == 2
    assert_gone(pids)
