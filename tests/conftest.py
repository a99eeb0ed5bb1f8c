"""The fixtures every suite may use, in one place; the code they build on is in tests/support/
(and a suite's own helpers in its support/ folder). No suite has a conftest.py of its own,
so no suite imports another's: tests/README.md says what goes where."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import dista_proto._head
import dista_runtime as dista
from tests.support.cluster import CliHead, assert_gone, wait_for_workers
from tests.support.processes import Procs

if TYPE_CHECKING:
    from tests.bindings.support.loops import Cluster


def pytest_report_header() -> str:
    # A checkout built in place with DISTA_MYPYC=1 runs the compiled core: say which.
    compiled = not dista_proto._head.__file__.endswith(".py")
    return f"dista_proto: {'compiled (mypyc)' if compiled else 'pure Python'}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[dista.Cluster]:
    """A local cluster (a head and two workers) shared by a module's tests."""
    from tests.support import tasks  # noqa: F401  (registered before init: known by name)

    with dista.init(workers=2) as c:
        wait_for_workers(2)
        yield c
    assert_gone(c_pids := c.pids() or [])  # noqa: F841


@pytest.fixture
def cli_head() -> Iterator[CliHead]:
    head = CliHead()
    try:
        yield head
    finally:
        head.close()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    """Processes a test starts (`tests.support.processes.Procs`), all killed at its end."""
    p = Procs(tmp_path)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def cli_cluster() -> Iterator[list[Cluster]]:
    """Clusters a test starts with `Cluster(...)` and appends here: closed at its end."""
    started: list[Cluster] = []
    try:
        yield started
    finally:
        for cluster in started:
            cluster.close()
