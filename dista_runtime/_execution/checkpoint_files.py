"""The filesystems a checkpoint store writes to: the local one, built in, and any fsspec one.

`dista_runtime._execution.checkpoints` asks only what `Files` says: whole files written
from buffers, read back, listed, renamed into place, removed, and one more: ``claim``, a
rename that refuses to replace a file already there, which is how two workers beginning
the same actor at once never both take the same incarnation number. The local filesystem
claims with a hard link (one system call that fails if the name exists); an object store
has no such call, so the fsspec one checks first and the store reads the claimed file back
to see whose it is.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterable
from typing import Any, Protocol

__all__ = ["Files", "FsspecFiles", "LocalFiles"]


class Files(Protocol):
    """What the store needs of a filesystem (the local one, or an fsspec one)."""

    def write(self, path: str, buffers: Iterable[Any]) -> None: ...

    def read(self, path: str) -> Any:
        """The whole file, as a writable buffer (a restored array must be writable)."""
        ...

    def read_bytes(self, path: str) -> bytes:
        """A small file's bytes."""
        ...

    def listdir(self, path: str) -> list[str]: ...

    def rename(self, src: str, dst: str) -> None: ...

    def claim(self, src: str, dst: str) -> bool:
        """Rename ``src`` to ``dst`` unless ``dst`` exists (then False, ``src`` left to
        the caller to remove)."""
        ...

    def remove(self, path: str) -> None: ...

    def remove_folder(self, path: str) -> None: ...


class LocalFiles:
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

    def read_bytes(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def listdir(self, path: str) -> list[str]:
        try:
            return os.listdir(path)
        except FileNotFoundError:
            return []

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def claim(self, src: str, dst: str) -> bool:
        try:
            os.link(src, dst)  # fails if dst exists: two claims never both win
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links: check, then rename
            if os.path.exists(dst):
                return False
            os.replace(src, dst)
        else:
            os.remove(src)
        _sync_folder(os.path.dirname(dst))  # the claim outlives a crash
        return True

    def remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def remove_folder(self, path: str) -> None:
        with contextlib.suppress(OSError):  # gone already, or a write of a new one began
            os.rmdir(path)


def _sync_folder(path: str) -> None:
    with contextlib.suppress(OSError):  # not every platform opens a folder
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class FsspecFiles:
    def __init__(self, fs: Any) -> None:
        self.fs = fs

    def write(self, path: str, buffers: Iterable[Any]) -> None:
        with self.fs.open(path, "wb") as f:
            for buffer in buffers:
                f.write(buffer)

    def read(self, path: str) -> Any:
        return bytearray(self.fs.cat_file(path))  # writable, as a restored array must be

    def read_bytes(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(path))

    def listdir(self, path: str) -> list[str]:
        try:
            names = self.fs.ls(path, detail=False)
        except FileNotFoundError:
            return []
        return [name.rstrip("/").rsplit("/", 1)[-1] for name in names]

    def rename(self, src: str, dst: str) -> None:
        self.fs.mv(src, dst)

    def claim(self, src: str, dst: str) -> bool:
        # No create-if-absent on an object store: the caller reads the claim back.
        if self.fs.exists(dst):
            return False
        self.fs.mv(src, dst)
        return True

    def remove(self, path: str) -> None:
        try:
            self.fs.rm(path)
        except FileNotFoundError:
            pass

    def remove_folder(self, path: str) -> None:
        with contextlib.suppress(OSError):  # object stores have no folders to remove
            if self.fs.isdir(path) and not self.fs.ls(path):
                self.fs.rmdir(path)
