"""The calls every checker types, run on a real local cluster: `dista.Actor` subclasses
(created, called through ``h.remote(Cls.method, ...)``, named, decorated again), tasks with
four to six results, and refs passed where values are expected."""

from __future__ import annotations

import pytest

import dista_runtime as dista
from tests.support import tasks


class Ledger(dista.Actor):
    def __init__(self, start: int = 0) -> None:
        self.balance = start

    def total(self) -> int:
        return self.balance


class Account(Ledger, checkpoint_every=0):
    def deposit(self, amount: int) -> int:
        self.balance += amount
        return self.balance

    async def later(self, amount: int, note: str) -> str:
        self.balance += amount
        return f"{note}:{self.balance}"


class Bank:
    def deposit(self, amount: int) -> int:
        return -amount


@dista.task(num_returns=4)
def four(x: int) -> tuple[int, str, int, int]:
    return x, str(x), x + 1, x + 2


@dista.task(num_returns=6)
def six(x: int) -> tuple[int, int, int, int, int, int]:
    return x, x + 1, x + 2, x + 3, x + 4, x + 5


def test_an_actor_subclass_is_created_and_called_through_its_methods(
    cluster: dista.Cluster,
) -> None:
    handle = Account.remote(10)
    assert isinstance(handle, dista.ActorHandle)
    assert handle.remote(Account.deposit, 5).get(timeout=30) == 15
    three = tasks.add.remote(1, 2)
    assert handle.remote(Account.deposit, three).get(timeout=30) == 18  # a ref, read first
    assert handle.remote(Account.later, 2, "n").get(timeout=30) == "n:20"  # async def
    assert handle.remote(Account.total).get(timeout=30) == 20  # inherited
    assert handle.remote(Ledger.total).get(timeout=30) == 20
    assert handle.deposit.remote(1).get(timeout=30) == 21  # the attribute form still works
    assert handle.remote(Account.deposit, amount=4).get(timeout=30) == 25


def test_options_names_it_and_the_call_form_returns_the_class(cluster: dista.Cluster) -> None:
    assert dista.actor(Account) is Account
    named = Account.options(name="typed-ledger").remote(7)
    found = dista.get_actor("typed-ledger", Account)
    assert found.remote(Account.deposit, 1).get(timeout=30) == 8
    assert named.remote(Account.total).get(timeout=30) == 8


def test_a_subclass_decorated_again_takes_the_decorators_options(cluster: dista.Cluster) -> None:
    @dista.actor(checkpoint_every=5)
    class Kept(dista.Actor):
        def ping(self) -> str:
            return "pong"

    assert Kept.__dista_actor__.checkpoint_every == 5  # type: ignore[attr-defined]
    assert Kept.remote().remote(Kept.ping).get(timeout=30) == "pong"


def test_wrong_calls_say_what_is_wrong(cluster: dista.Cluster) -> None:
    handle = Account.remote()
    with pytest.raises(TypeError, match=r"h.remote\(str.upper\): not a method of actor Account"):
        handle.remote(str.upper)  # type: ignore[arg-type]
    # A method of another class with the same name is not this actor's (it would run it).
    with pytest.raises(TypeError, match=r"h.remote\(Bank.deposit\): not a method of actor"):
        handle.remote(Bank.deposit, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a method of the actor's class"):
        handle.remote(3)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="missing a required argument: 'amount'"):
        handle.remote(Account.deposit)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="base class"):
        dista.Actor.remote()


def test_tasks_with_four_and_six_results(cluster: dista.Cluster) -> None:
    a, b, c, d = four.remote(tasks.add.remote(1, 1))
    assert dista.get([a, b, c, d], timeout=30) == [2, "2", 3, 4]
    assert dista.get(list(six.remote(1)), timeout=30) == [1, 2, 3, 4, 5, 6]
    five = tasks.add.options(num_returns=5)
    assert isinstance(five, dista.RemoteFunction5)
    assert isinstance(six.options(max_retries=0), dista.RemoteFunction6)
    widened = four.options(num_returns=5)  # a task with several results takes it too
    assert isinstance(widened, dista.RemoteFunction5)
    assert widened.num_returns == 5 and four.num_returns == 4


@pytest.mark.parametrize(
    ("given", "said"), [(5, "not int"), ([1, 2], "not a list holding int"), ("ab", "not str")]
)
def test_get_of_something_else_says_what_it_takes(given: object, said: str) -> None:
    with pytest.raises(TypeError, match=f"dista.get takes an ObjectRef or a list of them, {said}"):
        dista.get(given)  # type: ignore[call-overload]
