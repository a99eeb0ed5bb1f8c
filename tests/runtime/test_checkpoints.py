"""The checkpoint store (issue 12, item 3): atomic writes, the newest that checks out,
older ones removed, what a checkpoint covers, and clear errors; and (issue 25, item 4)
incarnations fenced off by newer ones, the answers kept with a checkpoint, the previous
release's files still read. The rules run on a local directory and, when fsspec is
installed, on its memory:// filesystem."""

from __future__ import annotations

import json
import os
import pickle
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from dista_runtime._errors import CheckpointError
from dista_runtime._execution import checkpoints
from dista_runtime._execution.checkpoint_files import LocalFiles
from dista_runtime._execution.checkpoints import Fenced, open_store


def _state(value: object) -> list[object]:
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    return [data, *(b.raw() for b in buffers)]


def test_file_store_keeps_the_newest_and_what_it_covers(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    assert store is not None
    assert store.newest(7) is None
    incarnation = store.begin(7, -1)
    store.write(7, incarnation, 10, {3: 10}, [b"ten"])
    store.write(7, incarnation, 20, {3: 15, 4: 5}, [b"twenty"])
    newest = store.newest(7)
    assert newest is not None
    assert (newest.incarnation, newest.calls, newest.covers, newest.state) == (
        incarnation,
        20,
        {3: 15, 4: 5},
        b"twenty",
    )
    # The older one is gone; the fence stays while the actor lives.
    assert sorted(os.listdir(tmp_path / f"{7:016x}")) == [
        f"{20:020d}-{incarnation:020d}.ckpt",
        f"fence-{incarnation:020d}",
    ]
    store.remove(7)
    assert store.newest(7) is None
    assert not (tmp_path / f"{7:016x}").exists()


def test_a_crash_mid_write_never_leaves_a_torn_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(str(tmp_path))
    assert store is not None
    assert store.begin(1, -1) == 1
    store.write(1, 1, 5, {9: 5}, [b"five"])

    def die(self: object, src: str, dst: str) -> None:
        raise OSError("the machine went down")

    assert store.begin(1, 5) == 2  # (restored from it elsewhere)
    monkeypatch.setattr(LocalFiles, "rename", die)
    with pytest.raises(CheckpointError, match="the machine went down"):
        store.write(1, 2, 9, {9: 9}, [b"x" * 100_000])
    monkeypatch.undo()
    newest = store.newest(1)
    assert newest is not None and newest.state == b"five"  # the last whole one
    # A checkpoint file cut short (a disk that lied) is skipped, never half-restored.
    assert store.begin(1, 5) == 3
    path = store.write(1, 3, 12, {9: 12}, [b"twelve" * 1000])
    with open(path, "r+b") as f:
        f.truncate(100)
    assert store.newest(1) is None


def test_a_large_state_goes_from_its_buffers(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}")
    assert store is not None
    array = np.arange(100 << 17, dtype=np.int64)  # 100 MiB
    parts = _state(array)
    assert store.begin(2, -1) == 1
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
    assert store.begin(5, -1) == 1
    store.write(5, 1, 3, {1: 3}, [b"abc", memoryview(b"def")])
    assert store.begin(5, 3) == 2
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


def _names(store: checkpoints.CheckpointStore, actor: int) -> list[str]:
    """What the actor's folder holds, as a user listing the store sees it."""
    return sorted(store._files.listdir(store._dir(actor)))


def test_each_build_of_an_actor_gets_a_larger_incarnation(
    store: checkpoints.CheckpointStore,
) -> None:
    first = store.begin(3, -1)
    store.write(3, first, 4, {}, [b"four"])
    second = store.begin(3, 4)
    # Another worker's store object on the same root sees the same folder.
    other = open_store(store.uri)
    assert other is not None
    third = other.begin(3, 4)
    assert 0 < first < second < third
    store.write(3, third, 9, {}, [b"nine"])  # prunes the rest, and the fences no file needs
    assert _names(store, 3) == [f"{9:020d}-{third:020d}.ckpt", f"fence-{third:020d}"]
    assert store.begin(3, 9) == third + 1  # the numbers never go back
    store.remove(3)
    assert _names(store, 3) == []


def test_builds_are_ordered_as_their_heads_asked_not_as_they_ran(
    store: checkpoints.CheckpointStore,
) -> None:
    # Head A numbers three builds: 1 and 2 on workers it then lost, 3 on the one it counts
    # on. Build 3 runs first; 1 and 2 (queued on cut-off workers) run late.
    third = store.begin(9, -1, build=3, epoch=0xA)
    first = store.begin(9, -1, build=1, epoch=0xA)
    second = store.begin(9, -1, build=2, epoch=0xA)
    assert first < second < third
    assert not store.superseded(9, third)  # the copy head A counts on is not fenced off
    assert store.superseded(9, first) and store.superseded(9, second)
    store.write(9, third, 2, {1: 2}, [b"two"])
    # Head B (A died) restores it: its builds come after all of A's, even one of A's that
    # runs later still (a cut-off worker that had it queued).
    mine = store.begin(9, 2, source=third, build=1, epoch=0xB)
    late = store.begin(9, -1, build=4, epoch=0xA)
    assert third < late < mine
    assert store.superseded(9, third) and not store.superseded(9, mine)
    # The late build (a create: base -1) is no part of B's chain: B's restore point (the
    # checkpoint it came from) stays readable, and what the late one writes is never read.
    assert store.read(9, 2).state == b"two"
    store.write(9, late, 1, {}, [b"a zombie's"], prune=False)
    store.write(9, late, 7, {}, [b"a zombie's"], prune=False)
    still = store.newest(9)
    assert still is not None and still.state == b"two"
    written = store.write(9, mine, 5, {1: 5}, [b"five"], keep=2)
    newest = store.newest(9)
    assert newest is not None and (newest.incarnation, newest.state) == (mine, b"five")
    # B's prune takes the late branch's files, keeps its restore point and a fence of each
    # head (a build head A asked for that runs later still finds A's rank).
    assert _names(store, 9) == sorted(
        [
            f"{2:020d}-{third:020d}.ckpt",
            f"{5:020d}-{mine:020d}.ckpt",
            f"fence-{third:020d}",
            f"fence-{late:020d}",
            f"fence-{mine:020d}",
        ]
    )
    assert store.begin(9, -1, build=5, epoch=0xA) < mine
    store.prune(9, written)
    assert store.read(9, 5).state == b"five"


def test_a_copy_placed_back_goes_on_as_a_build_of_the_head_that_placed_it(
    store: checkpoints.CheckpointStore,
) -> None:
    # Head A built the actor on W1 (build 1), lost W1, built it on W4 (build 3): W4 was
    # cut off too, its create queued. Head B places W1's live copy back (numbered 1 of
    # B): W1 begins a new incarnation from what it has seen (3 calls), then writes there.
    live = store.begin(10, -1, build=1, epoch=0xA)
    assert not store.superseded(10, live)
    placed = store.begin(10, 3, source=live, build=1, epoch=0xB)
    store.write(10, placed, 3, {1: 3}, [b"three"], prune=False)
    # W4's create runs only now: A's build, older than B's decision.
    late = store.begin(10, -1, build=3, epoch=0xA)
    assert late < placed and not store.superseded(10, placed)
    store.write(10, placed, 17, {1: 17}, [b"seventeen"], keep=3)
    newest = store.newest(10)
    assert newest is not None and (newest.incarnation, newest.state) == (placed, b"seventeen")


def test_two_claims_of_one_number_never_both_win(store: checkpoints.CheckpointStore) -> None:
    files = store._files
    real = files.listdir

    class Blind:
        """The folder as a worker that listed it just before another claimed a number."""

        def __getattr__(self, name: str) -> object:
            return getattr(files, name)

        def listdir(self, path: str) -> list[str]:
            self.listdir = real  # type: ignore[method-assign]
            return [n for n in real(path) if not n.startswith("fence-")]

    taken = store.begin(4, -1)
    store._files = Blind()  # type: ignore[assignment]
    assert store.begin(4, -1) == taken + 1  # its first try collided, its second won
    store._files = files


def test_a_fenced_off_incarnation_is_never_read_and_prunes_nothing(
    store: checkpoints.CheckpointStore,
) -> None:
    old = store.begin(5, -1)
    store.write(5, old, 10, {1: 10}, [b"ten"])
    base = store.write(5, old, 20, {1: 20}, [b"twenty"], keep=10)
    new = store.begin(5, 20)  # restored elsewhere from 20; the old worker still runs
    # What the old one writes now is on a branch nobody continues: kept, never read.
    store.write(5, old, 30, {1: 30}, [b"thirty, on a branch nobody continues"])
    mine = store.write(5, new, 25, {1: 25}, [b"twenty-five"], keep=20)
    # The old worker tidies up after its last write, its head's restore point past the
    # new incarnation's base: nothing goes.
    store.prune(5, base, keep=21)
    assert store.read(5, 20).state == b"twenty"
    assert store.read(5, 25).state == b"twenty-five"
    with pytest.raises(CheckpointError, match="no intact checkpoint covering 30"):
        store.read(5, 30)
    newest = store.newest(5)
    assert newest is not None and (newest.incarnation, newest.calls) == (new, 25)
    store.prune(5, mine)  # the new one's prune takes the stale branch too
    assert _names(store, 5) == [f"{25:020d}-{new:020d}.ckpt", f"fence-{new:020d}"]


def test_a_write_racing_a_newer_begin_is_never_read(
    store: checkpoints.CheckpointStore,
) -> None:
    old = store.begin(6, -1)
    store.write(6, old, 10, {}, [b"ten"])
    files = store._files
    begun: list[int] = []

    class Racing:
        """A rename during which another worker begins the actor from 10."""

        def __getattr__(self, name: str) -> object:
            return getattr(files, name)

        def rename(self, src: str, dst: str) -> None:
            begun.append(store.begin(6, 10))
            files.rename(src, dst)

    store._files = Racing()  # type: ignore[assignment]
    store.write(6, old, 15, {}, [b"fifteen"])
    store._files = files
    newest = store.newest(6)
    assert newest is not None and newest.state == b"ten"  # where the newer one began


def test_newest_and_read_ignore_a_stale_chain(store: checkpoints.CheckpointStore) -> None:
    old = store.begin(8, -1)
    store.write(8, old, 5, {2: 5}, [b"five"], keep=-1)
    store.write(8, old, 9, {2: 9}, [b"nine, never reported"], keep=-1)
    # The head knew only of 5 and restored from it: 9 is on a branch nobody continues.
    new = store.begin(8, 5)
    newest = store.newest(8)
    assert newest is not None and (newest.incarnation, newest.state) == (old, b"five")
    with pytest.raises(CheckpointError, match="no intact checkpoint covering 9 calls"):
        store.read(8, 9)
    store.write(8, new, 9, {2: 7}, [b"nine, the new chain"], keep=5)
    assert store.read(8, 9).state == b"nine, the new chain"
    assert store.read(8, 9).incarnation == new
    # The new chain's prune removes the stale file, keeps its restore point.
    assert f"{9:020d}-{old:020d}.ckpt" not in _names(store, 8)
    assert store.read(8, 5).state == b"five"
    # A create (base -1) hides every older file.
    store.begin(8, -1)
    assert store.newest(8) is None


def test_the_answers_travel_with_the_checkpoint(store: checkpoints.CheckpointStore) -> None:
    incarnation = store.begin(9, -1)
    store.write(9, incarnation, 3, {1: 3}, [b"state"], answers=memoryview(b"\x01answers"))
    newest = store.newest(9)
    assert newest is not None
    assert (bytes(newest.answers), bytes(newest.state)) == (b"\x01answers", b"state")
    store.write(9, incarnation, 4, {1: 4}, [b"state"])
    newest = store.newest(9)
    assert newest is not None and newest.answers == b"" and newest.state == b"state"


def test_the_crc_covers_the_answers(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    assert store is not None
    path = store.write(1, store.begin(1, -1), 3, {}, [b"state"], answers=b"answers")
    data = bytearray(Path(path).read_bytes())
    data[data.index(b"answers")] ^= 1
    Path(path).write_bytes(data)
    assert store.newest(1) is None


def _old_file(
    folder: Path, calls: int, checkpoint: int, covers: dict[int, int], state: bytes
) -> None:
    """A checkpoint as the previous release wrote it: format version 2, named by its ID."""
    record = json.dumps({str(k): v for k, v in covers.items()}).encode()
    header = struct.pack("<8sHQQ", b"DSTACKPT", 2, len(record), len(state))
    crc = struct.pack("<I", zlib.crc32(record + state))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{calls:020d}-{checkpoint:016x}.ckpt").write_bytes(header + record + state + crc)


def test_the_previous_release_files_still_read(tmp_path: Path) -> None:
    store = open_store(tmp_path.as_uri())
    assert store is not None
    folder = tmp_path / f"{2:016x}"
    _old_file(folder, 10, 0x10E00F0000000007, {3: 10}, b"ten")
    _old_file(folder, 12, 0, {3: 12}, b"twelve")
    newest = store.newest(2)
    assert newest is not None
    assert (newest.incarnation, newest.calls, newest.covers) == (0, 12, {3: 12})
    assert (newest.state, newest.answers) == (b"twelve", b"")
    assert store.read(2, 10).state == b"ten"
    incarnation = store.begin(2, 12)  # restored by the new release
    assert incarnation == 1
    store.write(2, incarnation, 13, {3: 13}, [b"thirteen"], keep=12)
    assert _names(store, 2) == [
        f"{12:020d}-{0:016x}.ckpt",
        f"{13:020d}-{1:020d}.ckpt",
        f"fence-{1:020d}",
    ]


def test_a_crash_mid_write_leaves_only_a_temporary_file(
    store: checkpoints.CheckpointStore,
) -> None:
    incarnation = store.begin(11, -1)
    store.write(11, incarnation, 5, {}, [b"five"])
    files = store._files

    class Dies:
        def __getattr__(self, name: str) -> object:
            return getattr(files, name)

        def rename(self, src: str, dst: str) -> None:
            raise KeyboardInterrupt  # the process goes: nothing after this runs

    store._files = Dies()  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        store.write(11, incarnation, 9, {}, [b"x" * 100_000])
    store._files = files
    names = _names(store, 11)
    assert [n for n in names if n.startswith(".tmp-")] != []
    newest = store.newest(11)
    assert newest is not None and newest.state == b"five"  # the last whole one
    store.write(11, incarnation, 10, {}, [b"ten"])  # its prune takes the temporary file
    assert _names(store, 11) == [f"{10:020d}-{incarnation:020d}.ckpt", f"fence-{incarnation:020d}"]


def test_a_stale_copy_cannot_write_back_an_actor_that_was_removed(tmp_path: Path) -> None:
    # A copy a head left behind (cut off) still runs the checkpoint it was sent, after the
    # actor was killed and its checkpoints removed: the write is refused, nothing is left.
    store = open_store(str(tmp_path))
    assert store is not None
    incarnation = store.begin(7, -1)
    store.write(7, incarnation, 1, {}, [b"one"])
    store.remove(7)
    with pytest.raises(Fenced, match="killed and its checkpoints removed"):
        store.write(7, incarnation, 2, {}, [b"two"])
    assert store.newest(7) is None
    assert list(tmp_path.iterdir()) == []
