"""Readable remote failures: the user's frames and lines, not Dista's.

A worker's traceback keeps the user's frames and the exception line and drops the frames of
dista_runtime, dista_proto, the bindings and the runner threads. A function sent by value
takes its source lines along, and the worker puts them in `linecache`, so the lines show
even where the worker has no such file (a notebook cell, another machine).
"""

from __future__ import annotations

import json
import linecache
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dista_runtime._errors import TaskError
from dista_runtime._execution.call import Call
from dista_runtime._values.errors import error_from_message, message_from_exception
from dista_runtime._values.registry import install_source, pickle_function, source_of

DISTA_DIRS = ("dista_runtime", "dista_proto", "dista_asyncio")


def user_function(n: int) -> int:
    if n:
        raise ValueError(f"bad n: {n}")  # the user's line
    return n


def failure(fn: object, *args: object) -> TaskError:
    """Run ``fn`` as a worker does (through `Call.run`) and rebuild the driver's error."""
    try:
        Call(fn, args, {}, 1).run()  # type: ignore[arg-type]
    except BaseException as e:
        return error_from_message(message_from_exception(e), 1)
    raise AssertionError("it did not fail")


def test_dista_frames_are_hidden() -> None:
    error = failure(user_function, 3)
    assert isinstance(error, ValueError)
    tb = error.remote_traceback
    assert 'raise ValueError(f"bad n: {n}")  # the user\'s line' in tb
    assert "in user_function" in tb and tb.rstrip().endswith("ValueError: bad n: 3")
    assert "call.py" not in tb and not any(d in tb for d in DISTA_DIRS), tb


def test_every_frame_with_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTA_FULL_TRACEBACKS", "1")
    assert "call.py" in failure(user_function, 3).remote_traceback


def test_chained_exceptions_are_pruned_too() -> None:
    def outer() -> None:
        try:
            user_function(1)
        except ValueError as e:
            raise RuntimeError("wrapped") from e

    tb = failure(outer).remote_traceback
    assert (
        "direct cause" in tb and "the user's line" in tb and 'raise RuntimeError("wrapped")' in tb
    )
    assert not any(d in tb for d in DISTA_DIRS), tb


def test_a_multiline_message_keeps_a_one_line_summary() -> None:
    def fails() -> None:
        raise ValueError("first\nsecond")

    error = failure(fails)
    assert error.message == "ValueError: first ..."
    assert error.args == ("first\nsecond",)
    assert "second" in error.remote_traceback


@pytest.mark.parametrize(
    ("raised", "says"),
    [
        (SystemExit(2), "SystemExit: the task called sys.exit(2)"),
        (SystemExit(), "SystemExit: the task called sys.exit()"),
        (SystemExit("bye"), "SystemExit: the task called sys.exit('bye')"),
        (KeyboardInterrupt(), "KeyboardInterrupt: the task was interrupted"),
        (GeneratorExit(), "GeneratorExit: the task raised GeneratorExit"),
    ],
)
def test_base_exceptions_say_what_happened(raised: BaseException, says: str) -> None:
    def fails() -> None:
        raise raised

    error = failure(fails)
    # Never the BaseException itself: a SystemExit raised in the driver would end it.
    assert type(error) is TaskError
    assert error.message == says
    assert "raise raised" in error.remote_traceback


def test_exceptions_whose_init_takes_other_arguments_come_back() -> None:
    class Coded(Exception):
        def __init__(self, message: str, code: int) -> None:
            super().__init__(message)
            self.code = code

    def fails() -> None:
        raise Coded("no", 7)

    error = failure(fails)
    assert isinstance(error, Coded) and isinstance(error, TaskError)
    assert error.code == 7 and error.args == ("no",)


def test_installed_source_shows_in_linecache() -> None:
    name = "<dista-test-cell>"
    install_source(name, 3, "def f():\n    return 1\n")
    install_source(name, 7, "def g():\n    return 2")  # merged with f, no final newline
    assert linecache.getline(name, 4) == "    return 1\n"
    assert linecache.getline(name, 8) == "    return 2\n"
    assert linecache.getline(name, 1) == "\n"
    linecache.checkcache(name)  # no file behind it: the entry stays
    assert linecache.getline(name, 7) == "def g():\n"


def test_a_by_value_function_takes_its_source() -> None:
    source = source_of(user_function)
    assert source is not None
    filename, first, text = source
    assert filename == __file__ and first == user_function.__code__.co_firstlineno
    assert "the user's line" in text
    _, data = pickle_function(user_function)
    assert b"the user's line" in data


SCRIPT = textwrap.dedent(
    '''
    import json
    import linecache
    import sys

    import dista_runtime as dista


    def helper(x):
        return 10 // x  # the helper's line


    @dista.task
    def parse(text):
        value = int(text)
        if value < 0:
            raise ValueError(f"negative: {value}")  # the task's line
        return helper(value)


    CELL = """
    @dista.task
    def cell_task(n):
        total = n * 2
        raise KeyError(f"cell says {total}")  # a notebook line
    """


    def failure(ref):
        try:
            ref.get(timeout=60)
        except dista.TaskError as e:
            return str(e)
        return "no failure"


    if __name__ == "__main__":
        out = {}
        with dista.init(workers=1):
            out["value"] = failure(parse.remote("-3"))
            out["helper"] = failure(parse.remote("0"))
            # A notebook: the cell's lines live only in this process's linecache (as
            # IPython keeps them), under a name no worker can open.
            name = "<notebook-cell-7>"
            linecache.cache[name] = (len(CELL), None, CELL.splitlines(True), name)
            space = {"dista": dista, "__name__": "__main__"}
            exec(compile(CELL, name, "exec"), space)
            out["cell"] = failure(space["cell_task"].remote(4))
        print(json.dumps(out))
    '''
)


def test_remote_tracebacks_of_a_script(tmp_path: Path) -> None:
    script = tmp_path / "analysis.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    value, helper, cell = out["value"], out["helper"], out["cell"]
    assert value.startswith("ValueError: negative: -3"), value
    assert f'File "{script}", line 17, in parse' in value, value
    assert 'raise ValueError(f"negative: {value}")  # the task\'s line' in value, value
    assert "return 10 // x  # the helper's line" in helper, helper
    assert "return helper(value)" in helper, helper
    assert 'File "<notebook-cell-7>", line 5, in cell_task' in cell, cell
    assert 'raise KeyError(f"cell says {total}")  # a notebook line' in cell, cell
    for text in (value, helper, cell):
        assert not any(d in text for d in DISTA_DIRS), text
        assert "threading.py" not in text and "cloudpickle" not in text, text
