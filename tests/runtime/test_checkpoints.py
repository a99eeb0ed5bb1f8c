"""The checkpoint store (issue 12, item 3): atomic writes, the newest that checks out,
older ones removed, what a checkpoint covers, and clear errors."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from dista_runtime._errors import CheckpointError
from dista_runtime._execution import checkpoints
from dista_runtime._execution.checkpoints import open_store


def _state(value: object) -> list[object]:
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    return [data, *(b.raw() for b in buffers)]


def test_file_store_keeps_the_newest_and_what_it_covers(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    assert store is not None
    assert store.newest(7) is None
    store.write(7, 0x10, 10, {3: 10}, [b"ten"])
    store.write(7, 0x11, 20, {3: 15, 4: 5}, [b"twenty"])
    newest = store.newest(7)
    assert newest is not None
    assert (newest.checkpoint, newest.calls, newest.covers, newest.state) == (
        0x11,
        20,
        {3: 15, 4: 5},
        b"twenty",
    )
    assert len(os.listdir(tmp_path / f"{7:016x}")) == 1  # the older one is gone
    store.remove(7)
    assert store.newest(7) is None


def test_a_crash_mid_write_never_leaves_a_torn_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(str(tmp_path))
    assert store is not None
    store.write(1, 1, 5, {9: 5}, [b"five"])

    def die(self: object, src: str, dst: str) -> None:
        raise OSError("the machine went down")

    monkeypatch.setattr(checkpoints._Local, "rename", die)
    with pytest.raises(CheckpointError, match="the machine went down"):
        store.write(1, 2, 9, {9: 9}, [b"x" * 100_000])
    monkeypatch.undo()
    newest = store.newest(1)
    assert newest is not None and newest.state == b"five"  # the last whole one
    # A checkpoint file cut short (a disk that lied) is skipped, never half-restored.
    path = store.write(1, 3, 12, {9: 12}, [b"twelve" * 1000])
    with open(path, "r+b") as f:
        f.truncate(100)
    assert store.newest(1) is None


def test_a_large_state_goes_from_its_buffers(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    assert store is not None
    array = np.arange(100 << 17, dtype=np.int64)  # 100 MiB
    parts = _state(array)
    store.write(2, 1, 1, {}, parts)
    newest = store.newest(2)
    assert newest is not None
    head = len(parts[0])  # type: ignore[arg-type]
    assert newest.state[:head] == parts[0]
    assert newest.state[head:] == array.tobytes()


def test_an_fsspec_store(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    store = open_store("memory://dista-test-checkpoints")
    assert store is not None
    store.write(5, 1, 3, {1: 3}, [b"abc", memoryview(b"def")])
    store.write(5, 2, 6, {1: 6}, [b"ghi"])
    newest = store.newest(5)
    assert newest is not None and (newest.calls, newest.state) == (6, b"ghi")
    store.remove(5)
    assert store.newest(5) is None


def test_an_unwritable_uri_says_why(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = open_store(f"file://{blocker}")
    assert store is not None
    with pytest.raises(CheckpointError, match="cannot write a checkpoint to file://"):
        store.write(1, 1, 1, {}, [b"x"])
    with pytest.raises(CheckpointError, match=r"(?i)needs fsspec|not known"):
        open_store("nosuchscheme://x/y")
    assert open_store("") is None


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> checkpoints.CheckpointStore:
    if request.param == "memory":
        pytest.importorskip("fsspec")
        uri = f"memory://dista-restore-{os.getpid()}-{tmp_path.name}"
    else:
        uri = (tmp_path / "store").as_uri()
    opened = open_store(uri)
    assert opened is not None
    return opened


def test_the_restore_point_stays_until_a_newer_one_is_known(
    store: checkpoints.CheckpointStore,
) -> None:
    store.write(7, 0, 10, {3: 0x3_0000000010}, [b"ten"])
    store.write(7, 0, 20, {3: 0x3_0000000020}, [b"twenty"], keep=10)
    # The head may still restore from 10 (it has not heard that 20 is written): both stay.
    assert bytes(store.read(7, 10).state) == b"ten"
    assert bytes(store.read(7, 20).state) == b"twenty"
    store.write(7, 0, 30, {3: 0x3_0000000030}, [b"thirty"], keep=20)
    with pytest.raises(CheckpointError, match="no intact checkpoint covering 10 calls"):
        store.read(7, 10)
    restored = store.read(7, 20)
    assert restored.covers == {3: 0x3_0000000020}
    store.remove(7)
    assert store.newest(7) is None
    with pytest.raises(CheckpointError):
        store.read(7, 30)
