"""Actors on real processes: what a user sees of calls, order, errors, handles and kills.

One local cluster of two workers serves the module; each test ends with its actors gone
(killed, or their last handle dropped), so the next one finds both workers free.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import pickle
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import dista_proto as dp
import dista_runtime as dista
from dista_runtime._hosts.observer import ask
from dista_runtime._net.contract import Background
from dista_runtime._net.latch import Latch
from dista_runtime._session import context as _context
from dista_runtime.loops import background
from tests.processes.support import actor_classes as ac
from tests.support.cluster import settle_to_zero, stop_process, wait_for_workers


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dista.Cluster]:
    store = tmp_path_factory.mktemp("checkpoints")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISTA_CHECKPOINT_URI", store.as_uri())
        with dista.init(workers=2) as c:
            wait_for_workers(2)
            yield c


@pytest.fixture(autouse=True)
def no_actors_left(cluster: dista.Cluster) -> Iterator[None]:
    yield
    gc.collect()  # handles a failed test left behind: their actors go
    deadline = time.monotonic() + 10
    while "actor 0x" in _status():
        assert time.monotonic() < deadline, _status()
        time.sleep(0.05)


def _status() -> str:
    """What `dista status` prints, asked from this process."""
    context = _context.current()
    assert context is not None
    host, port = context.address
    loop = _loop().loop
    answered: Latch[dp.Event | None] = Latch()

    def send() -> None:  # on the loop's thread, as the CLI does
        ask(loop, host, port, dp.Status()).add_callback(lambda got: answered.set(got.result()))

    loop.call_soon_threadsafe(send)
    answer = answered.wait(10)
    assert isinstance(answer, dp.Status) and answer.text is not None
    return answer.text


@functools.cache
def _loop() -> Background:
    return background("asyncio")


def test_calls_run_in_order_and_answer_each_once(cluster: dista.Cluster) -> None:
    counter = ac.Counter.remote(10)
    assert isinstance(counter, dista.ActorHandle)
    refs = [counter.add.remote(1) for _ in range(500)]
    assert dista.get(refs, timeout=30) == list(range(11, 511))
    assert counter.value.remote().get(timeout=10) == 510
    counter.kill()


def test_an_exception_fails_that_call_only(cluster: dista.Cluster) -> None:
    counter = ac.Counter.remote()
    before = counter.add.remote(1)
    boom = counter.fail.remote("boom")
    exits = counter.exit.remote()
    after = counter.add.remote(1)
    assert before.get(timeout=10) == 1
    with pytest.raises(ValueError, match="boom"):
        boom.get(timeout=10)
    with pytest.raises(dista.TaskError, match=r"sys\.exit\(3\)"):
        exits.get(timeout=10)
    assert after.get(timeout=10) == 2  # the state lives on, and so does the worker
    counter.kill()


def test_async_methods_run_one_call_at_a_time(cluster: dista.Cluster) -> None:
    counter = ac.Counter.remote()
    refs = [counter.slow_add.remote(1) for _ in range(20)]
    assert dista.get(refs, timeout=30) == list(range(1, 21))

    async def main() -> int:
        value: int = await counter.slow_add.remote(5)
        return value

    assert asyncio.run(main()) == 25
    counter.kill()


def test_a_constructor_error_fails_every_call(cluster: dista.Cluster) -> None:
    broken = ac.Broken.remote()
    with pytest.raises(dista.TaskError, match="cannot start"):
        broken.add.remote(1).get(timeout=10)

    async def created() -> None:
        await broken

    with pytest.raises(dista.TaskError, match="cannot start"):
        asyncio.run(created())


def test_refs_as_arguments_are_read_first_in_order(cluster: dista.Cluster) -> None:
    counter = ac.Counter.remote()
    slow = ac.sleep_then.remote(0.3, 7)
    refs = [counter.record.remote(slow), counter.record.remote(8), counter.record.remote(slow)]
    assert dista.get(refs, timeout=10) == [1, 2, 3]
    assert counter.items.remote().get(timeout=10) == [7, 8, 7]
    with pytest.raises(dista.TaskError, match="KeyError"):
        counter.record.remote(ac.fails.remote()).get(timeout=10)
    counter.kill()
    del slow, refs
    settle_to_zero()


def test_a_handle_travels_to_tasks_and_other_actors(cluster: dista.Cluster) -> None:
    counter = ac.Counter.remote()
    assert ac.call_actor.remote(counter, 5).get(timeout=20) == 5
    assert counter.add.remote(1).get(timeout=10) == 6
    assert pickle.loads(pickle.dumps(counter)) == counter
    counter.kill()


def test_an_actor_calls_another(cluster: dista.Cluster) -> None:
    first, second = ac.Counter.remote(), ac.Counter.remote(100)
    assert first.call_other.remote(second, 5).get(timeout=20) == 105
    first.kill()
    second.kill()


def test_kill_fails_later_calls_and_frees_the_worker(cluster: dista.Cluster) -> None:
    counter = ac.Counter.remote()
    pid = counter.pid.remote().get(timeout=10)
    counter.kill()
    with pytest.raises(dista.TaskError, match="killed"):
        counter.add.remote(1).get(timeout=10)
    # Its worker runs tasks again.
    assert pid in dista.get([ac.pid_after.remote(0.3) for _ in range(4)], timeout=20)
    assert "kept for actor" not in _status() and ", hosts actor" not in _status()


def test_dropping_the_last_handle_kills_the_actor(cluster: dista.Cluster) -> None:
    counter = ac.Counter.remote()
    counter.add.remote(1).get(timeout=10)
    assert "actor 0x" in _status()
    del counter
    gc.collect()
    deadline = time.monotonic() + 10
    while "actor 0x" in _status():
        assert time.monotonic() < deadline, _status()
        time.sleep(0.05)
    settle_to_zero()


def test_an_unknown_method_is_an_attribute_error(cluster: dista.Cluster) -> None:
    counter = ac.Counter.remote()
    with pytest.raises(AttributeError, match="has no method 'ad'"):
        counter.ad.remote(1)  # type: ignore[attr-defined]
    counter.kill()


def test_a_class_from_a_script_travels_by_value(cluster: dista.Cluster) -> None:
    @dista.actor
    class Local:
        def __init__(self) -> None:
            self.items: list[str] = []

        def push(self, item: str) -> int:
            self.items.append(item)
            return len(self.items)

    handle = Local.remote()  # type: ignore[attr-defined]
    assert dista.get([handle.push.remote("a"), handle.push.remote("b")], timeout=20) == [1, 2]
    handle.kill()


def test_status_shows_each_actor_and_tasks_keep_their_workers(cluster: dista.Cluster) -> None:
    # Two workers and three actors: the local cluster starts a worker for each actor.
    actors = [ac.Counter.remote() for _ in range(3)]
    assert dista.get([a.add.remote(1) for a in actors], timeout=30) == [1, 1, 1]
    text = _status()
    assert text.count("ready on worker") == 3, text
    assert text.count(", hosts actor") == 3, text
    assert ac.sleep_then.remote(0, 6).get(timeout=30) == 6  # a task still has a worker
    for actor in actors:
        actor.kill()


def test_a_second_driver_calls_the_same_actor(cluster: dista.Cluster, tmp_path: Path) -> None:
    counter = ac.Counter.remote()
    handle_file = tmp_path / "handle.pickle"
    handle_file.write_bytes(pickle.dumps(counter))
    script = textwrap.dedent(
        f"""
        import pickle, dista_runtime as dista
        with dista.init(address={cluster.address!r}):
            counter = pickle.loads(open({str(handle_file)!r}, "rb").read())
            print(dista.get([counter.add.remote(10) for _ in range(5)], timeout=20)[-1])
        """
    )
    other = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        ours = [counter.add.remote(1) for _ in range(50)]
        _, err = other.communicate(timeout=60)
        assert other.returncode == 0, err
        dista.get(ours, timeout=20)
        assert counter.value.remote().get(timeout=10) == 100
        assert ac.call_actor.remote(counter, 1).get(timeout=20) == 101
    finally:
        stop_process(other)
    counter.kill()


def test_an_actor_made_for_a_call_lives_while_its_result_is_wanted(
    cluster: dista.Cluster,
) -> None:
    ref = ac.call_actor.remote(ac.Counter.remote(3), 4)  # no handle of ours outlives this
    gc.collect()
    assert ref.get(timeout=20) == 7
    del ref
    gc.collect()


def test_dropping_the_handle_lets_the_calls_already_made_run(cluster: dista.Cluster) -> None:
    # As in Ray: an actor whose handles are gone ends after the calls made to it.
    assert ac.Counter.remote(5).add.remote(1).get(timeout=20) == 6
    counter = ac.Counter.remote()
    refs = [counter.add.remote(1, 0.01) for _ in range(20)]
    del counter
    gc.collect()
    assert dista.get(refs, timeout=20) == list(range(1, 21))
