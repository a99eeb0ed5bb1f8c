"""Keeping worker processes alive: replace the dead, say how they died, stop on a start loop.

A `Supervisor` runs ``count`` copies of one worker command and keeps that many alive. One
thread watches them all: each child's pidfd (Linux; a short poll elsewhere), the pipe on
which it says it joined its head (``--ready-fd``), and, when asked, its stdout and stderr,
which it relays line by line to this process's, keeping the last lines of stderr for error
messages. A child's own log lines carry their time and role (``worker pid 1234``,
`dista_runtime.logs`) and pass as they are; its other lines (a task's prints, a crash's
report) get a ``(pid=1234)`` prefix, as Ray's drivers show their workers' prints.

When a child dies:

- its fate (`describe_exit`: "pid 4242 died: SIGSEGV", "pid 4242 exited with code 3") is
  kept for `fate`, which a head asks to name the cause in the errors of what the worker
  took along;
- unless the pool is closing, a replacement starts: at once the first time, then with a
  backoff (0.25 s, doubling up to 5 s) while replacements keep dying within `STABLE_S`;
- a child that died before it joined its head failed to start. After `MAX_START_FAILURES`
  such deaths in a row in one slot (or one that says it cannot reach the head:
  `EXIT_NO_HEAD`), the pool gives up: it stops restarting and reports why once, with the
  child's last stderr lines when they were captured. A child that has not joined yet is
  no failure while it lives: a worker started before its head waits for it (``dista worker
  --wait-for-head``), and exits with `EXIT_NO_HEAD` only once it gives up.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Final, NamedTuple, TypeVar

from ..logs import formatted, message_of

__all__ = [
    "EXIT_NO_HEAD",
    "EXIT_STOPPED",
    "STOPPED_BY_HEAD",
    "MAX_START_FAILURES",
    "STABLE_S",
    "Death",
    "Supervisor",
    "describe_exit",
    "signal_ready",
]

#: The exit code of a worker that cannot reach its head (sysexits' EX_UNAVAILABLE).
EXIT_NO_HEAD: Final = 69
#: The exit code of a supervised worker that its head stopped (``dista stop``, a head
#: shutting down, a force-cancel of its task): replaced like any other, but a replacement
#: that then finds no head means the head stopped its workers, not that they cannot start.
#: Unsupervised, such a worker exits 0.
EXIT_STOPPED: Final = 70
#: What `Supervisor.failure` says once the head stopped the workers.
STOPPED_BY_HEAD: Final = "the head stopped its workers"
#: Deaths before joining, in a row in one slot, after which a pool stops restarting.
MAX_START_FAILURES: Final = 3
#: A child that lived this long before dying is restarted at once.
STABLE_S: Final = 10.0
_FIRST_BACKOFF_S: Final = 0.25
_MAX_BACKOFF_S: Final = 5.0
_POLL_S: Final = 0.05  # without pidfds: how often to look for dead children
_TAIL_LINES: Final = 8
_READ: Final = 1 << 16

T = TypeVar("T")


def describe_exit(pid: int, code: int) -> str:
    """How process ``pid`` ended, from its `Popen.returncode`: "pid 4242 died: SIGSEGV"."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"pid {pid} died: {name}"
    return f"pid {pid} exited with code {code}"


def signal_ready(fd: int) -> None:
    """In a child: tell the supervisor on ``fd`` (its ``--ready-fd``) that it joined."""
    with contextlib.suppress(OSError):
        os.write(fd, b"1")
    with contextlib.suppress(OSError):
        os.close(fd)


class Death(NamedTuple):
    """One child's end, as a supervisor saw it."""

    pid: int
    code: int
    description: str  # describe_exit's text
    joined: bool  # whether it had joined its head
    restart_in: float | None  # seconds until its replacement starts; None: no replacement


class _Child:
    __slots__ = ("fds", "joined", "partial", "pidfd", "popen", "ready", "slot", "started", "tail")

    def __init__(self, slot: int, popen: subprocess.Popen[bytes], ready: int) -> None:
        self.slot = slot
        self.popen = popen
        self.started = time.monotonic()
        self.joined = False
        self.ready = ready  # read end of the ready pipe, -1 once closed
        self.pidfd = -1
        self.fds: dict[int, tuple[str, IO[bytes]]] = {}  # output pipe -> its name, its file
        self.partial: dict[int, bytes] = {}
        self.tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)


class _Slot:
    __slots__ = ("quick", "start_failures")

    def __init__(self) -> None:
        self.start_failures = 0  # deaths before joining, in a row
        self.quick = 0  # deaths within STABLE_S of starting, in a row


class Supervisor:
    """``count`` children running ``command`` (plus ``--ready-fd N``), kept alive.

    ``capture`` relays their stdout and stderr through this process, with a pid prefix on
    the lines that are not log lines.
    ``on_death`` hears of every death (on the supervisor's thread), ``on_give_up`` of the
    reason once, if the pool stops restarting, ``on_join`` of each child that joined its
    head (its pid). ``start_failures``: deaths before joining, in a row in one slot, after
    which the pool gives up; ``final_codes``: exit codes with which a child that had joined
    says it chose to leave (it is not replaced: the pool gives up, naming its exit);
    ``after_stop``: arguments added to the command of a replacement started once the head
    stopped a child (`EXIT_STOPPED`), such as one not to wait for a head that may be gone on
    purpose.
    """

    def __init__(
        self,
        command: Sequence[str],
        count: int,
        *,
        env: Mapping[str, str] | None = None,
        capture: bool = False,
        new_session: bool = True,
        on_death: Callable[[Death], object] | None = None,
        on_give_up: Callable[[str], object] | None = None,
        on_join: Callable[[int], object] | None = None,
        start_failures: int = MAX_START_FAILURES,
        final_codes: frozenset[int] = frozenset(),
        after_stop: Sequence[str] = (),
        name: str = "dista-supervise",
    ) -> None:
        self.command: list[str] = list(command)
        self.count: int = count
        self.env: dict[str, str] | None = dict(env) if env is not None else None
        self.capture = capture
        self.new_session = new_session
        self.on_death = on_death
        self.on_give_up = on_give_up
        self.on_join = on_join
        self.start_failures = start_failures
        self.final_codes = final_codes
        self.after_stop: list[str] = list(after_stop)
        #: Why the pool stopped restarting ('' while it has not).
        self.failure: str = ""
        self._head_stopped = False  # a worker exited because the head stopped it
        self._lock = threading.Lock()
        self._children: dict[int, _Child] = {}  # pid -> child, alive as far as we know
        self._fates: collections.OrderedDict[int, str] = collections.OrderedDict()
        self._slots = [_Slot() for _ in range(count)]
        self._restarts: list[tuple[float, int]] = []  # (when, slot)
        self._closing = False
        self._stopped = False
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._pidfds = hasattr(os, "pidfd_open")
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    # -- the caller's side ----------------------------------------------------------------

    def start(self) -> None:
        """Start every child (here: a failure raises) and the thread that watches them."""
        try:
            for slot in range(self.count):
                self._spawn(slot)
        except BaseException:
            self.close(0)
            raise
        self._thread.start()

    def grow_to(self, count: int) -> None:
        """Keep at least ``count`` children from now on: the thread starts the new ones."""
        with self._lock:
            if count <= self.count or self._closing:
                return
            for slot in range(self.count, count):
                self._slots.append(_Slot())
                self._restarts.append((0.0, slot))  # due now: the thread spawns it
            self.count = count
        self._wake()

    def pids(self) -> list[int]:
        """The children alive as far as the supervisor knows, oldest first."""
        with self._lock:
            return list(self._children)

    def fate(self, pid: int) -> str | None:
        """How child ``pid`` ended ("worker pid 4242 died: SIGSEGV"), or None while it runs
        (or was never ours)."""
        with self._lock:
            known = self._fates.get(pid)
            child = self._children.get(pid)
        if known is not None:
            return known
        if child is None:
            return None
        code = child.popen.poll()  # the exit may be here before the thread saw it
        return None if code is None else "worker " + describe_exit(pid, code)

    def stop_restarting(self) -> None:
        """From now on a child that exits stays dead (a closing pool's children exit)."""
        with self._lock:
            self._closing = True
            self._restarts.clear()

    def send_signal(self, signum: int) -> None:
        with self._lock:
            children = list(self._children.values())
        for child in children:
            with contextlib.suppress(OSError):
                child.popen.send_signal(signum)

    def close(self, grace: float = 3.0) -> None:
        """Stop restarting; wait up to ``grace`` s for the children to exit, then kill them;
        relay what they printed last and stop the thread."""
        self.stop_restarting()
        deadline = time.monotonic() + grace
        with self._lock:
            popens = [c.popen for c in self._children.values()]
        for p in popens:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in popens:
            if p.poll() is None:
                with contextlib.suppress(OSError):
                    p.kill()
                p.wait()
        with self._lock:
            self._stopped = True
        self._wake()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(2.0)
        if not self._thread.is_alive():
            self._release()

    # -- children ---------------------------------------------------------------------------

    def _spawn(self, slot: int, restart: bool = False) -> None:
        ready_r, ready_w = os.pipe()
        out = subprocess.PIPE if self.capture else None
        command = [*self.command, *(self.after_stop if self._head_stopped else ())]
        try:
            popen = subprocess.Popen(
                [*command, "--ready-fd", str(ready_w)],
                env=self.env,
                pass_fds=(ready_w,),
                stdout=out,
                stderr=out,
                start_new_session=self.new_session,
            )
        except BaseException:
            os.close(ready_r)
            raise
        finally:
            os.close(ready_w)
        child = _Child(slot, popen, ready_r)
        os.set_blocking(ready_r, False)
        self._selector.register(ready_r, selectors.EVENT_READ, child)
        for stream, name in ((popen.stdout, "stdout"), (popen.stderr, "stderr")):
            if stream is not None:
                fd = stream.fileno()
                os.set_blocking(fd, False)
                child.fds[fd] = (name, stream)
                self._selector.register(fd, selectors.EVENT_READ, child)
        if self._pidfds:
            try:
                child.pidfd = os.pidfd_open(popen.pid)
            except OSError:
                self._pidfds = False
            else:
                self._selector.register(child.pidfd, selectors.EVENT_READ, child)
        with self._lock:
            self._children[popen.pid] = child
            late = restart and self._closing
        if late:  # the pool began closing while this replacement started
            with contextlib.suppress(OSError):
                popen.kill()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def _main(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._stopped:
                        break
                    now = time.monotonic()
                    due = [s for when, s in self._restarts if when <= now]
                    self._restarts = [(w, s) for w, s in self._restarts if w > now]
                    later = min((w for w, _ in self._restarts), default=None)
                    closing = self._closing
                for slot in due:
                    if not closing:
                        self._restart(slot)
                timeout = None if later is None else max(0.0, later - time.monotonic())
                if not self._pidfds:
                    timeout = _POLL_S if timeout is None else min(timeout, _POLL_S)
                for key, _ in self._selector.select(timeout):
                    child = key.data
                    if child is None:
                        with contextlib.suppress(OSError):
                            os.read(self._wake_r, 4096)
                    elif key.fd == child.pidfd:
                        self._reap(child)
                    elif key.fd == child.ready:
                        self._on_ready(child)
                    else:
                        self._relay(child, key.fd)
                if not self._pidfds:
                    with self._lock:
                        children = list(self._children.values())
                    for child in children:
                        if child.popen.poll() is not None:
                            self._reap(child)
        finally:
            with self._lock:
                children = list(self._children.values())
            for child in children:  # closed: relay what they printed last
                for fd in list(child.fds):
                    self._relay(child, fd, final=True)

    def _restart(self, slot: int) -> None:
        try:
            self._spawn(slot, restart=True)
        except OSError as e:  # no more processes, no memory: a start failure too
            self._give_up(f"cannot start a worker process: {e}")

    def _on_ready(self, child: _Child) -> None:
        try:
            data = os.read(child.ready, 64)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            with self._lock:
                child.joined = True
                self._slots[child.slot].start_failures = 0
        self._close_fd(child.ready)
        child.ready = -1
        if data and self.on_join is not None:
            _tell(self.on_join, child.popen.pid)

    def _relay(self, child: _Child, fd: int, final: bool = False) -> None:
        """Relay what ``fd`` (a child's stdout or stderr) holds, whole lines prefixed."""
        entry = child.fds.get(fd)
        if entry is None:
            return
        name = entry[0]
        chunks: list[bytes] = []
        eof = False
        while True:
            try:
                data = os.read(fd, _READ)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                eof = True
                break
            chunks.append(data)
            if not final:
                break  # one read per wake-up: a chatty child cannot starve the others
        data = child.partial.pop(fd, b"") + b"".join(chunks)
        if eof or final:
            if data and not data.endswith(b"\n"):
                data += b"\n"
        else:
            cut = data.rfind(b"\n") + 1
            if len(data) - cut < _READ:
                child.partial[fd] = data[cut:]
                data = data[:cut]
        if data:
            lines = data.splitlines(keepends=True)
            if name == "stderr":
                child.tail.extend(
                    message_of(line.decode(errors="replace").rstrip())
                    for line in lines[-_TAIL_LINES:]
                )
            # A child still starting when the pool closes (one started for an actor just
            # before the end) finds the head gone: expected, so not worth a word.
            if not (self._closing and not child.joined):
                prefix = b"(pid=%d) " % child.popen.pid
                _emit(name, b"".join(line if formatted(line) else prefix + line for line in lines))
        if eof:
            self._close_output(child, fd)

    def _reap(self, child: _Child) -> None:
        code = child.popen.poll()
        if code is None:
            return  # not yet: the pidfd or the poll will say again
        if child.ready >= 0:
            self._on_ready(child)  # it may have joined just before dying
        for fd in list(child.fds):
            self._relay(child, fd, final=True)
        for fd in list(child.fds):
            self._close_output(child, fd)
        if child.pidfd >= 0:
            self._close_fd(child.pidfd)
            child.pidfd = -1
        if child.ready >= 0:
            self._close_fd(child.ready)
            child.ready = -1
        pid = child.popen.pid
        description = describe_exit(pid, code)
        lived = time.monotonic() - child.started
        give_up = ""
        with self._lock:
            if self._children.pop(pid, None) is None:
                return
            self._fates[pid] = "worker " + description
            while len(self._fates) > 1024:
                self._fates.popitem(last=False)
            slot = self._slots[child.slot]
            delay: float | None = None
            if code == EXIT_STOPPED and child.joined:
                # The head stopped it: to force-cancel its task (it is replaced), or because
                # the head is stopping (the replacement finds no head, below).
                self._head_stopped = True
            if not self._closing and not self.failure:
                if not child.joined:
                    slot.start_failures += 1
                    if code == EXIT_NO_HEAD and self._head_stopped:
                        give_up = STOPPED_BY_HEAD
                    elif code == EXIT_NO_HEAD or slot.start_failures >= self.start_failures:
                        give_up = self._start_failure(child, description)
                    else:
                        delay = _FIRST_BACKOFF_S * 2 ** (slot.start_failures - 1)
                elif code in self.final_codes:
                    give_up = f"worker {description}"
                else:
                    slot.quick = slot.quick + 1 if lived < STABLE_S else 0
                    delay = 0.0 if slot.quick <= 1 else _FIRST_BACKOFF_S * 2 ** (slot.quick - 2)
                    delay = min(delay, _MAX_BACKOFF_S)
                if delay is not None:
                    self._restarts.append((time.monotonic() + delay, child.slot))
        if self.on_death is not None:
            _tell(self.on_death, Death(pid, code, description, child.joined, delay))
        if give_up:
            self._give_up(give_up)

    def _start_failure(self, child: _Child, description: str) -> str:
        if child.popen.returncode == EXIT_NO_HEAD and child.tail:
            return child.tail[-1]
        text = f"worker {description} before it joined the head"
        if child.tail:
            text += "; its last output:\n" + "\n".join(f"  {line}" for line in child.tail)
        return text

    def _give_up(self, reason: str) -> None:
        with self._lock:
            if self.failure:
                return
            self.failure = reason
            self._restarts.clear()
        if self.on_give_up is not None:
            _tell(self.on_give_up, reason)

    def _close_fd(self, fd: int) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(fd)
        with contextlib.suppress(OSError, ValueError):  # gevent's os.close(-1): ValueError
            os.close(fd)

    def _close_output(self, child: _Child, fd: int) -> None:
        entry = child.fds.pop(fd, None)
        child.partial.pop(fd, None)
        if entry is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(fd)
            with contextlib.suppress(OSError):
                entry[1].close()  # the Popen's file: it owns the descriptor

    def _release(self) -> None:
        with self._lock:
            children = list(self._children.values())
            self._children.clear()
        for child in children:
            for fd in list(child.fds):
                self._close_output(child, fd)
            for fd in (child.ready, child.pidfd):
                if fd >= 0:
                    self._close_fd(fd)
            child.ready = child.pidfd = -1
        for fd in (self._wake_r, self._wake_w):
            self._close_fd(fd)
        self._wake_r = self._wake_w = -1
        self._selector.close()


def _tell(callback: Callable[[T], object], what: T) -> None:
    """Call a listener; its failure is logged, and the supervisor goes on."""
    try:
        callback(what)
    except Exception:
        logging.getLogger("dista.supervisor").exception("a supervisor's listener failed")


def _emit(name: str, data: bytes) -> None:
    """Write a child's relayed output to this process's stream of the same name."""
    stream = getattr(sys, name, None)
    if stream is None:
        return
    try:
        buffer = getattr(stream, "buffer", None)
        if buffer is not None:
            stream.flush()
            buffer.write(data)
            buffer.flush()
        else:
            stream.write(data.decode(errors="replace"))
            stream.flush()
    except (OSError, ValueError):
        pass  # our own output is closed: nothing to show it on
