# pyright: strict, reportUnnecessaryTypeIgnoreComment=true
"""Public types of the bindings, checked by every checker (tests/test_typing_checkers.py): each joins a cluster with the
shape its loop uses, and a ref is awaited (or read) as its task's return type."""

from __future__ import annotations

from typing import assert_type

import dista_anyio
import dista_asyncio
import dista_gevent

import dista_runtime as dista


@dista.task
def add(a: int, b: int) -> int:
    return a + b


async def on_asyncio() -> None:
    async with dista_asyncio.connect("127.0.0.1:7420", timeout=5.0) as cluster:
        assert_type(cluster, dista.Cluster)
        assert_type(await add.remote(1, 2), int)


async def on_anyio() -> None:
    async with dista_anyio.connect("127.0.0.1:7420", cancel_remote=True) as cluster:
        assert_type(cluster, dista.Cluster)
        assert_type(await add.remote(1, 2), int)


def on_gevent() -> None:
    with dista_gevent.connect("127.0.0.1:7420") as cluster:
        assert_type(cluster, dista.Cluster)
        assert_type(add.remote(1, 2).get(), int)


def by_name() -> None:
    with dista.init(loop="trio") as cluster:
        assert_type(cluster, dista.Cluster)
    dista_asyncio.connect(7420)  # type: ignore  # an address is a string
    dista_gevent.connect("127.0.0.1:7420", cancel_remote=True)  # type: ignore
