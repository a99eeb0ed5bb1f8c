"""Values as Ray users expect: classes and functions of ``__main__`` travel by value.

Unit tests of the encoding (plain pickle for what every process can import, cloudpickle for
what it cannot), then real scripts on real local clusters, run both ways a user runs them:
``python script.py`` and ``dista run script.py``. Under ``dista run`` the driver's
``__main__`` is the script (runpy) and a worker's is its command line; only by-value
pickling makes a script's dataclass and exception class arrive.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import dista_runtime as dista
from dista_runtime._values.codec import decode, decode_call, dumps, encode, encode_call
from tests.support import tasks


@dataclass
class Point:
    x: int
    y: int


class MainError(Exception):
    pass


@pytest.fixture
def in_main(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Point` and `MainError` as if a script defined them: in ``__main__``."""
    main = sys.modules["__main__"]
    for cls in (Point, MainError):
        monkeypatch.setattr(cls, "__module__", "__main__")
        monkeypatch.setattr(main, cls.__name__, cls, raising=False)


def by_value(data: object) -> bool:
    """Whether an encoded value carries a class or function by value (cloudpickle)."""
    return b"cloudpickle" in bytes(data)  # type: ignore[arg-type]


def test_plain_values_stay_plain_pickle() -> None:
    for value in [1, "s", (1, 2.0), {"a": [1, 2]}, tasks.Custom(3), np.arange(5)]:
        data = encode(value)
        assert not by_value(data), value
        assert bytes(data)[:1] == b"\x80"  # a pickle: small buffers stay inside it
    array = np.arange(1 << 16)  # 512 KiB: out of band, after the pickle
    assert bytes(encode(array))[:1] == b"\x01"
    assert np.array_equal(decode(encode(array)), array)


def test_main_classes_travel_by_value(in_main: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain pickle would send ``__main__.Point`` by name, which a worker cannot find."""
    data = encode([Point(1, 2), {"p": Point(3, 4)}])
    assert by_value(data)
    monkeypatch.delattr(sys.modules["__main__"], "Point")  # as on a worker's __main__
    value = decode(data)
    assert value == [Point(1, 2), {"p": Point(3, 4)}]
    assert type(value[0]) is Point  # cloudpickle keeps the class's identity in one process


def test_main_exceptions_travel_by_value(in_main: None) -> None:
    blob = dumps(MainError("no"))
    assert b"cloudpickle" in blob
    error = pickle.loads(blob)
    assert type(error) is MainError and error.args == ("no",)


def test_lambdas_and_closures_travel(in_main: None) -> None:
    k = 5
    assert decode(encode(lambda x: x + k))(1) == 6

    class Local:  # not importable anywhere
        def __init__(self) -> None:
            self.v = 7

    assert decode(encode(Local())).v == 7
    argument, inputs = encode_call((Point(1, 1),), {"f": lambda: k}, dista.ObjectRef, "t")
    assert inputs == []
    args, kwargs = decode_call(argument, ())
    assert args == (Point(1, 1),) and kwargs["f"]() == 5  # type: ignore[operator]


def test_unpicklable_still_says_what() -> None:
    import threading

    with pytest.raises(TypeError, match=r"argument 1 of t \(lock\) cannot be pickled"):
        encode_call((1, threading.Lock()), {}, dista.ObjectRef, "t")
    with pytest.raises(TypeError, match=r"the task's result \(generator\) cannot be pickled"):
        encode((i for i in range(3)), "the task's result")


SCRIPT = textwrap.dedent(
    """
    import sys
    from dataclasses import dataclass

    import dista_runtime as dista


    @dataclass
    class Point:
        x: int
        y: int


    class MyError(Exception):
        def __init__(self, message: str, code: int) -> None:
            super().__init__(message)
            self.code = code


    def check(n: int) -> None:
        if n < 0:
            raise MyError(f"negative {n}", n)


    @dista.task
    def shift(p: Point, by: int) -> Point:
        return Point(p.x + by, p.y + by)


    @dista.task
    def points(n: int) -> list:
        return [Point(i, -i) for i in range(n)]


    @dista.task
    def checked(n: int) -> int:
        check(n)
        return n


    @dista.task
    def apply(f, x):
        return f(x)


    def main() -> None:
        p = shift.remote(Point(1, 2), 10).get(timeout=60)
        assert p == Point(11, 12) and type(p) is Point, (p, type(p))
        print("dataclass ok")
        many = points.remote(3).get(timeout=60)
        assert many == [Point(0, 0), Point(1, -1), Point(2, -2)]
        assert all(type(q) is Point for q in many)
        print("results ok")
        assert shift.remote(shift.remote(Point(0, 0), 1), 1).get(timeout=60) == Point(2, 2)
        print("chained ok")
        try:
            checked.remote(-3).get(timeout=60)
        except MyError as e:
            assert isinstance(e, dista.TaskError), type(e).__mro__
            assert e.code == -3 and e.args == ("negative -3",), (e.code, e.args)
            assert "check(n)" in e.remote_traceback, e.remote_traceback
            print("exception ok")
        k = 7
        assert apply.remote(lambda x: x + k, 1).get(timeout=60) == 8
        assert apply.remote(lambda x: Point(x, k), 2).get(timeout=60) == Point(2, 7)
        print("closure ok")


    if __name__ == "__main__":
        if sys.argv[1:] == ["init"]:
            with dista.init(workers=1):
                main()
        else:
            main()
    """
)


@pytest.mark.parametrize("how", ["python", "dista run"])
def test_a_scripts_classes_and_errors(tmp_path: Path, how: str) -> None:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    if how == "python":
        command = [sys.executable, str(script), "init"]
    else:
        command = [sys.executable, "-m", "dista_runtime.cli", "run", "--workers", "1", str(script)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for line in ["dataclass ok", "results ok", "chained ok", "exception ok", "closure ok"]:
        assert line in done.stdout, done.stdout + done.stderr


def test_the_example_script() -> None:
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "examples/script_values.py"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=root,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "first done: Summary(part=" in done.stdout
    assert "caught BadPart for part 9" in done.stdout
    assert "raise BadPart(part)" in done.stdout and "dista_runtime" not in done.stdout
