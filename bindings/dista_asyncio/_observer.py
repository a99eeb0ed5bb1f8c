"""The observer role over asyncio: one question to the head (status, timeline, stop).

The `Observer` core says hello and reads the answer; this only moves its bytes.
"""

from __future__ import annotations

import asyncio
import time

import dista_proto as dp
from dista_runtime.binding import format_head

from ._dial import open_stream

__all__ = ["ask_head"]


async def ask_head(
    host: str, port: int, request: dp.Status | dp.Timeline | dp.Stop, timeout: float = 10.0
) -> dp.Event | None:
    """Send ``request`` as an observer; the head's answer (None for stop, which has none)."""
    try:
        reader, writer = await asyncio.wait_for(open_stream(host, port), timeout)
    except (OSError, TimeoutError) as e:
        raise ConnectionError(
            f"cannot reach a Dista head at {format_head(host, port)}: {e}"
        ) from e
    core = dp.Observer()
    core.start(time.time_ns())
    core.ask(request, time.time_ns())

    async def answer() -> dp.Event | None:
        while True:
            for decision in core.decisions():
                if isinstance(decision, dp.Write):
                    writer.writelines(decision.buffers)
                elif isinstance(decision, dp.Answered):
                    return decision.answer
                elif isinstance(decision, dp.Refused):
                    raise ConnectionError(f"the head refused: {decision.reason}")
                elif isinstance(decision, dp.Exit):
                    raise ConnectionError(f"no answer: {decision.reason}")
            await writer.drain()
            if isinstance(request, dp.Stop):
                return None
            data = await reader.read(1 << 16)
            if data:
                core.receive_data(dp.HEAD_LINK, data, time.time_ns())
            else:
                core.connection_lost(dp.HEAD_LINK, time.time_ns())

    try:
        return await asyncio.wait_for(answer(), timeout)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass
