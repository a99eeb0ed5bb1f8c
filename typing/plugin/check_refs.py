"""What mypy's plugin adds, checked by mypy --strict with ``dista_runtime.mypy_plugin``
only (pyproject's mypy configuration): refs as keywords, refs inside containers two levels
down, generic tasks given refs. Other checkers type these calls with ``dista.value_of``
(docs/typing.md); what every checker types is in ``typing/check_runtime.py``.

As there: every ``assert_type`` is a claim about what users see, every
``# type: ignore[code]`` a call that must stay an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar, assert_type

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
def fan_in(values: list[int]) -> int:
    return sum(values)


@task
def containers(
    seq: Sequence[int] = (),
    it: Iterable[float] = (),
    tup: tuple[int, ...] = (),
    pair: tuple[int, str] = (0, ""),
    tags: set[str] | None = None,
    frozen: frozenset[int] = frozenset(),
) -> int:
    return 0


@task
def mappings(d: dict[str, int], m: Mapping[str, int] | None = None) -> int:
    return 0


@task
def grid(rows: list[list[int]], by_name: dict[str, list[int]] | None = None) -> int:
    return 0


@task
def cube(xs: list[list[list[int]]]) -> int:
    return 0


@task
def ident(x: T) -> T:
    return x


@task(max_retries=1)
def first(xs: list[T]) -> T:
    return xs[0]


@task
def or_else(x: T | None, default: T) -> T:
    return default if x is None else x


@task
def bump(x: N) -> N:
    return x


@task(num_returns=2)
def dup(x: T) -> tuple[T, T]:
    return x, x


@task
async def aident(x: T) -> T:
    return x


def check_keywords(r: ObjectRef[int], s: ObjectRef[str], f: ObjectRef[float]) -> None:
    # A ref where its value is expected, by keyword or beside keywords.
    assert_type(add.remote(a=r, b=3), ObjectRef[int])
    assert_type(add.remote(1, b=r), ObjectRef[int])
    assert_type(scale.remote(f, factor=r), ObjectRef[float])
    assert_type(total.remote(1, r, 3, w=f, v=2.0), ObjectRef[float])  # *args, **kwargs
    assert_type(maybe.remote(r, label=s), ObjectRef[str])


def check_nested(
    r: ObjectRef[int],
    s: ObjectRef[str],
    f: ObjectRef[float],
    ints: list[int],
    refs: list[ObjectRef[int]],
    either: list[int | ObjectRef[int]],
    ref_list: ObjectRef[list[int]],
    bools: list[bool],
    str_refs: list[ObjectRef[str]],
) -> None:
    # Refs inside containers, two levels down (the plugin): the worker receives the values.
    assert_type(fan_in.remote([r, r]), ObjectRef[int])  # fan-in
    assert_type(fan_in.remote([r, 3]), ObjectRef[int])
    assert_type(fan_in.remote([1, 2]), ObjectRef[int])
    assert_type(fan_in.remote([]), ObjectRef[int])
    assert_type(fan_in.remote(ints), ObjectRef[int])
    assert_type(fan_in.remote(refs), ObjectRef[int])  # list is invariant, and still fits
    assert_type(fan_in.remote(either), ObjectRef[int])
    assert_type(fan_in.remote(ref_list), ObjectRef[int])
    assert_type(fan_in.remote(values=list(refs)), ObjectRef[int])
    assert_type(fan_in.remote([add.remote(x, 1) for x in ints]), ObjectRef[int])
    assert_type(fan_in.remote([add.remote(1, 2), add.remote(3, 4)]), ObjectRef[int])
    assert_type(containers.remote((r, 3), [f, r, 1.5], (r, r), (r, s)), ObjectRef[int])
    assert_type(containers.remote(refs, iter(refs), tup=(), tags={s, "x"}), ObjectRef[int])
    assert_type(containers.remote(frozen=frozenset({r, 2})), ObjectRef[int])
    assert_type(mappings.remote({"a": r, "b": 2}, {"c": r}), ObjectRef[int])
    by_name = {str(n): add.remote(n, 1) for n in ints}  # dict[str, ObjectRef[int]]
    assert_type(mappings.remote(by_name, m=None), ObjectRef[int])
    assert_type(grid.remote([[r, 1], ref_list, refs, ints]), ObjectRef[int])
    assert_type(grid.remote([], {"a": [r], "b": ref_list}), ObjectRef[int])
    assert_type(cube.remote([[ints, [1], ref_list]]), ObjectRef[int])

    # Still errors: a ref or value of the wrong type, at any level, or the wrong container.
    fan_in.remote([s])  # type: ignore[list-item]
    fan_in.remote(["x"])  # type: ignore[list-item]
    fan_in.remote([r, "x"])  # type: ignore[list-item]
    fan_in.remote(str_refs)  # type: ignore[arg-type]
    fan_in.remote(bools)  # type: ignore[arg-type]  # a list[bool] is no list[int]
    fan_in.remote((r, 3))  # type: ignore[arg-type]  # a tuple is no list
    fan_in.remote({r})  # type: ignore[arg-type]
    fan_in.remote([ref_list])  # type: ignore[list-item]  # no refs of lists among ints
    containers.remote(pair=(s, s))  # type: ignore[arg-type]
    containers.remote(tup=[r])  # type: ignore[arg-type]
    containers.remote(tags=frozenset({s}))  # type: ignore[arg-type]
    mappings.remote({"a": s})  # type: ignore[dict-item]
    mappings.remote({1: r})  # type: ignore[dict-item]  # keys are not widened
    grid.remote([(1, 2)])  # type: ignore[arg-type]  # an item of the wrong container
    grid.remote([bools])  # type: ignore[arg-type]
    grid.remote([], {"a": (r,)})  # type: ignore[arg-type]
    grid.remote([[s]])  # type: ignore[list-item]
    cube.remote([[[r]]])  # type: ignore[list-item]  # three levels down: not widened


def check_generic(r: ObjectRef[int], s: ObjectRef[str], rs: ObjectRef[list[int]]) -> None:
    # Generic tasks stay generic (the plugin), and a ref of T stands for a T.
    assert_type(ident.remote(1), ObjectRef[int])
    assert_type(ident.remote(r), ObjectRef[int])
    assert_type(ident.remote(s), ObjectRef[str])
    assert_type(first.remote([1, 2]), ObjectRef[int])
    assert_type(first.remote(rs), ObjectRef[int])
    assert_type(or_else.remote(None, r), ObjectRef[int])
    assert_type(or_else.remote(r, default=0), ObjectRef[int])
    assert_type(bump.remote(r), ObjectRef[int])
    assert_type(dup.remote(s), tuple[ObjectRef[str], ObjectRef[str]])
    assert_type(aident.remote(r), ObjectRef[int])
    assert_type(ident(1), int)
    bump.remote(s)  # type: ignore[type-var]  # N is bounded by int
    bump.remote("x")  # type: ignore[call-overload]
    first.remote(s)  # type: ignore[arg-type]  # a ref, but not of a list
    first.remote(1)  # type: ignore[arg-type]
