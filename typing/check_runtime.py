# pyright: strict, reportUnnecessaryTypeIgnoreComment=true
"""Public types of dista_runtime, the same under every checker: pyright --strict, mypy
--strict with ``dista_runtime.mypy_plugin`` and without it (tests/test_typing_checkers.py).
What only the plugin adds is in ``typing/plugin/``.

Every ``assert_type`` is a claim about what users see; every ``# type: ignore`` is a
call that must stay an error in each checker (pyright's ``reportUnnecessaryTypeIgnoreComment``
and mypy's ``warn_unused_ignores`` fail the check if it stops being one; no error codes, as
the checkers name the same mistake differently). Importing this module runs nothing that needs a cluster: the tasks are only
decorated, and the calls sit in functions nobody calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar, assert_type

import dista_runtime as dista
from dista_runtime import ObjectRef, task

T = TypeVar("T")
N = TypeVar("N", bound=int)


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def scale(x: float, factor: float = 2.0) -> float:
    return x * factor


@task
def total(*xs: int, **weights: float) -> float:
    return sum(xs) + sum(weights.values())


@task
def maybe(x: int | None, *, label: str = "") -> str:
    return f"{label}{x}"


@task
def anything(x: Any) -> int:
    return 0


@task
async def fetch(key: str) -> bytes:
    return key.encode()


@task(max_retries=1)
def retried(a: int) -> int:
    return a


@task(num_returns=1, max_retries=None)
def one(a: int) -> str:
    return str(a)


@task(num_returns=2)
def split(a: int) -> tuple[int, str]:
    return a, str(a)


@task(num_returns=2, max_retries=2)
async def asplit(a: int) -> tuple[str, int]:
    return str(a), a


@task(num_returns=3)
def three() -> tuple[int, str, bytes]:
    return 1, "", b""


@task(num_returns=5)
def five() -> tuple[int, int, int, int, int]:
    return 1, 2, 3, 4, 5


def undecorated(a: int) -> int:
    return a


# num_returns=2 on a function that does not return a 2-tuple: caught at the decorator.
@task(num_returns=2)  # type: ignore
def not_a_pair() -> int:
    return 1


def check_remote(r: ObjectRef[int], s: ObjectRef[str], f: ObjectRef[float]) -> None:
    assert_type(add.remote(1, 2), ObjectRef[int])
    # A ref where its value is expected, by position (by keyword: typing/plugin/check_refs.py).
    assert_type(add.remote(r, 3), ObjectRef[int])
    assert_type(add.remote(r, r), ObjectRef[int])
    assert_type(add.remote(add.remote(1, 2), 3), ObjectRef[int])  # a chain
    assert_type(scale.remote(r), ObjectRef[float])  # ObjectRef[int] is an ObjectRef[float]
    assert_type(maybe.remote(None), ObjectRef[str])
    assert_type(anything.remote(s), ObjectRef[int])  # Any takes anything, a ref too
    assert_type(retried.remote(r), ObjectRef[int])
    assert_type(one.remote(1), ObjectRef[str])
    assert_type(dista.task(undecorated).remote(r), ObjectRef[int])
    assert_type(split.remote(r), tuple[ObjectRef[int], ObjectRef[str]])
    assert_type(three.remote(), tuple[ObjectRef[int], ObjectRef[str], ObjectRef[bytes]])
    assert_type(
        five.remote(),
        tuple[ObjectRef[int], ObjectRef[int], ObjectRef[int], ObjectRef[int], ObjectRef[int]],
    )
    n, label = split.remote(1)
    assert_type(add.remote(n, 1), ObjectRef[int])
    assert_type(fetch.remote(label), ObjectRef[bytes])

    # What must stay an error.
    add.remote("x", 2)  # type: ignore
    add.remote(s, 2)  # type: ignore  # a ref of the wrong type
    add.remote(a=s, b=2)  # type: ignore
    add.remote(f, 2)  # type: ignore  # ObjectRef[float] is no ObjectRef[int]
    add.remote(1)  # type: ignore  # missing argument
    add.remote(1, 2, 3)  # type: ignore  # too many
    add.remote(1, 2, c=3)  # type: ignore  # unknown keyword
    add.remote(a=1, c=3)  # type: ignore
    total.remote(1, s)  # type: ignore
    total.remote(w=s)  # type: ignore
    maybe.remote(1, s)  # type: ignore  # label is keyword-only
    split.remote(s)  # type: ignore
    five.remote(1)  # type: ignore
    fetch.remote(r)  # type: ignore


def check_options(r: ObjectRef[int], s: ObjectRef[str]) -> None:
    """``f.options(...)``: the same parameters, refs taken; results as ``num_returns`` says."""
    assert_type(add.options(name="sum", max_retries=1).remote(r, 2), ObjectRef[int])
    assert_type(add.options(max_retries=None).remote(1, 2), ObjectRef[int])
    pair = one.options(num_returns=2).remote(1)  # (typing only: one returns no pair)
    assert_type(pair, tuple[ObjectRef[Any], ObjectRef[Any]])
    assert_type(split.options(name="s").remote(r), tuple[ObjectRef[int], ObjectRef[str]])
    assert_type(
        five.options(max_retries=0).remote(),
        tuple[ObjectRef[int], ObjectRef[int], ObjectRef[int], ObjectRef[int], ObjectRef[int]],
    )
    add.options(name="x").remote(s, 2)  # type: ignore
    add.options(retries=1)  # type: ignore


def check_local(r: ObjectRef[int]) -> None:
    # Calling the task here runs the function: values only, no refs.
    assert_type(add(1, 2), int)
    assert_type(split(1), tuple[int, str])
    assert_type(three(), tuple[int, str, bytes])
    assert_type(five(), tuple[int, int, int, int, int])
    add(r, 2)  # type: ignore


async def check_await(r: ObjectRef[int]) -> None:
    assert_type(await r, int)
    assert_type(await add.remote(1, 2), int)
    assert_type(await fetch.remote("k"), bytes)  # an async task's ref holds its result
    a, b = asplit.remote(1)
    assert_type(await a, str)
    assert_type(await b, int)


def check_ref(r: ObjectRef[int]) -> None:
    assert_type(r.get(), int)
    assert_type(r.get(timeout=1.5), int)
    assert_type(r.get(None), int)
    assert_type(r.done(), bool)
    assert_type(r.cancel(), None)
    assert_type(r.cancel(force=True), None)
    assert_type(r.release(), None)
    assert_type(r.object_id, int)
    wide: ObjectRef[object] = r  # covariant
    narrow: ObjectRef[bool] = r  # type: ignore
    del wide, narrow


def check_api(r1: ObjectRef[int], r2: ObjectRef[int], s: ObjectRef[str]) -> None:
    assert_type(dista.get(r1), int)
    assert_type(dista.get(r1, timeout=2.0), int)
    assert_type(dista.get([r1, r2]), list[int])
    mixed: list[object] = dista.get(split.remote(1))  # mypy: list[object], pyright: a union
    mixed = dista.get(three.remote())
    del mixed
    assert_type(dista.get(five.remote()), list[int])
    done, pending = dista.wait([r1, r2], num_returns=1, timeout=5.0)
    assert_type(done, list[ObjectRef[int]])
    assert_type(pending, list[ObjectRef[int]])
    assert_type(dista.wait([r1, r2]), tuple[list[ObjectRef[int]], list[ObjectRef[int]]])
    assert_type(dista.as_completed([r1, r2]), Iterator[ObjectRef[int]])
    for ref in dista.as_completed([r1, r2], timeout=1.0):
        assert_type(ref.get(), int)
    assert_type(dista.stats(), dista.HeadStats)
    assert_type(dista.stats().workers, int)
    assert_type(dista.timeline(), list[dista.TimelineRecord])
    assert_type(dista.local_pids(), list[int])
    dista.get(1)  # type: ignore  # not a ref
    dista.get(s, timeout="soon")  # type: ignore


def check_put(array: list[float]) -> None:
    assert_type(dista.put(3), ObjectRef[int])
    assert_type(dista.put("s"), ObjectRef[str])
    assert_type(dista.put(array), ObjectRef[list[float]])
    assert_type(dista.put({"k": (1, b"")}), ObjectRef[dict[str, tuple[int, bytes]]])
    stored = dista.put(2)
    assert_type(add.remote(stored, 1), ObjectRef[int])  # a put ref is a ref like any other
    assert_type(dista.get(dista.put(2.5)), float)
    assert_type(dista.get([dista.put(1), dista.put(2)]), list[int])
    add.remote(dista.put("no"), 1)  # type: ignore


async def check_async_api() -> None:
    assert_type(await dista.stats_async(), dista.HeadStats)
    assert_type(await dista.stats_async(timeout=2.0), dista.HeadStats)
    assert_type(await dista.timeline_async(), list[dista.TimelineRecord])
    assert_type(await dista.timeline_async(None), list[dista.TimelineRecord])
    assert_type((await dista.stats_async()).objects, int)
    await dista.stats_async(timeout="soon")  # type: ignore


def check_init() -> None:
    assert_type(dista.init(), dista.Cluster)
    assert_type(dista.init("127.0.0.1:7420"), dista.Cluster)
    with dista.init(workers=2) as cluster:
        assert_type(cluster, dista.Cluster)
        assert_type(cluster.address, str)
        assert_type(cluster.pids(), list[int])
    with dista.init(address="10.0.0.1:7420", timeout=5.0):
        pass
    assert_type(dista.shutdown(), None)
    dista.init(workers="2")  # type: ignore


def check_logs() -> None:
    import logging

    from dista_runtime import logs

    assert_type(logs.configure("head"), logging.Handler)
    assert_type(logs.configure("worker pid 812", "json", level="WARNING"), logging.Handler)
    assert_type(logs.log_format(), logs.LogFormat)
    assert_type(logs.Formatter("head", "text").format(logging.makeLogRecord({})), str)
    logs.configure("head", "xml")  # type: ignore
