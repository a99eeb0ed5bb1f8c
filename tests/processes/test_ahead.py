"""Tasks sent ahead (docs/protocol.md, "Tasks sent ahead"), with real processes: a chain of
short tasks runs on the worker making each link's input, its links sent there before the
input exists; a link that raises fails the rest of the chain naming it; a worker killed
with SIGKILL in the middle of a chain loses nothing (its links run again elsewhere); a
cancelled link fails what follows it, and nothing is left held.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

import dista_runtime as dista
from tests.processes.support import chain_tasks as ct
from tests.support.cluster import alive, assert_gone, settle_to_zero, wait_for_workers

#: Never beside the type checkers and the compiled build (one xdist group, run in turn):
#: they take both cores, and what is sent ahead depends on tasks measured as short.
pytestmark = pytest.mark.xdist_group("cpu")


@pytest.fixture
def two_workers() -> Iterator[dista.Cluster]:
    with dista.init(workers=2) as c:
        wait_for_workers(2)
        # The head sends ahead only tasks it knows to be short: let it see some.
        ref = ct.first.remote()
        for _ in range(20):
            ref = ct.link.remote(ref)
        assert ref.get(timeout=30)[0] == 20
        del ref
        yield c
    assert_gone(c.pids())


def chain(n: int, **kwargs: float) -> list[dista.ObjectRef[tuple[int, int]]]:
    refs = [ct.first.remote()]
    for _ in range(n):
        refs.append(ct.link.remote(refs[-1], **kwargs))  # type: ignore[arg-type]
    return refs


def test_a_chain_stays_on_the_worker_that_makes_its_inputs(two_workers: dista.Cluster) -> None:
    # Only links measured as short go ahead (a moving average under 0.5 ms): a worker
    # descheduled for a few ms by a busy machine makes the next links "not known to be
    # short" for a while, and those go through the queue to either worker. So the claim is
    # checked on up to three chains: sending ahead that works keeps one of them on one
    # worker; sending ahead that does not spreads every one of them over both.
    seen = []
    for _ in range(3):
        refs = chain(400)
        values = dista.get(refs, timeout=60)
        assert [count for count, _ in values] == list(range(401))
        # Sent ahead, link after link goes where its input is made: one worker runs nearly all.
        where = [pid for _, pid in values[1:]]
        seen.append({pid: where.count(pid) for pid in set(where)})
        del refs, values
        if max(seen[-1].values()) >= 0.9 * len(where):
            break
    else:
        raise AssertionError(f"every chain spread over the workers: {seen}")
    settle_to_zero()


def test_a_link_that_raises_fails_the_rest_naming_it(two_workers: dista.Cluster) -> None:
    refs = chain(60, raise_at=30)  # type: ignore[arg-type]
    assert refs[30].get(timeout=30)[0] == 30
    with pytest.raises(ValueError, match="link 30 raised on purpose"):
        refs[31].get(timeout=30)
    with pytest.raises(dista.TaskError, match=r"input 0x[0-9a-f]+ failed"):
        refs[-1].get(timeout=30)
    # The cluster goes on: a new chain is right.
    assert chain(50)[-1].get(timeout=30)[0] == 50
    del refs
    settle_to_zero()


def test_a_worker_killed_mid_chain_loses_nothing(two_workers: dista.Cluster) -> None:
    refs = chain(3000, pause=0.0002)
    deadline = time.monotonic() + 30
    while not refs[300].done():
        assert time.monotonic() < deadline, "the chain did not get to link 300"
        time.sleep(0.005)
    victim = refs[300].get(timeout=10)[1]
    assert victim in two_workers.pids() and not refs[-1].done()
    os.kill(victim, signal.SIGKILL)
    count, ran_on = refs[-1].get(timeout=120)
    assert count == 3000 and ran_on != victim
    assert not alive(victim)
    values = dista.get(refs, timeout=60)
    assert [c for c, _ in values] == list(range(3001))
    del refs, values
    settle_to_zero()


def test_a_cancelled_link_fails_what_follows(two_workers: dista.Cluster) -> None:
    refs = chain(2000, pause=0.0002)
    refs[1500].cancel()
    last = refs[-1]
    with pytest.raises(dista.TaskError, match="cancel"):
        last.get(timeout=60)
    assert refs[1499].get(timeout=60)[0] == 1499
    del refs, last
    settle_to_zero()
