"""Bindings talk to each other: the head, a worker and a driver each on its own loop.

The quick set puts every role on every binding once (three rotations of asyncio, anyio on
trio and gevent); the whole matrix (every head, worker and driver loop: 27 clusters) is
marked slow.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from dista_runtime import loops
from tests.bindings.support.loops import Cluster
from tests.support.cluster import child_env

pytestmark = pytest.mark.timeout(120)

BINDINGS = ("asyncio", "trio", "gevent")
ROTATIONS = [BINDINGS, BINDINGS[1:] + BINDINGS[:1], BINDINGS[2:] + BINDINGS[:2]]
MATRIX = [c for c in itertools.product(BINDINGS, repeat=3) if c not in ROTATIONS]

DRIVER = """
import dista_runtime as dista
from tests.support.tasks import add, nested_sum
from tests.bindings.support.tasks import async_add_nested, blob, length_and_sum
with dista.init(ADDRESS, loop=LOOP):
    data = blob.remote(20)
    print(add.remote(1, 2).get(), nested_sum.remote(5).get(), async_add_nested.remote(2, 2).get(),
          length_and_sum.remote(data).get()[0] == len(data.get()) == 20 << 20)
"""


def _combo(head: str, worker: str, driver: str) -> None:
    missing = [name for name in (head, worker, driver) if not loops.available(name)]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)}")
    cluster = Cluster(head, worker, "tests.support.tasks,tests.bindings.support.tasks")
    try:
        cluster.wait_for_workers(driver, 1)
        script = DRIVER.replace("ADDRESS", repr(cluster.address)).replace("LOOP", repr(driver))
        done = subprocess.run(  # noqa: PLW1510  (the assert shows stderr)
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=90,
            env=child_env(),
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["3", "15", "4", "True"]
    finally:
        cluster.close()


@pytest.mark.parametrize(("head", "worker", "driver"), ROTATIONS)
def test_every_role_on_every_binding(head: str, worker: str, driver: str) -> None:
    _combo(head, worker, driver)


@pytest.mark.slow
@pytest.mark.parametrize(("head", "worker", "driver"), MATRIX)
def test_the_whole_matrix(head: str, worker: str, driver: str) -> None:
    _combo(head, worker, driver)
