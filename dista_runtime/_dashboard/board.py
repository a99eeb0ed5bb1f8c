"""`Board`: what the dashboard knows of the cluster, fed by the watcher, read by the pages.

Theory of operation. One writer (the watcher's loop thread) calls `update` about once a
second with the head's snapshot and the timeline rows that finished since, or `unreachable`
when the head cannot be reached. Each call bumps `version` and wakes every reader waiting
in `wait` (one per open page, each on its own server thread). Readers take `state_json`,
built once per version and shared, and the rows they have not seen from `rows_after`: a page
gets the kept window when it connects and then only new rows, so 100,000 rows cross the
wire once, not every second.

The board reads no clock: every time it keeps (the window of rows, when a worker left) is on
the head's wall clock, ``snapshot["time_ns"]``, the same clock the rows are stamped on.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from .fields import Record, as_float, as_int, as_str, maybe_int, records, sub
from .view import Departure, Tables, page_state

__all__ = ["Board", "Row"]


class Row(NamedTuple):
    """One finished task or actor call of the head's timeline (notes/dashboard-spec.md)."""

    object_id: int  # u64
    task_id: int  # u64: the function (names in snapshot["labels"])
    submitted_ns: int  # wall-clock ns (0: unknown)
    dispatched_ns: int  # wall-clock ns (0: unknown)
    started_ns: int  # wall-clock ns, on the worker
    ended_ns: int  # wall-clock ns, on the worker
    worker: str  # "host:port", as in snapshot["workers"][i]["address"]
    failed: bool  # its result is an error


#: A row as the browser gets it: [function index, worker index, start µs, duration µs,
#: µs from submitted to start (-1: unknown), µs from dispatched to start (-1), failed 0/1,
#: object ID hex]. Indexes point into the state's "names" and "row_workers": small numbers
#: instead of a name per row keep 100,000 rows near 6 MB of JSON.
WireRow = list[object]


class Board:
    """Thread-safe: `update`/`unreachable` from the watcher, everything else from pages."""

    def __init__(self, *, window_s: float = 600.0, max_rows: int = 100_000) -> None:
        self.window_ns = int(window_s * 1e9)
        self.max_rows = max_rows
        self._changed = threading.Condition()
        self._version = 0
        self._wakes = 0
        self._snapshot: Record = {}
        self._up = False
        self._why = "waiting for the head's first answer"
        self._names: dict[int, str] = {}
        self._departed: dict[str, Departure] = {}
        self._function_index: dict[int, int] = {}
        self._worker_index: dict[str, int] = {}
        self._base_ns = 0
        # (sequence number, ended_ns, wire row); sequence numbers are consecutive, so a
        # reader's position is one int and the kept rows are `_first_seq` onwards.
        self._rows: deque[tuple[int, int, WireRow]] = deque()
        self._first_seq = 0
        self._since_ns = 0
        self._cached: tuple[int, bytes] = (-1, b"")

    # -- the writer -------------------------------------------------------------------------

    def update(self, snapshot: Mapping[str, object], rows: Sequence[Row]) -> None:
        """The head answered: its snapshot and the rows that finished since the last one."""
        with self._changed:
            now_ns = as_int(snapshot, "time_ns")
            if not self._base_ns:
                # Whole milliseconds, so the browser holds the base exactly as a double.
                self._base_ns = now_ns // 1_000_000 * 1_000_000
            for key, name in sub(snapshot, "labels").items():
                if isinstance(name, str) and key.isdigit():
                    self._names[int(key)] = name
            self._note_departures(snapshot, now_ns)
            self._snapshot = snapshot
            self._up, self._why = True, ""
            self._add_rows(rows, now_ns)
            self._bump()

    def unreachable(self, why: str) -> None:
        """The head cannot be reached: keep the last picture, say it is stale and why."""
        with self._changed:
            self._up, self._why = False, why
            self._bump()

    def _bump(self) -> None:
        self._version += 1
        self._changed.notify_all()

    def _note_departures(self, snapshot: Record, now_ns: int) -> None:
        present = {as_str(w, "address") for w in records(snapshot, "workers")}
        told = set()
        for gone in records(snapshot, "departed"):
            address = as_str(gone, "address")
            why = "drained" if as_str(gone, "why") == "drained" else "lost"
            at_ns = now_ns - int(as_float(gone, "ago_s") * 1e9)
            told.add(address)
            if address not in self._departed or self._departed[address].why != why:
                self._departed[address] = Departure(address, maybe_int(gone, "pid"), why, at_ns)
        # A worker that vanished without the head saying so (a head restarted since, or a
        # departure it already forgot) is lost as far as anyone can tell.
        for w in records(self._snapshot, "workers"):
            address = as_str(w, "address")
            if address not in present and address not in told:
                self._departed.setdefault(
                    address, Departure(address, maybe_int(w, "pid"), "lost", now_ns)
                )
        for address in present:
            self._departed.pop(address, None)  # back (a worker restarted on its port)
        for address, departure in list(self._departed.items()):
            if now_ns - departure.at_ns > self.window_ns:
                del self._departed[address]

    def _add_rows(self, rows: Sequence[Row], now_ns: int) -> None:
        seq = self._first_seq + len(self._rows)
        for row in rows:
            self._rows.append((seq, row.ended_ns, self._wire(row)))
            seq += 1
        # Rows arrive in the order they finished, so the oldest are on the left.
        cutoff = now_ns - self.window_ns
        while self._rows and (len(self._rows) > self.max_rows or self._rows[0][1] < cutoff):
            self._rows.popleft()
            self._first_seq += 1
        oldest = self._rows[0][1] if self._rows else now_ns
        self._since_ns = max(cutoff, min(oldest, now_ns))

    def _wire(self, row: Row) -> WireRow:
        function = self._function_index.setdefault(row.task_id, len(self._function_index))
        worker = self._worker_index.setdefault(row.worker, len(self._worker_index))
        start = row.started_ns

        def before_start(stamp: int) -> int:
            return (start - stamp) // 1000 if stamp and stamp <= start else -1

        return [
            function,
            worker,
            (start - self._base_ns) // 1000,
            max(0, row.ended_ns - start) // 1000,
            before_start(row.submitted_ns),
            before_start(row.dispatched_ns),
            1 if row.failed else 0,
            f"{row.object_id:#x}",
        ]

    # -- the readers ------------------------------------------------------------------------

    @property
    def version(self) -> int:
        with self._changed:
            return self._version

    def wait(self, version: int, timeout: float) -> int:
        """Block until the version is no longer ``version`` (or `wake`, or ``timeout``
        seconds); the version now."""
        with self._changed:
            wakes = self._wakes
            self._changed.wait_for(
                lambda: self._version != version or self._wakes != wakes, timeout
            )
            return self._version

    def wake(self) -> None:
        """Wake every waiting reader without a change (a server closing)."""
        with self._changed:
            self._wakes += 1
            self._changed.notify_all()

    def latest(self) -> tuple[Record, bool]:
        """The latest snapshot (empty before the first) and whether the head answers."""
        with self._changed:
            return self._snapshot, self._up

    def names(self) -> dict[int, str]:
        """Every task and type name the head has sent (its snapshots send each once)."""
        with self._changed:
            return dict(self._names)

    def departed(self) -> list[Departure]:
        with self._changed:
            return list(self._departed.values())

    def state(self) -> dict[str, object]:
        """The view model (`view.page_state`), without the rows themselves."""
        with self._changed:
            tables = Tables(
                names=dict(self._names),
                departed=dict(self._departed),
                functions=list(self._function_index),
                row_workers=list(self._worker_index),
                base_ns=self._base_ns,
            )
            rows: dict[str, object] = {
                "count": len(self._rows),
                "next": self._first_seq + len(self._rows),
                "since_us": (self._since_ns - self._base_ns) // 1000,
                "window_s": self.window_ns / 1e9,
            }
            return page_state(
                self._snapshot,
                tables,
                version=self._version,
                up=self._up,
                why=self._why,
                rows=rows,
            )

    def state_json(self) -> tuple[int, bytes, int]:
        """The view model as JSON, its version, and the sequence number of the next row:
        built once per version for every page. The rows before that number are the ones
        the state's tables ("names", "row_workers") cover."""
        with self._changed:
            next_seq = self._first_seq + len(self._rows)
            version, cached = self._cached
            if version != self._version:
                cached = json.dumps(self.state(), separators=(",", ":")).encode()
                self._cached = (self._version, cached)
            return self._version, cached, next_seq

    def rows_after(
        self, seq: int, limit: int = 1 << 62, until: int | None = None
    ) -> tuple[list[WireRow], int]:
        """The kept rows from sequence number ``seq`` on (at most ``limit``, and none from
        ``until`` on), and the next number to ask for. A reader that fell behind the window
        gets what is still kept."""
        with self._changed:
            skip = max(0, seq - self._first_seq)
            if until is not None:
                limit = min(limit, until - self._first_seq - skip)
            kept = [r for _, _, r in itertools.islice(self._rows, skip, skip + max(0, limit))]
            return kept, max(seq, self._first_seq) + len(kept)
