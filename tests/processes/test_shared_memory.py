"""Large objects shared on one host (docs/protocol.md, "Extensions: objects mapped on one
host"), with real processes: a driver maps a worker's result instead of copying it through
a socket; the array it gets is read-only and reads the worker's memory file; the map
outlives a worker killed with SIGKILL; releasing the last ref frees the file; nothing is
ever left in /dev/shm; with ``DISTA_SHARED_MEMORY=0`` objects travel over the links."""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from collections.abc import Iterator

import numpy as np
import pytest

import dista_runtime as dista
from dista_runtime._values.shared import SHARED_MEMORY_ENV
from tests.processes.support import shared_tasks as st
from tests.support.cluster import alive, assert_gone, wait_for_workers

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="memory files and abstract sockets: Linux"
)

SIZE = 24 << 20
MEMFD = "memfd:dista-object"


def mapped_here() -> int:
    """How many maps of Dista memory files this process has."""
    with open("/proc/self/maps") as maps:
        return sum(MEMFD in line for line in maps)


def files_held(pid: int) -> int:
    """How many Dista memory files process ``pid`` holds open."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += MEMFD in os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return count


def eventually(check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not within the time"
        gc.collect()
        time.sleep(0.05)


@pytest.fixture
def shm_left_clean() -> Iterator[None]:
    before = set(os.listdir("/dev/shm"))
    yield
    assert set(os.listdir("/dev/shm")) - before == set()


@pytest.fixture
def cluster(shm_left_clean: None) -> Iterator[dista.Cluster]:
    with dista.init(workers=1) as c:
        wait_for_workers(1)
        yield c
    assert_gone(c.pids())


def test_a_large_numpy_result_is_mapped_read_only_and_freed_with_its_last_ref(
    cluster: dista.Cluster,
) -> None:
    (worker,) = cluster.pids()
    ref = st.filled.remote(SIZE, 7)
    array = ref.get(timeout=60)
    assert array.nbytes == SIZE and int(array[0]) == 7 and int(array[-1]) == 7
    assert not array.flags.writeable  # as Ray's: the worker's memory, not a copy
    with pytest.raises(ValueError):
        array[0] = 1
    assert mapped_here() >= 1 and files_held(worker) == 1
    # A task reading the stored result on its own worker sees the same read-only bytes.
    assert st.total.remote(ref).get(timeout=60) == (7 * SIZE, False, worker)
    del ref  # the array still holds the map: its bytes stay readable
    assert int(array.sum(dtype=np.uint64)) == 7 * SIZE
    del array
    eventually(lambda: mapped_here() == 0 and files_held(worker) == 0)


def test_a_large_put_is_kept_in_a_memory_file_and_mapped(cluster: dista.Cluster) -> None:
    (worker,) = cluster.pids()
    ref = dista.put(np.full(SIZE, 5, dtype=np.uint8))
    # Its worker reads it from the file it keeps, and so does the driver: read-only both.
    assert st.total.remote(ref).get(timeout=60) == (5 * SIZE, False, worker)
    array = ref.get(timeout=60)
    assert int(array[-1]) == 5 and not array.flags.writeable
    assert mapped_here() >= 1 and files_held(worker) == 1
    del ref, array
    eventually(lambda: mapped_here() == 0 and files_held(worker) == 0)


def test_a_worker_maps_an_input_another_worker_stores(shm_left_clean: None) -> None:
    with dista.init(workers=2) as c:
        wait_for_workers(2)
        ref = st.filled.remote(SIZE, 9)
        dista.wait([ref], timeout=60)
        pids: set[int] = set()
        deadline = time.monotonic() + 30
        while len(pids) < 2:  # until a task read it on each worker: one of them fetched it
            assert time.monotonic() < deadline, f"every reader ran on {pids}"
            for got, writable, pid in dista.get([st.total.remote(ref) for _ in range(4)]):
                # Read-only on both: its own worker's store, or the other's map of it (a
                # copy over the link would land in a writable buffer).
                assert (got, writable) == (9 * SIZE, False)
                pids.add(pid)
        assert pids == set(c.pids())
        del ref
    assert_gone(c.pids())


def test_large_bytes_come_back_as_bytes(cluster: dista.Cluster) -> None:
    data = st.payload.remote(SIZE).get(timeout=60)
    assert type(data) is bytes and data == bytes(range(256)) * (SIZE // 256)


def test_many_large_results_at_once_are_all_mapped(cluster: dista.Cluster) -> None:
    refs = [st.filled.remote(2 << 20, k) for k in range(40)]
    arrays = dista.get(refs, timeout=120)
    assert [int(a[-1]) for a in arrays] == list(range(40))
    assert all(not a.flags.writeable for a in arrays)
    assert mapped_here() >= 40
    del refs, arrays
    eventually(lambda: mapped_here() == 0)


def test_a_map_outlives_its_worker_killed_with_sigkill(cluster: dista.Cluster) -> None:
    (worker,) = cluster.pids()
    array = st.filled.remote(SIZE, 3).get(timeout=60)
    os.kill(worker, signal.SIGKILL)
    eventually(lambda: not alive(worker))
    assert int(array.sum(dtype=np.uint64)) == 3 * SIZE  # the file lives while it is mapped
    del array
    eventually(lambda: mapped_here() == 0)


def test_without_shared_memory_objects_travel_over_the_links(
    monkeypatch: pytest.MonkeyPatch, shm_left_clean: None
) -> None:
    monkeypatch.setenv(SHARED_MEMORY_ENV, "0")
    with dista.init(workers=1) as c:
        wait_for_workers(1)
        (worker,) = c.pids()
        array = st.filled.remote(SIZE, 5).get(timeout=60)
        assert int(array[-1]) == 5 and array.flags.writeable  # a copy of its own
        assert mapped_here() == 0 and files_held(worker) == 0
    assert_gone(c.pids())
