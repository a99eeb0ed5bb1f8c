"""A trio program that fans work out to a Dista cluster from a nursery.

    python examples/trio_app.py --head HOST:PORT   # join a cluster (dista head/worker)
    python examples/trio_app.py                    # or start a local one (2 workers)

Each coroutine in the nursery awaits its own tasks (``await task.remote(...)``) on trio's
loop, joined with ``async with dista_anyio.connect(...)``: the loop runs on while they
wait, and no thread is started for Dista. One coroutine gives up on a slow task after a
deadline (``trio.move_on_after``): that cancels only its own wait; the others go on, on the
same connection, and it cancels the task itself with ``ref.cancel()``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time

import dista_anyio
import trio

import dista_runtime as dista

#: Search the Collatz chains of 1 .. LIMIT - 1, CHUNK numbers a task, in SEARCHERS coroutines.
LIMIT, CHUNK, SEARCHERS = 10_000, 500, 4


def collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@dista.task
def longest_chain(lo: int, hi: int) -> tuple[int, int]:
    """(steps, n) for the n in [lo, hi) whose Collatz chain is the longest."""
    return max((collatz_steps(n), n) for n in range(lo, hi))


@dista.task
def slow(seconds: float) -> str:
    time.sleep(seconds)
    return "finished"


async def search(first_chunk: int, results: trio.MemorySendChannel[tuple[int, int]]) -> None:
    """Every SEARCHERS-th chunk from ``first_chunk`` on, one task at a time."""
    async with results:
        for lo in range(1 + first_chunk * CHUNK, LIMIT, CHUNK * SEARCHERS):
            await results.send(await longest_chain.remote(lo, min(lo + CHUNK, LIMIT)))


async def impatient(deadline: float) -> None:
    ref = slow.remote(60)
    with trio.move_on_after(deadline):
        print(await ref)  # never: the deadline comes first
    ref.cancel()  # the wait is over; the task too
    print(f"gave up on a slow task after {deadline} s and cancelled it")


async def main(head: str | None) -> None:
    joined = dista_anyio.connect(head) if head else contextlib.nullcontext()
    async with joined:
        send, receive = trio.open_memory_channel[tuple[int, int]](SEARCHERS)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(impatient, 0.5)
            async with send:
                for i in range(SEARCHERS):
                    nursery.start_soon(search, i, send.clone())
            found = [best async for best in receive]
        steps, n = max(found)
        print(f"{len(found)} tasks awaited by {SEARCHERS} coroutines")
        print(f"longest Collatz chain below {LIMIT}: {n} ({steps} steps)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--head", default=os.environ.get("DISTA_ADDRESS"))
    args = parser.parse_args()
    if args.head:
        trio.run(main, args.head)
    else:
        # A local cluster: its driver runs on a trio loop of its own (a thread); refs are
        # awaited on this program's trio loop all the same.
        with dista.init(workers=2, loop="trio"):
            trio.run(main, None)
