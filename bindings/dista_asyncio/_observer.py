"""The observer role over asyncio: one question to the head (status, timeline, stats, stop)."""

from __future__ import annotations

import asyncio

import dista_proto as dp
from dista_runtime._address import format_head

from ._dial import open_stream

__all__ = ["ask_head"]


async def ask_head(
    host: str, port: int, request: dp.Event, timeout: float = 10.0
) -> dp.Event | None:
    """Send ``request`` as an observer; the head's answer (None for stop, which has none)."""
    try:
        reader, writer = await asyncio.wait_for(open_stream(host, port), timeout)
    except (OSError, TimeoutError) as e:
        raise ConnectionError(
            f"cannot reach a Dista head at {format_head(host, port)}: {e}"
        ) from e
    conn = dp.Connection(dp.Role.OBSERVER)
    conn.send(dp.Hello(dp.frame.ROLE_OBSERVER))
    conn.send(request)
    writer.writelines(conn.data_to_send())
    try:
        await writer.drain()
        if isinstance(request, dp.Stop):
            return None

        async def answer() -> dp.Event:
            while True:
                event = conn.next_event()
                if event is dp.NEED_DATA:
                    conn.receive_data(await reader.read(1 << 16))
                    continue
                assert not isinstance(event, dp.NeedData)
                if isinstance(event, dp.ConnectionClosed):
                    raise ConnectionError("the head closed the connection without answering")
                if isinstance(event, dp.Error):
                    raise ConnectionError(f"the head refused: {event.message}")
                return event

        return await asyncio.wait_for(answer(), timeout)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass
