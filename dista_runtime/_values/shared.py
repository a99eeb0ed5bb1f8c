"""Large objects shared on one host: kept in memory files, mapped by fetchers on the same
host instead of copied through a socket (docs/protocol.md, "Extensions: objects mapped on
one host").

- **Where values live.** A worker (`keep_values_shared`) encodes each value of
  `SHARE_FROM` bytes or more into a memory file (`store_value`; ``memfd_create``: shared
  memory with no name in /dev/shm, so a crash leaves nothing behind; its memory goes back
  with its last descriptor and map). Once written the file is sealed against shrinking
  and growing, so that a map of it can never fault past its end, and the value is a
  read-only map of it.
- **Mailboxes.** Each host (`SameHost`) has one: an abstract Unix datagram socket named for
  a random u64, the mailbox its fetches carry. An object server asked with a mailbox
  queues a copy of the value's descriptor under a random ticket (`SameHost.share`) and
  answers with a mapped frame naming it; before the engine writes that frame it sends
  what is queued (`SameHost.flush`), one datagram per mailbox with every descriptor of the
  turn (``SCM_RIGHTS``), so the descriptors are in the fetcher's queue before the frames.
  A mailbox holds a handful of datagrams (``net.unix.max_dgram_qlen``, 10 by default):
  a datagram per object would overflow it on a get of many.
- **Taking.** The fetcher (`SameHost.take`) drains its mailbox, finds the ticket, checks
  the file (a sealed memory file of the frame's size), maps it read-only and closes the
  descriptor: the map keeps the memory, so the worker may free its copy or die while
  NumPy arrays decoded from the map (zero-copy, read-only, as Ray's) still read it; the
  memory goes back when the last of them goes.

Anything on the host (in the network namespace) may send to a mailbox: a mailbox takes
descriptors only from processes of its own user (or root), as the kernel vouches
(``SO_PASSCRED``), and of those only one whose ticket a mapped frame names is used; the
rest are closed, and at most `_UNMATCHED` wait. Whatever fails (another host: no such mailbox; a full one; a file that is not what
the frame says) is not an error: the object travels over the link as the page has it.
Linux only (memfd, abstract sockets); elsewhere, and with ``DISTA_SHARED_MEMORY=0``,
`SameHost.create` gives None.
"""

from __future__ import annotations

import _socket
import array
import ctypes
import errno
import fcntl
import mmap
import os
import secrets
import socket
import struct
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

from dista_proto import TICKET_SIZE
from dista_proto.frame import Bytes

from .file_writes import write_pieces
from .memory import MAP_FROM
from .reaper import later
from .spare_files import SPARES, new_file

__all__ = [
    "SHARED_MEMORY_ENV",
    "SHARE_FROM",
    "SameHost",
    "is_shared",
    "keep_values_shared",
    "store_value",
]

#: ``0`` turns sharing off for the processes that see it: objects travel over the links.
SHARED_MEMORY_ENV: Final = "DISTA_SHARED_MEMORY"
#: Values from this size live in memory files on a worker (smaller ones cost more in
#: descriptors and maps than their copy does).
SHARE_FROM: Final = MAP_FROM
#: Descriptors one datagram carries (the kernel's SCM_MAX_FD is 253).
_PER_DATAGRAM: Final = 250
#: Descriptors not taken yet, kept at most (oldest closed): two full datagrams.
_UNMATCHED: Final = 2 * _PER_DATAGRAM
_CREDENTIALS = struct.Struct("iII")  # pid, uid, gid
_ENTRY = struct.Struct(f"<{TICKET_SIZE}sQ")  # ticket, object ID
_SEALS: Final = getattr(fcntl, "F_SEAL_SHRINK", 0) | getattr(fcntl, "F_SEAL_GROW", 0)

_files: dict[int, int] = {}  # id(map) -> its memory file's descriptor, while the map lives


def _load_libc() -> tuple[Callable[..., int | None], Callable[[int, int], int]] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        map_, unmap = libc.mmap, libc.munmap
    except (OSError, AttributeError):
        return None
    map_.restype = ctypes.c_void_p
    map_.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
    map_.argtypes += [ctypes.c_int, ctypes.c_long]
    unmap.restype = ctypes.c_int
    unmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return map_, unmap


_libc = _load_libc()
_MAP_FAILED: Final = ctypes.c_void_p(-1).value
_SUPPORTED: Final = (
    hasattr(os, "memfd_create")
    and hasattr(fcntl, "F_ADD_SEALS")
    and hasattr(socket, "AF_UNIX")
    and hasattr(socket, "SCM_RIGHTS")
    and hasattr(socket, "MSG_CMSG_CLOEXEC")
    and hasattr(socket, "SO_PASSCRED")
    and _libc is not None
)


def _map(fd: int, size: int) -> memoryview:
    """A read-only shared map of ``size`` bytes of ``fd``, as a byte view that keeps it.

    Made with libc, not `mmap.mmap`, which keeps a duplicate of the descriptor for as
    long as the map lives: a driver holding a thousand mapped objects would hold a
    thousand descriptors, past the usual limit of 1,024. This map holds none; it is
    unmapped when the last view of it (or NumPy array made from one) goes.
    """
    assert _libc is not None
    map_, unmap = _libc
    address = map_(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if address is None or address == _MAP_FAILED:
        number = ctypes.get_errno()
        raise OSError(number, f"cannot map {size} bytes: {os.strerror(number)}")
    region = (ctypes.c_ubyte * size).from_address(address)
    weakref.finalize(region, later, unmap, address, size)  # off this thread: `reaper`
    # Read-only: the pages are; a write through a writable view would kill the process.
    return memoryview(region).cast("B").toreadonly()


_sharing = False


def keep_values_shared(on: bool = True) -> None:
    """Encode large values into memory files from now on (a worker's results), so that
    fetchers on this host map them. Raises this process's descriptor limit to its hard
    limit: a worker holds one descriptor per large object it stores."""
    global _sharing
    _sharing = on and _SUPPORTED
    if _sharing:
        try:
            import resource

            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard > soft):
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ImportError, ValueError, OSError):
            pass  # as it is: past it, values go to private maps (`store_value`)


def store_value(size: int, pieces: Sequence[tuple[int, Bytes]]) -> memoryview | None:
    """An encoded value of ``size`` bytes, ``pieces`` at their offsets (zeros between), in
    a memory file, sealed and mapped read-only; None when values are not shared here or
    it is small (then the caller builds it in private memory).

    Written with ``pwrite``, not through a map: the kernel fills the file's pages as it
    copies, at about 0.4 s per GiB here, where faulting them in through a writable map
    took 0.6 to 1.3 s; into a spare whose pages are allocated already (`spare_files`), it
    is a copy. The read-only map's pages are faulted in by whoever reads them.
    """
    if not _sharing or size < SHARE_FROM:
        return None
    fd = SPARES.take(size)  # pages allocated ahead, if a spare fits (`spare_files`)
    if fd is None:
        try:
            fd = new_file()
        except OSError:
            return None  # out of descriptors: a private buffer, fetched through the link
    try:
        os.ftruncate(fd, size)  # a spare is trimmed to size; a new file grows to it
        write_pieces(fd, pieces, size)  # on two cores and more, by two threads and more
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
        value = _map(fd, size)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.ENOSPC, errno.ENOMEM, errno.EFBIG):
            raise MemoryError(f"cannot keep {size} bytes in shared memory: {e}") from e
        raise
    except BaseException:
        os.close(fd)
        raise
    key = id(value.obj)
    _files[key] = fd
    weakref.finalize(value.obj, _close, key, fd)
    SPARES.want(size)  # the next value of about this size lands in warm pages
    return value


def _close(key: int, fd: int) -> None:
    _files.pop(key, None)
    later(os.close, fd)  # the last descriptor frees the file's pages: not on the I/O loop


def _file_of(value: Bytes) -> int | None:
    """The descriptor of the memory file that is all of ``value``, if it is one."""
    if type(value) is not memoryview:
        return None
    region = value.obj
    fd = _files.get(id(region))
    if fd is None or value.nbytes != ctypes.sizeof(region):  # type: ignore[arg-type]
        return None
    return fd


def is_shared(value: Bytes) -> bool:
    """Whether ``value`` lives in a memory file a fetcher on this host can map."""
    return _file_of(value) is not None


def _name(mailbox: int) -> bytes:
    return b"\0dista-mailbox-%016x" % mailbox


class SameHost:
    """One host's mailbox and the descriptors it sends (`dista_proto.Mapping`): made on
    its I/O loop's thread, and used there only."""

    def __init__(self, sock: _socket.socket, mailbox: int) -> None:
        self._sock = sock
        self._mailbox = mailbox
        self._queued: dict[int, list[tuple[bytes, int, int]]] = {}  # mailbox -> entries
        self._reach: dict[int, bool] = {}  # mailboxes tried: reachable from here or not
        self._arrived: OrderedDict[bytes, tuple[int, int]] = OrderedDict()  # ticket -> id, fd
        self._uid = os.getuid()
        self.mapped = 0  # objects taken from the mailbox (for tests and benchmarks)

    @classmethod
    def create(cls) -> SameHost | None:
        """A host with a new mailbox, or None where objects cannot be shared."""
        if not _SUPPORTED or os.environ.get(SHARED_MEMORY_ENV, "").strip() == "0":
            return None
        flags = socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
        try:
            # The C module's socket: gevent's would wait out an empty mailbox, on the hub.
            sock = _socket.socket(socket.AF_UNIX, flags)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        except OSError:
            return None
        for _ in range(3):  # a name already taken: draw another
            mailbox = secrets.randbits(64) or 1
            try:
                sock.bind(_name(mailbox))
            except OSError:
                continue
            return cls(sock, mailbox)
        sock.close()
        return None

    @property
    def mailbox(self) -> int:
        return self._mailbox

    @property
    def queued(self) -> bool:
        """Whether descriptors wait for `flush`."""
        return bool(self._queued)

    def share(self, object_id: int, value: Bytes, mailbox: int) -> bytes | None:
        fd = _file_of(value)
        if fd is None or self._reach.get(mailbox) is False:
            return None
        ticket = secrets.token_bytes(TICKET_SIZE)
        # A copy: the value may be freed before `flush`, and its number reused meanwhile.
        entry = (ticket, object_id, os.dup(fd))
        if mailbox not in self._reach:  # the first to it goes now: is it on this host?
            reached = self._send(mailbox, [entry])
            self._reach[mailbox] = reached
            if len(self._reach) > 4096:  # fetchers come and go: forget the oldest
                del self._reach[next(iter(self._reach))]
            return ticket if reached else None
        self._queued.setdefault(mailbox, []).append(entry)
        return ticket

    def flush(self) -> None:
        """Send what `share` queued: before the mapped frames naming it are written."""
        queued, self._queued = self._queued, {}
        for mailbox, entries in queued.items():
            for start in range(0, len(entries), _PER_DATAGRAM):
                # Not sent (a full mailbox): its fetcher asks again without the mailbox.
                self._send(mailbox, entries[start : start + _PER_DATAGRAM])

    def _send(self, mailbox: int, entries: list[tuple[bytes, int, int]]) -> bool:
        data = b"".join(_ENTRY.pack(ticket, oid) for ticket, oid, _ in entries)
        fds = array.array("i", [fd for _, _, fd in entries])
        try:
            self._sock.sendmsg(
                [data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)], 0, _name(mailbox)
            )
            return True
        except OSError:  # no such mailbox here (another host), or a full one
            return False
        finally:
            for fd in fds:
                os.close(fd)

    def take(self, object_id: int, size: int, ticket: bytes) -> Bytes | None:
        self._receive()
        found = self._arrived.pop(ticket, None)
        if found is None:
            return None
        oid, fd = found
        try:
            if oid != object_id or os.fstat(fd).st_size != size:
                return None
            if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & _SEALS != _SEALS:
                return None  # it could shrink under the map: reading past it would crash
            value = _map(fd, size)
        except (OSError, ValueError):  # not a memory file (no seals), or no room to map
            return None
        finally:
            os.close(fd)
        self.mapped += 1
        return value

    def _receive(self) -> None:
        """Everything in the mailbox, kept by ticket (a datagram that is not ours closed)."""
        space = socket.CMSG_SPACE(_PER_DATAGRAM * 4) + socket.CMSG_SPACE(_CREDENTIALS.size)
        while True:
            try:
                data, ancillary, flags, _ = self._sock.recvmsg(
                    _PER_DATAGRAM * _ENTRY.size, space, socket.MSG_CMSG_CLOEXEC
                )
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            fds: list[int] = []
            uid = -1
            for level, kind, body in ancillary:
                if level != socket.SOL_SOCKET:
                    continue
                if kind == socket.SCM_RIGHTS:
                    got = array.array("i")
                    got.frombytes(body[: len(body) - len(body) % got.itemsize])
                    fds.extend(got)
                elif kind == socket.SCM_CREDENTIALS and len(body) >= _CREDENTIALS.size:
                    uid = _CREDENTIALS.unpack_from(body)[1]
            truncated = flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC)
            ours = uid in (self._uid, 0)
            if truncated or not ours or len(data) != len(fds) * _ENTRY.size:
                for fd in fds:  # not what an object server sends
                    os.close(fd)
                continue
            for i, fd in enumerate(fds):
                ticket, oid = _ENTRY.unpack_from(data, i * _ENTRY.size)
                old = self._arrived.pop(ticket, None)
                if old is not None:
                    os.close(old[1])
                self._arrived[ticket] = (oid, fd)
            while len(self._arrived) > _UNMATCHED:
                os.close(self._arrived.popitem(last=False)[1][1])

    def close(self, _: object = None) -> None:
        """Close the mailbox and every descriptor waiting in or for it."""
        for entries in self._queued.values():
            for *_, fd in entries:
                os.close(fd)
        self._queued.clear()
        for _, fd in self._arrived.values():
            os.close(fd)
        self._arrived.clear()
        self._sock.close()
