"""One task's call on a worker: find its function, rebuild its arguments, run it, encode
its results.

`Calls.prepare` (cheap, on the loop) turns a `RunTask` into a `Call`; `Execution`
(`dista_runtime._execution.execution`) decides where it runs (inline on the loop, on a
runner, as a coroutine); `run_call` runs a plain one there and encodes its results
(`encode_results`) into an `Outcome` for the core. A failure becomes the error-frame text
of `message_from_exception`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import dista_proto as dp
from dista_proto.frame import Bytes

from .._clock import now
from .._values.codec import decode, decode_call, encode
from .._values.errors import message_from_exception
from .._values.registry import BY_VALUE_ID, PUT_ID, load_function, lookup, split_by_value
from .._values.shared import store_value
from .inline import InlinePolicy, RunOnThread

__all__ = ["Call", "Calls", "Encoded", "Outcome", "encode_results", "run_call"]

#: (first result ID, encoded values or None, error text, started, ended)
Outcome = tuple[int, list[Bytes] | None, str, int, int]


class Encoded:
    """A result already encoded (`dista.put`'s value): `encode_results` passes it as is."""

    __slots__ = ("data",)

    def __init__(self, data: Bytes) -> None:
        self.data = data


def stored(data: Bytes) -> Encoded:
    """The function `dista.put`'s task runs: its argument, an encoded value, is its result.

    A large one is copied into a memory file (`store_value`), as a task's large result is
    encoded into one: one copy here, so that every reader on this host maps it instead of
    receiving its own copy through a socket."""
    shared = store_value(memoryview(data).nbytes, [(0, data)])
    return Encoded(data if shared is None else shared)


class Call:
    """A task ready to run: ``function(*args, **kwargs)``."""

    __slots__ = ("args", "function", "is_async", "kwargs", "results")

    def __init__(
        self,
        function: Callable[..., Any],
        args: tuple[object, ...],
        kwargs: dict[str, object],
        results: int,
    ) -> None:
        self.function = function
        self.args = args
        self.kwargs = kwargs
        self.results = results
        self.is_async = inspect.iscoroutinefunction(function)

    def run(self) -> Any:
        return self.function(*self.args, **self.kwargs)


class Calls:
    """Turns `RunTask`s into `Call`s, keeping the by-value functions already loaded."""

    def __init__(self) -> None:
        self._by_digest: dict[bytes, Callable[..., Any]] = {}

    def prepare(self, task: dp.RunTask) -> Call:
        """The call for ``task``; raises with a message for the error frame if there is none."""
        argument: Bytes | None = task.argument
        inputs: Sequence[Bytes] = task.inputs
        low = task.task_id & dp.TASK_ID_MASK
        if low == PUT_ID and argument is not None and not task.after:
            return Call(stored, (argument,), {}, task.results)
        if low == BY_VALUE_ID:
            if argument is None:
                raise ValueError("a by-value task came without its function")
            digest, pickled, argument = split_by_value(argument)
            function = self._by_digest.get(digest)
            if function is None:
                function = load_function(pickled)
                self._by_digest[digest] = function
        else:
            found = lookup(task.task_id)
            if found is None:
                raise LookupError(
                    f"task {task.task_id:#x} is not registered on this worker: start the "
                    "worker with --import of the module that defines it"
                )
            function = found
        function = getattr(function, "_fn", function)  # the user's function under @task
        if argument is None:
            # A task-after without a value: the input (or the Seq of them) is the argument.
            values = [decode(v) for v in inputs]
            args: tuple[object, ...] = (values,) if task.gather else tuple(values[:1])
            return Call(function, args, {}, task.results)
        args, kwargs = decode_call(argument, inputs if task.after else ())
        return Call(function, args, kwargs, task.results)


def encode_results(value: object, results: int) -> list[Bytes]:
    if results == 1:
        if type(value) is Encoded:
            return [value.data]
        return [encode(value, "the task's result")]
    if not isinstance(value, (tuple, list)) or len(value) != results:
        got = f"{len(value)} values" if isinstance(value, (tuple, list)) else type(value).__name__
        raise TypeError(
            f"a task with num_returns={results} must return {results} values, not {got}"
        )
    return [encode(v, f"result {i}") for i, v in enumerate(value)]


def run_call(task: dp.RunTask, call: Call, policy: InlinePolicy, inline: bool = False) -> Outcome:
    """Run ``call``, telling ``policy`` how it went. Inline, raises `RunOnThread` if the
    task reached for the session, even if it caught the `RunOnThread` that stopped it."""
    policy.begin(inline)
    started = now()
    error = ""
    values: list[Bytes] | None = None
    try:
        values = encode_results(call.run(), task.results)
    except RunOnThread:
        pass  # only ever raised inline: handled below
    except BaseException as e:  # SystemExit and KeyboardInterrupt too: the task's failure
        error = message_from_exception(e)
    ended = now()
    if inline and policy.stopped():
        policy.forbid(call.function)
        raise RunOnThread("run it again on a thread")
    policy.end(call.function, ended - started)
    if values is None and not error:
        error = "RunOnThread: the worker stopped this task outside an inline run"
    return task.object_id, values, error, started, ended
