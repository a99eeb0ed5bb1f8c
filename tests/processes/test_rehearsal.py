"""A rehearsal of what an orchestrator does, with real processes, each role in a network
namespace of its own as a pod would be (tests/processes/support/netns.py), every link
mutual TLS: workers started before their head wait for it; a rolling restart of every
worker (SIGTERM one at a time, a new one started in its place) under a running workload;
the head's pod killed (SIGKILL, or SIGTERM to a head run with ``--on-sigterm restart`` as
the manifests run it) and a new head started on the same address; a scale-down
that drains the removed workers. Through each, the driver checks every result and both
checkpointed actors' answers, in order (tests/processes/support/rehearsal_driver.py).

Needs root and iproute2 (skipped otherwise, saying why).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes.support import netns
from tests.processes.support.rehearsal import WORKERS, Cluster, Unavailable, rehearsal_cluster

# The network namespaces are the machine's: one such test at a time (pytest-xdist).
pytestmark = pytest.mark.xdist_group("netns")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    try:
        with rehearsal_cluster(tmp_path) as built:
            yield built
    except Unavailable as e:
        pytest.skip(str(e))


@pytest.mark.timeout(300)
def test_workers_wait_for_their_head_then_a_rolling_restart_loses_nothing(
    cluster: Cluster,
) -> None:
    for host in cluster.hosts:  # before the head: they wait for it
        cluster.start_worker(host)
    assert netns.wait_until(
        lambda: all("yet (connection refused)" in p.output() for p in cluster.workers.values()), 20
    ), cluster.why("the workers did not say they wait for their head")
    cluster.start_head()
    cluster.wait_workers(WORKERS)
    driver = cluster.run_driver("driver-rolling", 20_000)
    for n, host in enumerate(cluster.hosts, start=1):  # one pod at a time
        cluster.drain(cluster.workers[host.role])
        cluster.start_worker(host, n)
        cluster.wait_workers(WORKERS)
    summary = cluster.finish(driver)
    assert summary["wrong"] == 0 and summary["actors_in_order"], summary
    assert summary["balances"] == summary["expected"], summary
    # (Its time against a run without the restart: benchmarks, not here.)
    print(f"20,000 tasks through a rolling restart of {WORKERS} workers: {summary['seconds']} s")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_the_head_pod_killed_and_rescheduled_drivers_and_workers_resume(
    cluster: Cluster, how: str
) -> None:
    """SIGKILL: its node died. SIGTERM: the pod was deleted, evicted or rolled, and the
    head (``--on-sigterm restart``) leaves at once, exit 0, the cluster running on."""
    cluster.start_head()
    for host in cluster.hosts:
        cluster.start_worker(host)
    cluster.wait_workers(WORKERS)
    driver = cluster.run_driver("driver", 5_000)
    assert cluster.head is not None
    cluster.head.popen.send_signal(getattr(signal, how))
    code = cluster.head.popen.wait(10)
    if how == "SIGTERM":
        assert code == 0, cluster.why(f"the head exited {code} on SIGTERM")
        assert "leaving; the cluster runs on" in cluster.head_output()
    cluster.start_head()  # the same Service address
    summary = cluster.finish(driver)
    assert summary["wrong"] == 0 and summary["actors_in_order"], summary
    assert summary["balances"] == summary["expected"], summary
    cluster.wait_workers(WORKERS)


@pytest.mark.timeout(300)
def test_a_scale_down_drains_the_removed_workers(cluster: Cluster) -> None:
    cluster.start_head()
    for host in cluster.hosts:
        cluster.start_worker(host)
    cluster.wait_workers(WORKERS)
    driver = cluster.run_driver("driver", 5_000)
    # Replicas 4 -> 3. (Two workers host the driver's two actors, as an actor takes a whole
    # worker: down to 2, no worker would be left for tasks, and they would wait for one.)
    cluster.drain(cluster.workers[cluster.hosts[-1].role])
    summary = cluster.finish(driver)
    assert summary["wrong"] == 0 and summary["actors_in_order"], summary
    assert summary["balances"] == summary["expected"], summary
    cluster.wait_workers(WORKERS - 1)
