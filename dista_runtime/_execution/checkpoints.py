"""Where actors' checkpoints live: ``DISTA_CHECKPOINT_URI``, a directory of files
(``file:///path`` or a plain path, built in) or any fsspec URL when fsspec is installed
(``s3://bucket/prefix``, ``memory://x``).

A checkpoint is one object under ``ROOT/<actor>/``, named for how many calls it covers and
its own ID (``<calls>-<checkpoint>.ckpt``): a header (magic, version, lengths), the record
of which of each caller's calls it covers, the actor's state as the buffers the caller
gives (pickle protocol 5's out-of-band buffers, written as they lie: a 100 MiB state is
not copied on its way to the disk), then a CRC-32 of record and state, computed piece by
piece as the pieces are written (each is still in the cache when it is written).
A local checkpoint is read by mapping the file copy-on-write: no read into fresh memory,
and a restored NumPy array is writable.

Writes are atomic: the bytes go to a temporary name in the same directory and are renamed
into place (a filesystem's rename; fsspec's ``mv``, which object stores carry out as one
whole put), so a crash mid-write leaves at worst a temporary file, which `newest` never
reads and the next write removes. A checkpoint that does not check out (wrong magic, wrong
length, wrong CRC) is skipped, never half-restored. Once a newer checkpoint is in place the
older ones of that actor are removed.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
import uuid
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import urlparse

from .._errors import CheckpointError

__all__ = ["ENV", "Checkpoint", "CheckpointError", "CheckpointStore", "open_store"]

#: The environment variable naming the store.
ENV: Final = "DISTA_CHECKPOINT_URI"
_MAGIC: Final = b"DSTACKPT"
_VERSION: Final = 2
#: magic, version, record length, state length.
_HEADER: Final = struct.Struct("<8sHQQ")
#: The CRC-32 of record and state, after them.
_TRAILER: Final = struct.Struct("<I")
#: Pieces the CRC is computed over just before each is written.
_PIECE: Final = 4 << 20
_SUFFIX: Final = ".ckpt"
_TEMP: Final = ".tmp-"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint of an actor, as read back."""

    actor: int
    #: The checkpoint's own ID (the checkpoint frame's object ID).
    checkpoint: int
    #: How many calls it covers (the page's count).
    calls: int
    #: Per caller (its driver number), the newest of its calls the checkpoint includes.
    covers: dict[int, int]
    #: The actor's state, as written (a view of the bytes read: not copied again).
    state: memoryview


class _Files(Protocol):
    """What the store needs of a filesystem (the local one, or an fsspec one)."""

    def write(self, path: str, buffers: Iterable[Any]) -> None: ...

    def read(self, path: str) -> Any: ...

    def listdir(self, path: str) -> list[str]: ...

    def rename(self, src: str, dst: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def remove_folder(self, path: str) -> None: ...


class _Local:
    def write(self, path: str, buffers: Iterable[Any]) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.writelines(buffers)
            f.flush()
            os.fsync(f.fileno())  # on the disk before the rename makes it the newest

    def read(self, path: str) -> Any:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not size:
                return b""
            # Copy-on-write: pages come in as the restore touches them, and stay writable.
            return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)

    def listdir(self, path: str) -> list[str]:
        try:
            return os.listdir(path)
        except FileNotFoundError:
            return []

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def remove_folder(self, path: str) -> None:
        with contextlib.suppress(OSError):  # gone already, or a write of a new one began
            os.rmdir(path)


class _Fsspec:
    def __init__(self, fs: Any) -> None:
        self.fs = fs

    def write(self, path: str, buffers: Iterable[Any]) -> None:
        with self.fs.open(path, "wb") as f:
            for buffer in buffers:
                f.write(buffer)

    def read(self, path: str) -> Any:
        return bytearray(self.fs.cat_file(path))  # writable, as a restored array must be

    def listdir(self, path: str) -> list[str]:
        try:
            names = self.fs.ls(path, detail=False)
        except FileNotFoundError:
            return []
        return [name.rstrip("/").rsplit("/", 1)[-1] for name in names]

    def rename(self, src: str, dst: str) -> None:
        self.fs.mv(src, dst)

    def remove(self, path: str) -> None:
        try:
            self.fs.rm(path)
        except FileNotFoundError:
            pass

    def remove_folder(self, path: str) -> None:
        with contextlib.suppress(OSError):  # object stores have no folders to remove
            if self.fs.isdir(path) and not self.fs.ls(path):
                self.fs.rmdir(path)


class CheckpointStore:
    """Checkpoints under ``root`` on ``files`` (see the module docstring); `open_store`
    makes one from a URI."""

    def __init__(self, uri: str, root: str, files: _Files) -> None:
        self.uri = uri
        self._root = root.rstrip("/")
        self._files = files

    def _dir(self, actor: int) -> str:
        return f"{self._root}/{actor:016x}"

    def write(
        self,
        actor: int,
        checkpoint: int,
        calls: int,
        covers: dict[int, int],
        state: Sequence[Any],
        keep: int | None = None,
        prune: bool = True,
    ) -> str:
        """Write a checkpoint atomically, then (``prune``) remove older ones as `prune`
        says; its path. `CheckpointError` says why it could not be written."""
        record = json.dumps({str(k): v for k, v in covers.items()}).encode()
        views = [memoryview(b).cast("B") for b in state]
        size = sum(v.nbytes for v in views)
        header = _HEADER.pack(_MAGIC, _VERSION, len(record), size)
        folder = self._dir(actor)
        final = f"{folder}/{calls:020d}-{checkpoint:016x}{_SUFFIX}"
        temp = f"{folder}/{_TEMP}{uuid.uuid4().hex}"
        try:
            self._files.write(temp, _pieces(header, record, views))
            self._files.rename(temp, final)
        except OSError as e:  # fsspec's filesystems raise OSErrors too
            self._forget(temp)
            raise CheckpointError(f"cannot write a checkpoint to {self.uri}: {e}") from e
        if prune:
            self.prune(actor, final, keep)
        return final

    def prune(self, actor: int, final: str, keep: int | None = None) -> None:
        """Remove the actor's temporary files and its checkpoints older than ``final``
        (`write`'s path), or with ``keep`` given, only those covering fewer than ``keep``
        calls: an actor's worker passes the restore point the head named (-1 for none),
        since a checkpoint written after it may be the head's restore point by now. A
        worker does this after it answered: removing 100 MiB is nobody's wait."""
        folder = self._dir(actor)
        for name in self._files.listdir(folder):
            path = f"{folder}/{name}"
            if path == final:
                continue
            calls = _parse(name)[0]
            older = _parse(name) < _parse(final) if keep is None else calls < keep
            if name.startswith(_TEMP) or (calls >= 0 and older):
                self._forget(path)  # older, or a write that died

    def read(self, actor: int, calls: int) -> Checkpoint:
        """The actor's checkpoint covering exactly ``calls`` calls (the one the head restores
        from); `CheckpointError` if there is none that checks out."""
        folder = self._dir(actor)
        names = [n for n in self._files.listdir(folder) if _parse(n)[0] == calls]
        for name in sorted(names, key=_parse, reverse=True):
            found = self._read(actor, name, f"{folder}/{name}")
            if found is not None:
                return found
        raise CheckpointError(
            f"actor {actor:#x}: no intact checkpoint covering {calls} calls under {self.uri}"
        )

    def newest(self, actor: int) -> Checkpoint | None:
        """The actor's newest checkpoint that checks out, or None."""
        folder = self._dir(actor)
        names = [n for n in self._files.listdir(folder) if n.endswith(_SUFFIX)]
        for name in sorted(names, key=_parse, reverse=True):
            found = self._read(actor, name, f"{folder}/{name}")
            if found is not None:
                return found
        return None

    def remove(self, actor: int) -> None:
        """Forget every checkpoint of ``actor`` (it was killed)."""
        folder = self._dir(actor)
        for name in self._files.listdir(folder):
            self._forget(f"{folder}/{name}")
        self._files.remove_folder(folder)

    def _read(self, actor: int, name: str, path: str) -> Checkpoint | None:
        try:
            data = self._files.read(path)
        except OSError:
            return None
        if len(data) < _HEADER.size + _TRAILER.size:
            return None
        magic, version, record_size, size = _HEADER.unpack_from(data)
        body = memoryview(data)[_HEADER.size : len(data) - _TRAILER.size]
        if magic != _MAGIC or version != _VERSION or len(body) != record_size + size:
            return None
        (crc,) = _TRAILER.unpack_from(data, len(data) - _TRAILER.size)
        if zlib.crc32(body) != crc:
            return None
        covers = {int(k): int(v) for k, v in json.loads(bytes(body[:record_size])).items()}
        calls, checkpoint = _parse(name)
        return Checkpoint(actor, checkpoint, calls, covers, body[record_size:])

    def _forget(self, path: str) -> None:
        # A file left behind is skipped by name, and removed by the next write.
        with contextlib.suppress(OSError):
            self._files.remove(path)


def _pieces(header: bytes, record: bytes, views: list[memoryview]) -> Iterator[Any]:
    """What a checkpoint file holds, in order, the CRC taken of each piece as it goes."""
    yield header
    crc = zlib.crc32(record)
    yield record
    for view in views:
        for start in range(0, view.nbytes, _PIECE):
            piece = view[start : start + _PIECE]
            crc = zlib.crc32(piece, crc)
            yield piece
    yield _TRAILER.pack(crc)


def _parse(name: str) -> tuple[int, int]:
    """(calls, checkpoint) of a checkpoint's file name; (-1, -1) for anything else."""
    base = name.rsplit("/", 1)[-1]
    if not base.endswith(_SUFFIX):
        return -1, -1
    calls, _, checkpoint = base[: -len(_SUFFIX)].partition("-")
    try:
        return int(calls), int(checkpoint, 16)
    except ValueError:
        return -1, -1


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
        return CheckpointStore(uri, os.path.abspath(path), _Local())
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
    return CheckpointStore(uri, root, _Fsspec(fs))
