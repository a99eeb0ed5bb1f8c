"""Dista's wire conventions: what the page leaves to the implementation, in one place.

- **Object IDs** carry their driver's number: ``number << ID_BITS | n``, with the number in
  [1, `NUMBER_SPACE`) and ``n`` counting from 1. They stay valid after a head restart and
  never collide between drivers; a task-many's results are consecutive IDs.
- **Task IDs** are a name's hash in their low `TASK_ID_BITS` bits; the top 4 carry the
  task's retry limit after a lost worker (`retry_limit`, `with_retry_limit`).
- **The head's link** is link `HEAD_LINK` on every worker and driver.
- **Marks** in the task-ID field of span, free and cancel, which the page leaves at 0 for
  them: Dista's extensions. A peer that knows only the page ignores the field there, so a
  marked frame degrades to the page's meaning: a span still reads as the task's times, a
  free of an ID that names no object deletes nothing, a cancel still cancels.
  docs/wire.md, "Extensions", gives the reasoning for each.
- **Fetch parts** are at least `MIN_FETCH_PART` bytes.
- **Hello marks** in the hello's task-ID field: a worker's `HELLO_ANY_REGISTRY` and
  `HELLO_CHECKPOINTS`.
- **Actor capabilities** are `ACTOR_CAPABILITY_SIZE` random bytes a creating driver draws
  per actor, sent in Dista's actor-open frame (kind 34).
- **Driver secrets**: a hello marked `HELLO_SECRET` asks the head for a `SECRET_SIZE`-byte
  secret (in a welcome with the same mark), which the driver's resumes carry; fetch tokens
  of `TOKEN_SIZE` bytes derive from it (`dista_proto._credentials`).
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Final

from ._events import Address
from .frame import Bytes

__all__ = [
    "ACTOR_CAPABILITY_SIZE",
    "CANCEL_FORCE",
    "ERROR_AT",
    "ERROR_AWAITS_HOST",
    "ERROR_COVERED",
    "ERROR_FENCED",
    "ERROR_HOSTS_ACTOR",
    "ERROR_NO_CHECKPOINT",
    "STATS_NO_REPLY",
    "ERROR_WARNING",
    "FREE_STORE",
    "FREE_WITHDRAW",
    "HELLO_ANY_REGISTRY",
    "HELLO_CHECKPOINTS",
    "HELLO_HOSTS_ACTOR",
    "HELLO_RUNS_AHEAD",
    "MADE_HERE",
    "HEAD_LINK",
    "HELLO_SECRET",
    "ID_BITS",
    "ID_MASK",
    "KEPT_CALL_BYTES",
    "KILL_AFTER_CALLS",
    "KILL_FORCE",
    "KILL_KEEP",
    "MAX_RESULTS",
    "MIN_FETCH_PART",
    "NUMBER_SPACE",
    "RESTORE_NEWEST",
    "SECRET_SIZE",
    "SPAN_ALIVE",
    "SPAN_BLOCKED",
    "SPAN_RESUMED",
    "SPAN_WITHDRAWN",
    "TASK_ID_BITS",
    "TASK_ID_MASK",
    "TICKET_SIZE",
    "TOKEN_SIZE",
    "awaited_ms",
    "awaits_host_mark",
    "driver_number",
    "hosted_calls",
    "hosts_mark",
    "kept_size",
    "retry_limit",
    "function_id",
    "with_retry_limit",
    "at_mark",
    "failed_at",
]

#: Driver numbers are in [1, NUMBER_SPACE).
NUMBER_SPACE: Final = 1 << 24
#: An object ID is ``number << ID_BITS | n``.
ID_BITS: Final = 40
ID_MASK: Final = (1 << ID_BITS) - 1
#: The most results one task may have: the head makes an object for each, so a 29-byte
#: task-many must not make millions (a head refuses more; a driver core raises).
MAX_RESULTS: Final = 1 << 16
#: A task ID's name hash; the 4 bits above carry the retry limit.
TASK_ID_BITS: Final = 60
TASK_ID_MASK: Final = (1 << TASK_ID_BITS) - 1
#: The link a worker or driver core gives its connection to the head.
HEAD_LINK: Final = 0


def driver_number(object_id: int) -> int:
    """The number of the driver that minted ``object_id``."""
    return object_id >> ID_BITS


def retry_limit(task_id: int, default: int) -> int:
    """How often a task is retried after losing its worker: the task ID's top 4 bits.

    0 means the head's default; n in 1..15 means n - 1 retries. A runtime that hashes task
    names into the low 60 bits can so carry a per-task limit without a frame field.
    """
    nibble = task_id >> TASK_ID_BITS
    return default if nibble == 0 else nibble - 1


def function_id(task_id: int, argument: Bytes | None, by_value_task: int) -> int:
    """The ID people's names and the head's tallies use for a task's function: its task
    ID's low bits; but a by-value task (``by_value_task``, whose argument begins with its
    function's 16-byte digest; -1: ``task_id`` is one) is named by the digest's first 8
    bytes (masked as a task ID), so that each function sent by value is told apart
    (drivers label them so)."""
    low = task_id & TASK_ID_MASK
    if (low != by_value_task and by_value_task != -1) or argument is None or len(argument) < 8:
        return low
    return int.from_bytes(argument[:8], "little") & TASK_ID_MASK


def with_retry_limit(name_hash: int, retries: int | None) -> int:
    """The task ID for ``name_hash`` carrying ``retries`` (None: the head's default)."""
    if retries is None:
        return name_hash & TASK_ID_MASK
    if not 0 <= retries <= 14:
        raise ValueError(f"a task ID carries 0 to 14 retries, not {retries}")
    return (retries + 1) << TASK_ID_BITS | name_hash & TASK_ID_MASK


#: Span mark, worker to head: the task blocked reading other objects; its slot is free
#: until `SPAN_RESUMED`, so the tasks it waits for can run (nested gets never deadlock).
SPAN_BLOCKED: Final = 1
#: Span mark: the blocked task runs again and takes a slot back.
SPAN_RESUMED: Final = 2
#: Span mark: the worker dropped the task without running it (after a free): no answers
#: follow; the head requeues it (a withdrawal) or settles it (a cancel).
SPAN_WITHDRAWN: Final = 3

#: Span mark, worker to head, object ID 0: the worker is alive (a heartbeat, sent every
#: few seconds), so that a head notices a worker that stopped answering (SIGSTOP, a hung
#: host, a link cut without a reset) within its liveness timeout.
SPAN_ALIVE: Final = 4

#: Stats mark, driver to head: a keepalive, not a request: the head does not answer it. A
#: driver quiet for long sends one so that the head's idle timeout does not close it; a
#: peer that knows only the page answers it, and the driver drops the unasked reply.
STATS_NO_REPLY: Final = 1

#: Free mark, head to worker: take this task back if it has not started (the worker answers
#: `SPAN_WITHDRAWN`), else let it run. An unmarked free of a task the worker holds drops it
#: if it has not started, else interrupts it: the head cancelled it.
FREE_WITHDRAW: Final = 1
#: Free mark, head to worker, just before the task whose first result it names: store that
#: task's results on the object server whatever their size (its driver keeps its cap of
#: inline results in the head). A worker without the mark frees nothing: none is stored yet.
FREE_STORE: Final = 2

#: Error mark, head to driver: the object the error names (an actor) lives on; the message
#: is a warning about it (a checkpoint could not be written), not its failure.
ERROR_WARNING: Final = 1

#: Error mark, worker to head, on an actor call: the checkpoint the actor was restored from
#: already includes this call, so it was not run again (after a head restart).
ERROR_COVERED: Final = 2
#: Error mark, worker to head, answering actor-restore for `RESTORE_NEWEST`: the actor has
#: no checkpoint to restore from (the head sends its actor-create instead).
ERROR_NO_CHECKPOINT: Final = 3
#: Error mark, worker to head, right after the holding of a rejoin: this worker still hosts
#: the actor the frame names, alive (it lost its head link, not its process). A new head
#: places the actor back there (actor-restore for `RESTORE_NEWEST`, answered from the live
#: instance) instead of rebuilding it from a checkpoint. A head that knows only the page
#: finds no object of that ID and ignores the frame.
ERROR_HOSTS_ACTOR: Final = 4

#: Error mark, worker to head, answering actor-restore for `RESTORE_NEWEST` of the actor
#: alive on it: that live copy is stale (the checkpoint store's fence shows the actor was
#: built again elsewhere since: a head before lost this worker). The head drops it and
#: waits on for the newer copy to rejoin, the recovery grace at most.
ERROR_FENCED: Final = 5

#: Error mark, head to a driver whose hello asked a secret (Dista's own; a peer that knows
#: only the page would read the frame as the actor's failure, so it gets none): after a
#: head restart, the actor the frame names waits for the worker that hosted it to rejoin,
#: at most the milliseconds the mark carries above its low byte (`awaits_host_mark`), its
#: calls held meanwhile. 0 there: it waits no more (the message says where it runs now).
#: Sent once per actor and driver per wait; not a failure.
ERROR_AWAITS_HOST: Final = 6


#: Error mark, head to a Dista driver (one whose hello asked a secret): the actor call
#: failed, and ran at the position the mark's bits above the low byte carry (`at_mark`);
#: a failure all the same. A resume sends the position back (actor-order).
ERROR_AT: Final = 7


def at_mark(position: int) -> int:
    """`ERROR_AT` for an actor call that failed at ``position`` in its actor's order."""
    return position << 8 | ERROR_AT


def failed_at(mark: int) -> int | None:
    """The position an `ERROR_AT` mark carries; None for another mark."""
    return mark >> 8 if mark & 0xFF == ERROR_AT else None


def awaits_host_mark(wait_ms: int) -> int:
    """`ERROR_AWAITS_HOST` saying the actor waits ``wait_ms`` at most (0: no more)."""
    return max(0, wait_ms) << 8 | ERROR_AWAITS_HOST


def awaited_ms(mark: int) -> int | None:
    """The wait an `ERROR_AWAITS_HOST` mark announces (0: over); None for another mark."""
    return mark >> 8 if mark & 0xFF == ERROR_AWAITS_HOST else None


def hosts_mark(calls: int) -> int:
    """`ERROR_HOSTS_ACTOR` with the calls the live actor has seen (in its heads' numbering)
    in the mark's bits above the low byte: of two live copies a new head hears of (one a
    head before it left behind, cut off), the one that has seen more is the newer."""
    return calls << 8 | ERROR_HOSTS_ACTOR


def hosted_calls(mark: int) -> int | None:
    """The calls an `ERROR_HOSTS_ACTOR` mark says its actor has seen; None for another mark."""
    return mark >> 8 if mark & 0xFF == ERROR_HOSTS_ACTOR else None


#: Actor-restore's call count meaning "the newest intact checkpoint": a head restarted
#: does not know which there is. The worker answers with a result carrying, as a u64, the
#: calls the checkpoint it restored from covers, or `ERROR_NO_CHECKPOINT`.
RESTORE_NEWEST: Final = (1 << 64) - 1

#: Actor-kill mark, driver to head: destroy the actor once the calls already made to it
#: have run (its last handle went away: Ray's graceful end), not at once.
KILL_AFTER_CALLS: Final = 1
#: Actor-kill mark, driver to head: also end the worker process hosting the actor, for a
#: method stuck in C code that nothing else stops (as `CANCEL_FORCE` for a task).
KILL_FORCE: Final = 2

#: Actor-kill mark, head to worker: destroy the actor but keep its checkpoints: it moves
#: to another worker (its worker drains) and is restored there from them.
KILL_KEEP: Final = 3

#: What one actor call kept for a rebuild costs besides its argument's bytes (its record,
#: its place in the kept and unanswered tables: 180-260 bytes measured, in the head and a
#: driver alike). Counted against the keep budgets so that calls with tiny arguments are
#: bounded too: counting the argument alone, a 64 MiB budget let 10-byte calls keep
#: millions of records, a gigabyte, and an actor nobody checkpoints grow the head for ever.
KEPT_CALL_BYTES: Final = 256


def kept_size(argument: Sized) -> int:
    """The bytes a kept call with ``argument`` counts against a keep budget."""
    return len(argument) + KEPT_CALL_BYTES


#: Cancel mark, driver to head: also end the worker process running the task.
CANCEL_FORCE: Final = 1

#: The smallest part an object server cuts an object into; a fetch asking for less is
#: refused with an error frame (a 1-byte part size would mean a frame per byte).
MIN_FETCH_PART: Final = 64 * 1024

#: Hello mark, driver or client to head: give this driver a secret. The welcome answers
#: with the same mark and the secret after number and epoch; a resume with the mark carries
#: the secret after them, and the head takes it only if it matches. A peer that knows only
#: the page reads the mark as nothing and gets the page's welcome.
HELLO_SECRET: Final = 1
#: A driver's secret: what proves, on a resume, that it is the driver the head numbered.
SECRET_SIZE: Final = 16
#: A fetch token: what a driver's fetch shows an object server that the head granted it.
TOKEN_SIZE: Final = 16
#: The ticket a mapped object goes to a fetcher's mailbox with (`Mapped`): random, shown
#: again in the mapped frame, so that only the object server's memory file is taken.
TICKET_SIZE: Final = 16
#: Hello mark, worker to head: this worker runs by-value code (functions and actor classes
#: that travel pickled) from drivers of any registry, not only of its own
#: (``dista worker --accept-by-value``). A head that knows only the page ignores the field:
#: it sends such a worker nothing it would not have sent it anyway. (1 is the driver's
#: ``HELLO_SECRET``.)
HELLO_ANY_REGISTRY: Final = 2
#: Hello mark, worker to head: this worker has a checkpoint store (DISTA_CHECKPOINT_URI), so
#: it can write an actor's checkpoints and restore an actor from them. The head prefers such
#: a worker for any actor and places an actor that restores only there. A head that knows
#: only the page ignores the field.
HELLO_CHECKPOINTS: Final = 4
#: Hello mark, worker to head, on a rejoin: an error frame marked `ERROR_HOSTS_ACTOR`
#: follows the holding; until it comes, the head gives this worker no task and no actor.
HELLO_HOSTS_ACTOR: Final = 8
#: Hello mark, worker to head: this worker runs tasks ahead (docs/protocol.md, "Tasks sent
#: ahead"): to it, a task-inputs input located at its own object server that it does not
#: store yet is one of its own results still to come, which it waits for instead of
#: failing the task. A head that knows only the page ignores the field and never sends one.
HELLO_RUNS_AHEAD: Final = 16
#: Where a task-inputs input "is" when it is the receiving worker's own result still to
#: come (sent ahead, `HELLO_RUNS_AHEAD`): no object server has this address.
MADE_HERE: Final = Address("0.0.0.0", 0)

#: The bytes of an actor's capability: drawn at random by its creating driver, carried by
#: every handle, and shown to the head in actor-open by any other peer before it calls or
#: kills the actor. 128 bits: not guessable, unlike the actor's ID.
ACTOR_CAPABILITY_SIZE: Final = 16
