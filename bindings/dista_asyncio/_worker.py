"""A worker over asyncio: the `Worker` core, its object server, and where user code runs.

Plain tasks run on runner threads (`dista_runtime._runners`: withdrawn before they start or
interrupted when the head cancels them, and lending their slot while they block on other
tasks' results), except those the worker has learnt are short and self-contained, which
run inline on the loop (`dista_runtime._inline`); ``async def`` tasks run on the loop.
Finished tasks are handed back to the loop in batches: one wake-up of the loop for however
many finished meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import dista_proto as dp
import dista_runtime._session as session_module
from dista_runtime import _context, _registry
from dista_runtime._address import format_head, unix_path
from dista_runtime._errors import message_from_exception
from dista_runtime._execute import Call, Executor, encode_results
from dista_runtime._inline import InlinePolicy, RunOnThread
from dista_runtime._memory import allocate, ready
from dista_runtime._runners import Outcome, Runners, run_call

from ._dial import dial
from ._driver import DriverHost, connect_driver
from ._host import Host, LinkBase

__all__ = ["CURRENT", "WorkerHost", "run_call", "run_worker"]

_Outcome = Outcome

#: The worker this process runs, if any (for introspection from inside tasks).
CURRENT: WorkerHost | None = None


class WorkerHost(Host):
    def __init__(self, loop: asyncio.AbstractEventLoop, core: dp.Worker, threads: int) -> None:
        super().__init__(loop)
        self.core = core
        self.executor = Executor()
        self.inline = InlinePolicy()
        self.runners = Runners(threads, self.inline, self.finished, self.blocked)
        self._done: deque[_Outcome] = deque()
        self._drain_scheduled = False
        self.client: DriverHost | None = None
        self._tasks: dict[int, asyncio.Task[None]] = {}  # async tasks by first result ID
        self._awaiting: dict[int, int] = {}  # async task -> refs it awaits now (slot lent)

    def protocol(self) -> LinkBase:
        return self.link_protocol(self.core.connection_made(time.time_ns()))

    def get_buffer(self, link: int, sizehint: int) -> memoryview:
        return ready(self.core.get_buffer(link, sizehint))

    def updated(self, link: int, nbytes: int) -> list[dp.Decision]:
        self.core.buffer_updated(link, nbytes, time.time_ns())
        return self._decisions()

    def lost(self, link: int) -> list[dp.Decision]:
        self.core.connection_lost(link, time.time_ns())
        return self._decisions()

    def opened(self, link: int) -> list[dp.Decision]:
        self.core.connected(link, time.time_ns())
        return self._decisions()

    def _decisions(self) -> list[dp.Decision]:
        out: list[dp.Decision] = []
        while decisions := self.core.decisions():
            out.extend(decisions)
        return out

    def other(self, decision: dp.Decision) -> None:
        if isinstance(decision, dp.CancelTask):
            self._cancel(decision)
            return
        if not isinstance(decision, dp.RunTask):
            return
        try:
            call = self.executor.prepare(decision)
        except Exception as e:
            now = time.time_ns()
            self.finished((decision.object_id, None, message_from_exception(e), now, now))
            return
        if call.is_async:
            oid = decision.object_id
            task = self.loop.create_task(self._run_async(decision, call))
            self._tasks[oid] = task
            task.add_done_callback(lambda _: self._tasks.pop(oid, None))
        elif self.inline.may_inline(call.function):
            try:
                outcome = run_call(decision, call, self.inline, inline=True)
            except RunOnThread:
                self.runners.submit(decision, call)
                return
            self._done.append(outcome)
            if not self._drain_scheduled:
                self._drain_scheduled = True
                self.loop.call_soon(self._drain)
        else:
            self.runners.submit(decision, call)

    def _cancel(self, decision: dp.CancelTask) -> None:
        """The head wants a task back: drop it if it has not started, else interrupt it
        if it was cancelled (a withdrawn task that started just runs on)."""
        oid = decision.object_id
        if self.runners.withdraw(oid):
            self.core.task_withdrawn(oid, time.time_ns())
            self.act(self._decisions())
        elif not decision.withdraw:
            # After the rest of this read's decisions: an interrupted runner takes the next
            # queued task at once, and cancels of those may be right behind this one.
            self.loop.call_soon(self._interrupt, oid)

    def _interrupt(self, oid: int) -> None:
        task = self._tasks.get(oid)
        if task is not None:
            task.cancel()
        else:
            self.runners.interrupt(oid)

    @contextlib.contextmanager
    def awaiting(self) -> Iterator[None]:
        """Around an ``async def`` task's ``await`` of a ref (on the loop): lend its slot,
        as a runner thread's blocking get does."""
        task = asyncio.current_task()
        oid = next((o for o, t in self._tasks.items() if t is task), 0)
        if not oid:
            yield
            return
        depth = self._awaiting.get(oid, 0)
        self._awaiting[oid] = depth + 1
        if not depth:
            self._mark_blocked(oid, True)
        try:
            yield
        finally:
            depth = self._awaiting.pop(oid) - 1
            if depth:
                self._awaiting[oid] = depth
            else:
                self._mark_blocked(oid, False)

    def blocked(self, oid: int, blocked: bool) -> None:
        """A runner's task blocked on other tasks' results, or resumed (any thread)."""
        try:
            self.loop.call_soon_threadsafe(self._mark_blocked, oid, blocked)
        except RuntimeError:
            pass  # the loop is gone: the worker is exiting

    def _mark_blocked(self, oid: int, blocked: bool) -> None:
        now = time.time_ns()
        if blocked:
            self.core.task_blocked(oid, now)
        else:
            self.core.task_resumed(oid, now)
        self.act(self._decisions())

    async def _run_async(self, task: dp.RunTask, call: Call) -> None:
        started = time.time_ns()
        try:
            values = encode_results(await call.run(), task.results)
        except BaseException as e:  # cancelled, SystemExit...: this task's failure only
            error = message_from_exception(e)
            self.finished((task.object_id, None, error, started, time.time_ns()))
        else:
            self.finished((task.object_id, values, "", started, time.time_ns()))

    def finished(self, outcome: _Outcome) -> None:
        """A task ended (any thread): queue it for the loop, waking the loop once a batch."""
        self._done.append(outcome)
        if not self._drain_scheduled:
            self._drain_scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._drain)
            except RuntimeError:
                pass  # the loop is gone: the worker is exiting

    def _drain(self) -> None:
        self._drain_scheduled = False
        core = self.core
        done = self._done
        while done:
            oid, values, error, started, ended = done.popleft()
            if values is None:
                core.task_failed(oid, error, started, ended)
            else:
                core.task_done(oid, values, started, ended)
        self.act(self._decisions())


def _advertised_host(head_host: str) -> str:
    import ipaddress
    import socket

    if unix_path(head_host) is not None:
        return "127.0.0.1"  # a head on this machine

    try:
        if ipaddress.ip_address(head_host).is_loopback:
            return "127.0.0.1"
    except ValueError:
        head_host = socket.gethostbyname(head_host)
        if ipaddress.ip_address(head_host).is_loopback:
            return "127.0.0.1"
    # The interface that routes to the head is the one the head's other peers can reach.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((head_host, 9))
        host: str = probe.getsockname()[0]
        return host


async def run_worker(
    head_host: str,
    head_port: int,
    *,
    host: str | None = None,
    threads: int = 1,
    client: bool = True,
    ready: asyncio.Future[Any] | None = None,
) -> str:
    """Serve the head at ``head_host:head_port`` until it stops us; the reason we stopped.

    The registry is whatever tasks this process has imported by now. ``host`` is where the
    object server listens and what the head tells fetchers (default: the interface that
    reaches the head; loopback for a head on loopback).
    """
    loop = asyncio.get_running_loop()
    bind = host or _advertised_host(head_host)
    names, registry = _registry.snapshot()
    box: list[WorkerHost] = []
    server = await loop.create_server(lambda: box[0].protocol(), bind, 0)
    port = server.sockets[0].getsockname()[1]
    core = dp.Worker(registry_hash=registry, address=dp.Address(bind, port), allocate=allocate)
    worker = WorkerHost(loop, core, threads)
    box.append(worker)
    global CURRENT
    CURRENT = worker
    session_module.on_block = worker.runners.blocking
    session_module.on_await = worker.awaiting
    session_module.on_use = worker.inline.session_used
    # The client first: a task may submit work as soon as the head knows this worker.
    if client:
        try:
            worker.client = await connect_driver(head_host, head_port, registry, dp.Role.CLIENT)
        except ConnectionError:
            worker.client = None
        else:
            ctx = _context.Context(worker.client.session, names, (head_host, head_port))
            _context.clear()
            _context.install(ctx)
    try:
        await dial(loop, lambda: worker.link_protocol(0), head_host, head_port)
    except OSError as e:
        server.close()
        raise ConnectionError(
            f"cannot reach the head at {format_head(head_host, head_port)}: {e}"
        ) from e
    core.start(time.time_ns())
    worker.act(worker._decisions())
    if ready is not None and not ready.done():
        ready.set_result((bind, port))
    reason: str = await worker.exited
    server.close()
    if worker.client is not None:
        await worker.client.close()
    worker.close_all()
    await asyncio.sleep(0)
    return reason
