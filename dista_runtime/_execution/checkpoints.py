"""Where actors' checkpoints live: ``DISTA_CHECKPOINT_URI``, a directory of files
(``file:///path`` or a plain path, built in) or any fsspec URL when fsspec is installed
(``s3://bucket/prefix``, ``memory://x``).

Theory of operation. An actor's checkpoints live under ``ROOT/<actor>/``. Each time a
worker builds the actor (created, or restored from the checkpoint covering ``base`` calls)
it `begin`s a new **incarnation**, claimed by writing the fence ``fence-<incarnation>``
(holding the base and the head's epoch) so that no two builds take the same number.
Incarnations are ordered as the heads asked for the builds: the head numbers each build
(actor-build), and a head's builds come after every build of the heads before it (its
rank in the folder, then its number). So a build a cut-off worker had queued and runs late
is still older than the one its head made next. Everything an older incarnation does is
fenced off: a worker the head cut off that still runs, or a copy a previous head started.

- A checkpoint is named for the calls it covers and the incarnation that wrote it
  (``<calls>-<incarnation>.ckpt``), so two incarnations never overwrite each other.
  `write` refuses when the writer's own fence is gone (the actor was killed and its
  checkpoints removed: a copy a head left behind writes nothing back).
- A file of incarnation I covering more calls than the base of a fence newer than I is
  stale: written on a branch the newer incarnation does not continue. `newest` and `read`
  never return one, and a prune removes it.
- `prune` by incarnation I removes only files of I and older incarnations, and nothing at
  all once a newer fence exists; fences no file needs any more go with them.
- Files of the previous release (``<calls>-<checkpoint id>.ckpt``, format version 2) read
  as incarnation 0.

A file holds a header (magic, version, lengths), the record of which of each caller's
calls it covers, the answers blob the runtime gives (opaque here), the actor's state as the
buffers the caller gives (pickle protocol 5's out-of-band buffers, written as they lie: a
100 MiB state is not copied on its way to the disk), then a CRC-32 of all of it but the
header, computed piece by piece as the pieces are written. A local checkpoint is read by
mapping the file copy-on-write: no read into fresh memory, and a restored NumPy array is
writable.

Writes are atomic: the bytes go to a temporary name in the same directory and are renamed
into place (a filesystem's rename; fsspec's ``mv``, which object stores carry out as one
whole put), so a crash mid-write leaves at worst a temporary file, which `newest` never
reads and a later prune removes. A checkpoint that does not check out (wrong magic, wrong
length, wrong CRC) is skipped, never half-restored.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlparse

from .._errors import CheckpointError
from .checkpoint_chain import Fence, chain
from .checkpoint_files import Files, FsspecFiles, LocalFiles

__all__ = ["ENV", "Checkpoint", "CheckpointError", "CheckpointStore", "Fenced", "open_store"]

#: The environment variable naming the store.
ENV: Final = "DISTA_CHECKPOINT_URI"
_MAGIC: Final = b"DSTACKPT"
#: 3 adds the answers; 2 (the previous release's, no answers) is still read.
_VERSION: Final = 3
#: magic, version (then the lengths, by version).
_PREFIX: Final = struct.Struct("<8sH")
#: Version 2: magic, version, record length, state length.
_HEADER_2: Final = struct.Struct("<8sHQQ")
#: Version 3: magic, version, record length, answers length, state length.
_HEADER: Final = struct.Struct("<8sHQQQ")
#: The CRC-32 of what follows the header, after it.
_TRAILER: Final = struct.Struct("<I")
#: Pieces the CRC is computed over just before each is written.
_PIECE: Final = 4 << 20
_SUFFIX: Final = ".ckpt"
_TEMP: Final = ".tmp-"
_FENCE: Final = "fence-"
#: A numbered incarnation: its head's rank in the actor's folder, then its build number.
_RANK_SHIFT: Final = 32
_BUILDS: Final = 1 << _RANK_SHIFT
#: How many numbers `begin` tries when others claim them first.
_CLAIMS: Final = 8
_EMPTY: Final = memoryview(b"")


#: Checkpoints this process wrote: count, bytes, nanoseconds (its vitals tell the head).
_written = [0, 0, 0]
_written_lock = threading.Lock()


def written() -> tuple[int, int, int]:
    """Checkpoints written by this process since it started: count, bytes, nanoseconds."""
    with _written_lock:
        count, size, ns = _written
        return count, size, ns


class Fenced(CheckpointError):
    """A write refused: the writer is a stale copy (the actor was killed and its
    checkpoints removed since it began)."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint of an actor, as read back."""

    actor: int
    #: The incarnation that wrote it (`CheckpointStore.begin`; 0: the previous release).
    incarnation: int
    #: How many calls it covers (the page's count).
    calls: int
    #: Per caller (its driver number), the newest of its calls the checkpoint includes.
    covers: dict[int, int]
    #: The actor's state, as written (a view of the bytes read: not copied again).
    state: memoryview
    #: What the runtime stored with it (`CheckpointStore.write`'s ``answers``), or empty.
    answers: memoryview = field(default=_EMPTY)


@dataclass(slots=True)
class _Folder:
    """One listing of an actor's folder, sorted out."""

    #: (calls, incarnation, name) of each checkpoint file.
    files: list[tuple[int, int, str]]
    #: Fence file names, by incarnation.
    fences: dict[int, str]
    #: (incarnation, name) of each temporary file (0 for the previous release's).
    temps: list[tuple[int, str]]

    def top(self) -> int:
        """The largest incarnation the folder shows."""
        seen = [i for _, i, _ in self.files] + list(self.fences) + [i for i, _ in self.temps]
        return max(seen, default=0)

    def newer(self, incarnation: int) -> list[int]:
        return sorted(i for i in self.fences if i > incarnation)


class CheckpointStore:
    """Checkpoints under ``root`` on ``files`` (see the module docstring); `open_store`
    makes one from a URI."""

    def __init__(self, uri: str, root: str, files: Files) -> None:
        self.uri = uri
        self._root = root.rstrip("/")
        self._files = files

    def _dir(self, actor: int) -> str:
        return f"{self._root}/{actor:016x}"

    def begin(
        self, actor: int, base: int, *, source: int | None = None, build: int = 0, epoch: int = 0
    ) -> int:
        """A new incarnation of ``actor`` (built by a worker: created, ``base`` -1, or
        restored from incarnation ``source``'s checkpoint covering ``base`` calls), its
        fence written durably, so that whatever an older incarnation writes from now on is
        ignored (`chain`). Numbered by
        its head (``build`` of head ``epoch``, actor-build), it is ordered as the heads
        asked for it: `_numbered`; else it is a number above any the store has seen.
        `CheckpointError` if the store cannot be written."""
        folder = self._dir(actor)
        for attempt in range(_CLAIMS):
            token = uuid.uuid4().hex
            temp = ""
            try:
                listing = self._list(folder)
                if attempt == 0 and 0 < build < _BUILDS:
                    incarnation = self._numbered(folder, listing, build, epoch)
                else:  # (not numbered, or its number taken: only after it, then)
                    incarnation = listing.top() + 1
                temp = f"{folder}/{_TEMP}{incarnation:020d}-{token}"
                final = f"{folder}/{_fence_name(incarnation)}"
                self._files.write(temp, [Fence(base, token, epoch, source).encode()])
                claimed = self._files.claim(temp, final)
            except OSError as e:
                raise CheckpointError(f"cannot begin actor {actor:#x} in {self.uri}: {e}") from e
            finally:
                if temp:
                    self._forget(temp)
            # Read back: on an object store two claims of one name may both seem to win.
            fence = self._fence(final) if claimed else None
            if fence is not None and fence.token == token:
                return incarnation
        raise CheckpointError(
            f"cannot begin actor {actor:#x} in {self.uri}: {_CLAIMS} incarnation numbers in a "
            "row were taken by others (is something beginning it in a loop?)"
        )

    def _numbered(self, folder: str, listing: _Folder, build: int, epoch: int) -> int:
        """The incarnation of ``build`` of head ``epoch``: the head's rank above its build
        number. A head's rank is the one its first build of the actor took: one above every
        rank the folder shows then. Heads follow one another, so a later head's builds come
        after every earlier head's, and a build an earlier head asked for that a cut-off
        worker runs only now (it had it queued) still comes before them, and before its
        own head's later builds: it fences off no copy a head counts on."""
        for incarnation in sorted(listing.fences):
            rank = incarnation >> _RANK_SHIFT
            fence = self._fence(f"{folder}/{listing.fences[incarnation]}")
            if rank and fence is not None and fence.epoch == epoch:
                return rank << _RANK_SHIFT | build
        return ((listing.top() >> _RANK_SHIFT) + 1) << _RANK_SHIFT | build

    def write(
        self,
        actor: int,
        incarnation: int,
        calls: int,
        covers: dict[int, int],
        state: Sequence[Any],
        *,
        answers: bytes | bytearray | memoryview = b"",
        keep: int | None = None,
        prune: bool = True,
    ) -> str:
        """Write a checkpoint of ``incarnation`` atomically, then (``prune``) remove older
        ones as `prune` says; its path. `CheckpointError` says why it could not be written;
        `Fenced` that the actor was removed (killed) since this incarnation began. A write
        of an incarnation a newer one fenced off is kept but never read (`newest`)."""
        record = json.dumps({str(k): v for k, v in covers.items()}).encode()
        extra = memoryview(answers).cast("B")
        views = [memoryview(b).cast("B") for b in state]
        size = sum(v.nbytes for v in views)
        header = _HEADER.pack(_MAGIC, _VERSION, len(record), extra.nbytes, size)
        folder = self._dir(actor)
        final = f"{folder}/{_name(calls, incarnation)}"
        temp = f"{folder}/{_TEMP}{incarnation:020d}-{uuid.uuid4().hex}"
        began = time.perf_counter_ns()
        try:
            self._files.write(temp, _pieces(header, [record, extra], views))
            if incarnation and incarnation not in self._list(folder).fences:
                # Its own fence is gone: the actor was killed and its checkpoints removed
                # (this is a copy a head left behind): nothing is written back.
                self._forget(temp)
                self._files.remove_folder(folder)
                raise Fenced(
                    f"actor {actor:#x}: a checkpoint of incarnation {incarnation} was "
                    "refused: the actor was killed and its checkpoints removed"
                )
            self._files.rename(temp, final)
        except OSError as e:  # fsspec's filesystems raise OSErrors too
            self._forget(temp)
            raise CheckpointError(f"cannot write a checkpoint to {self.uri}: {e}") from e
        took = time.perf_counter_ns() - began
        with _written_lock:
            _written[0] += 1
            _written[1] += _HEADER.size + len(record) + extra.nbytes + size
            _written[2] += took
        if prune:
            try:
                self._prune(folder, self._list(folder), calls, incarnation, keep)
            except OSError:
                pass  # left for the next write
        return final

    def prune(self, actor: int, final: str, keep: int | None = None) -> None:
        """Remove what `write` wrote ``final`` (its path) makes useless: temporary files,
        stale files, and the checkpoints older than ``final``, or with ``keep`` given, only
        those covering fewer than ``keep`` calls: an actor's worker passes the restore point
        the head named (-1 for none), since a checkpoint written after it may be the head's
        restore point by now. Only ``final``'s incarnation's files and older ones', and
        nothing once a newer incarnation began. A worker does this after it answered:
        removing 100 MiB is nobody's wait."""
        parsed = _parse(final)
        if parsed is None:
            raise ValueError(f"{final!r} is not a checkpoint's path")
        folder = self._dir(actor)
        self._prune(folder, self._list(folder), *parsed, keep)

    def read(self, actor: int, calls: int) -> Checkpoint:
        """The actor's checkpoint covering exactly ``calls`` calls (the one the head restores
        from), the newest incarnation's first; `CheckpointError` if there is none that
        checks out."""
        folder = self._dir(actor)
        found = [f for f in self._current(folder) if f[0] == calls]
        for file_calls, incarnation, name in sorted(found, reverse=True):
            checkpoint = self._read(actor, f"{folder}/{name}", file_calls, incarnation)
            if checkpoint is not None:
                return checkpoint
        raise CheckpointError(
            f"actor {actor:#x}: no intact checkpoint covering {calls} calls under {self.uri}"
        )

    def newest(self, actor: int) -> Checkpoint | None:
        """The actor's newest checkpoint that checks out, on the newest incarnation's
        chain; None if there is none."""
        folder = self._dir(actor)
        for calls, incarnation, name in sorted(self._current(folder), reverse=True):
            checkpoint = self._read(actor, f"{folder}/{name}", calls, incarnation)
            if checkpoint is not None:
                return checkpoint
        return None

    def remove(self, actor: int) -> None:
        """Forget every checkpoint and fence of ``actor`` (it was killed)."""
        folder = self._dir(actor)
        for name in self._files.listdir(folder):
            self._forget(f"{folder}/{name}")
        self._files.remove_folder(folder)

    def superseded(self, actor: int, incarnation: int) -> bool:
        """Whether ``incarnation`` of ``actor`` is stale: a newer one began, or its own
        fence is gone (killed and removed)."""
        listing = self._list(self._dir(actor))
        return bool(listing.newer(incarnation)) or incarnation not in listing.fences

    # -- the folder ------------------------------------------------------------------------

    def _list(self, folder: str) -> _Folder:
        listing = _Folder([], {}, [])
        for name in self._files.listdir(folder):
            parsed = _parse(name)
            if parsed is not None:
                listing.files.append((*parsed, name))
            elif name.startswith(_FENCE):
                with contextlib.suppress(ValueError):
                    listing.fences[int(name[len(_FENCE) :])] = name
            elif name.startswith(_TEMP):
                number = name[len(_TEMP) :].partition("-")[0]
                ours = number.isdigit() and len(number) in (10, 20)
                listing.temps.append((int(number) if ours else 0, name))
        return listing

    def _fence(self, path: str) -> Fence | None:
        """A fence's content; None if it cannot be read (it ends the chain)."""
        try:
            return Fence.parse(self._files.read_bytes(path))
        except OSError:
            return None

    def _chain(self, folder: str, listing: _Folder) -> dict[int, float]:
        fences = {i: self._fence(f"{folder}/{name}") for i, name in listing.fences.items()}
        return chain(fences)

    def _current(self, folder: str) -> list[tuple[int, int, str]]:
        """The folder's checkpoint files that are on the chain (`chain`)."""
        listing = self._list(folder)
        limits = self._chain(folder, listing)
        return [f for f in listing.files if f[0] <= limits.get(f[1], -1)]

    def _prune(
        self, folder: str, listing: _Folder, calls: int, incarnation: int, keep: int | None
    ) -> None:
        if listing.newer(incarnation):
            return  # fenced off: the folder is a newer incarnation's to tidy
        fences = {i: self._fence(f"{folder}/{name}") for i, name in listing.fences.items()}
        limits = chain(fences)
        left: list[int] = []
        for file_calls, file_incarnation, name in listing.files:
            if file_incarnation > incarnation:
                continue
            if file_calls > limits.get(file_incarnation, -1):
                stale = True  # on a branch nobody continues
            elif keep is None:
                stale = (file_calls, file_incarnation) < (calls, incarnation)
            else:
                stale = file_calls < keep
            if stale:
                self._forget(f"{folder}/{name}")
            else:
                left.append(file_incarnation)
        for temp_incarnation, name in listing.temps:
            if temp_incarnation <= incarnation:
                self._forget(f"{folder}/{name}")  # a write that died
        # Fences stay while the chain needs them (down to its oldest file), and the newest
        # of each head's: a build that head asked for and a cut-off worker runs late still
        # finds its head's rank (`_numbered`). The others go.
        oldest = min(left, default=incarnation)
        needed = {i for i in limits if i >= oldest}
        newest_of: dict[int, int] = {}
        for i, fence in fences.items():
            if fence is not None and fence.epoch:
                newest_of[fence.epoch] = max(i, newest_of.get(fence.epoch, i))
        needed.update(newest_of.values())
        for fence_incarnation, name in listing.fences.items():
            if fence_incarnation < incarnation and fence_incarnation not in needed:
                self._forget(f"{folder}/{name}")

    def _read(self, actor: int, path: str, calls: int, incarnation: int) -> Checkpoint | None:
        try:
            data = self._files.read(path)
        except OSError:
            return None
        if len(data) < _PREFIX.size:
            return None
        magic, version = _PREFIX.unpack_from(data)
        if magic != _MAGIC or version not in (2, _VERSION):
            return None
        header = _HEADER if version == _VERSION else _HEADER_2
        if len(data) < header.size + _TRAILER.size:
            return None
        if version == _VERSION:
            _, _, record_size, answers_size, size = header.unpack_from(data)
        else:
            (_, _, record_size, size), answers_size = header.unpack_from(data), 0
        body = memoryview(data)[header.size : len(data) - _TRAILER.size]
        if len(body) != record_size + answers_size + size:
            return None
        (crc,) = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
        if zlib.crc32(body) != crc:
            return None
        covers = {int(k): int(v) for k, v in json.loads(bytes(body[:record_size])).items()}
        answers = body[record_size : record_size + answers_size]
        state = body[record_size + answers_size :]
        return Checkpoint(actor, incarnation, calls, covers, state, answers)

    def _forget(self, path: str) -> None:
        # A file left behind is skipped by name, and removed by a later prune.
        with contextlib.suppress(OSError):
            self._files.remove(path)


def _pieces(header: bytes, small: list[Any], views: list[memoryview]) -> Iterator[Any]:
    """What a checkpoint file holds, in order, the CRC taken of each piece as it goes."""
    yield header
    crc = 0
    for view in (*small, *views):
        for start in range(0, len(view), _PIECE):
            piece = view[start : start + _PIECE]
            crc = zlib.crc32(piece, crc)
            yield piece
    yield _TRAILER.pack(crc)


def _name(calls: int, incarnation: int) -> str:
    return f"{calls:020d}-{incarnation:020d}{_SUFFIX}"


def _fence_name(incarnation: int) -> str:
    return f"{_FENCE}{incarnation:020d}"


def _parse(name: str) -> tuple[int, int] | None:
    """(calls, incarnation) of a checkpoint's file name (or path), None for anything else;
    a name of the previous release (``<calls>-<16 hex digits of its ID>``) is incarnation 0."""
    base = name.rsplit("/", 1)[-1]
    if not base.endswith(_SUFFIX):
        return None
    calls, _, mark = base[: -len(_SUFFIX)].partition("-")
    if not calls.isdigit() or len(mark) not in (10, 16, 20):
        return None
    hexadecimal = len(mark) == 16  # (the previous release's checkpoint ID)
    try:
        incarnation = int(mark, 16 if hexadecimal else 10)
    except ValueError:
        return None
    return int(calls), 0 if hexadecimal else incarnation


def open_store(uri: str | None = None) -> CheckpointStore | None:
    """The store ``uri`` names (default: ``DISTA_CHECKPOINT_URI``); None without one.

    ``file:///path`` and plain paths are built in; any other scheme needs fsspec."""
    uri = uri if uri is not None else os.environ.get(ENV, "")
    if not uri:
        return None
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        path = parsed.path if parsed.scheme else uri
        if parsed.scheme == "file" and parsed.netloc not in ("", "localhost"):
            raise CheckpointError(f"{ENV}={uri}: a file:// URI names a local path (file:///x)")
        return CheckpointStore(uri, os.path.abspath(path), LocalFiles())
    try:
        import fsspec
    except ImportError:
        raise CheckpointError(
            f"{ENV}={uri}: the {parsed.scheme}:// scheme needs fsspec (pip install fsspec), "
            "or use a file:// URI"
        ) from None
    try:
        fs, root = fsspec.core.url_to_fs(uri)
    except (ImportError, ValueError) as e:
        raise CheckpointError(f"{ENV}={uri}: {e}") from e
    return CheckpointStore(uri, root, FsspecFiles(fs))
