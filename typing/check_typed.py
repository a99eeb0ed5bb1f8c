# pyright: strict, reportUnnecessaryTypeIgnoreComment=true
"""A typed consumer module, the same under every checker: pyright --strict, mypy --strict
with Dista's plugin, and mypy --strict without it (tests/test_typing_checkers.py runs all
three). Every ``assert_type`` holds in each; every ``# type: ignore`` marks a wrong call
that each must report (mypy's ``warn_unused_ignores`` and pyright's
``reportUnnecessaryTypeIgnoreComment`` fail the check if one stops being an error). The
ignores carry no error code because the checkers name the same mistake differently.
Importing this module runs nothing: the calls sit in functions nobody calls.
"""

from __future__ import annotations

from typing import assert_type, overload

import dista_asyncio

import dista_runtime as dista
from dista_runtime import ActorHandle, ObjectRef


@dista.task
def load(path: str) -> bytes:
    return path.encode()


@dista.task
def parse(data: bytes, strict: bool = True) -> list[int]:
    return list(data)


@dista.task
def total(values: list[int], scale: int = 1) -> int:
    return sum(values) * scale


@dista.task
async def fetch(url: str, retries: int) -> str:
    return url * retries


@dista.task(num_returns=2)
def split(x: int) -> tuple[int, str]:
    return x, str(x)


@dista.task(num_returns=4)
def stats(values: list[int]) -> tuple[int, int, float, int]:
    return min(values), max(values), sum(values) / len(values), len(values)


@dista.task
def tag(value: int, *, label: str) -> str:
    return f"{label}={value}"


@dista.task
def row(a: int, b: int, c: int, d: int, e: str, f: float, *, g: int = 0) -> str:
    return e * (a + b + c + d + g) + str(f)


class Ledger(dista.Actor):
    def audit(self) -> int:
        return 0


class Account(Ledger, checkpoint_every=100):
    def __init__(self, owner: str, balance: int = 0) -> None:
        self.owner = owner
        self.balance = balance

    def deposit(self, amount: int) -> int:
        self.balance += amount
        return self.balance

    async def statement(self, month: int, note: str) -> str:
        return f"{self.owner} {month} {note}"

    @overload
    def read(self, field: int) -> int: ...
    @overload
    def read(self, field: str) -> str: ...
    def read(self, field: int | str) -> int | str:
        return field


def pipeline() -> None:
    data = load.remote("a.txt")
    assert_type(data, ObjectRef[bytes])
    numbers = parse.remote(data)  # a ref where the value is expected
    assert_type(numbers, ObjectRef[list[int]])
    assert_type(parse.remote(data, False), ObjectRef[list[int]])
    assert_type(total.remote(numbers, 2), ObjectRef[int])
    assert_type(total.remote(values=[1, 2]), ObjectRef[int])
    assert_type(fetch.remote("u", 3), ObjectRef[str])  # async def: its result, awaited
    n, text = split.remote(total.remote(numbers))
    assert_type(n, ObjectRef[int])
    assert_type(text, ObjectRef[str])
    low, high, mean, count = stats.remote(numbers)
    assert_type(mean, ObjectRef[float])
    assert_type(tag.remote(n, label="n"), ObjectRef[str])  # a ref, then keywords
    assert_type(row.remote(1, 2, 3, n, text, 1.5), ObjectRef[str])  # refs up to the sixth place
    assert_type(row.remote(n, n, n, n, text, mean, g=1), ObjectRef[str])
    assert_type(parse.remote(data, strict=False), ObjectRef[list[int]])
    assert_type(tag.remote(1, label=dista.value_of(text)), ObjectRef[str])  # a keyword ref
    assert_type(total.remote([1, dista.value_of(n)]), ObjectRef[int])  # a ref in a list
    assert_type(dista.get(n), int)
    assert_type(dista.get([low, high, count]), list[int])
    done, _ = dista.wait([low, high], num_returns=1, timeout=5.0)
    assert_type(done, list[ObjectRef[int]])
    assert_type(dista.put([1, 2]), ObjectRef[list[int]])


def wrong_tasks(s: ObjectRef[str], n: ObjectRef[int]) -> None:
    load.remote(3)  # type: ignore
    load.remote(n)  # type: ignore  # a ref of the wrong type
    parse.remote("text")  # type: ignore
    total.remote(n)  # type: ignore  # an ObjectRef[int] is no list[int]
    total.remote()  # type: ignore
    total.remote([1], 2, 3)  # type: ignore
    fetch.remote("u")  # type: ignore
    split.remote(s)  # type: ignore
    tag.remote(1, "n")  # type: ignore  # label is keyword-only
    tag.remote(s, label="n")  # type: ignore  # a ref of the wrong type, then keywords
    tag.remote(n, label=3)  # type: ignore
    tag.remote(1, label=dista.value_of(n))  # type: ignore  # the ref's own type is checked
    stats.remote(n)  # type: ignore
    row.remote(1, 2, 3, 4, n, 1.5)  # type: ignore  # the fifth place takes a str
    row.remote(1, 2, 3, 4, "e", s)  # type: ignore  # the sixth a float
    row.remote(1, 2, 3, 4, "e", 1.5, g=s)  # type: ignore  # a str ref for an int, by keyword


def accounts(owner: ObjectRef[str]) -> None:
    h = Account.remote("ada", 10)
    assert_type(h, ActorHandle[Account])
    assert_type(Account.remote(owner), ActorHandle[Account])  # a ref to the constructor
    assert_type(Account.remote(owner, balance=5), ActorHandle[Account])
    assert_type(Account.options(name="ada").remote(owner), ActorHandle[Account])
    assert_type(Account.options(name="ada").remote("ada"), ActorHandle[Account])
    assert_type(dista.actor(Account).remote("bob"), ActorHandle[Account])
    assert_type(h.remote(Account.deposit, 5), ObjectRef[int])
    assert_type(h.remote(Account.deposit, total.remote([1])), ObjectRef[int])  # a ref
    assert_type(h.remote(Account.statement, 1, owner), ObjectRef[str])  # async, a ref
    assert_type(h.remote(Account.statement, 1, note="n"), ObjectRef[str])
    assert_type(h.remote(Account.audit), ObjectRef[int])  # inherited
    assert_type(h.remote(Account.read, 1), ObjectRef[int])  # overloaded
    assert_type(h.remote(Account.read, "f"), ObjectRef[str])
    h.checkpoint()
    h.kill()


def wrong_actors(h: ActorHandle[Account], n: ObjectRef[int]) -> None:
    Account.remote()  # type: ignore
    Account.remote(3)  # type: ignore
    Account.remote(n)  # type: ignore
    Account.remote("ada", 1, 2)  # type: ignore
    h.remote(Account.deposit, "5")  # type: ignore
    h.remote(Account.deposit, dista.value_of(h.remote(Account.statement, 1, "")))  # type: ignore
    h.remote(Account.deposit)  # type: ignore
    h.remote(Account.statement, 1)  # type: ignore
    h.remote(Account.statement, n, note=1)  # type: ignore
    Account.remote(n, balance=1)  # type: ignore
    h.remote(Account.read, 1.5)  # type: ignore
    h.remote(str.upper)  # type: ignore  # not the actor's method


async def on_asyncio(n: ObjectRef[int]) -> None:
    async with dista_asyncio.connect("127.0.0.1:7420", timeout=5.0) as cluster:
        assert_type(cluster, dista.Cluster)
        assert_type(await n, int)
        assert_type(await total.remote([1, 2]), int)
        assert_type(await Account.remote("ada").remote(Account.deposit, 1), int)
