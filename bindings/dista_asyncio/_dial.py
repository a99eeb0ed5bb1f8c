"""Connecting to a head by its address, TCP or Unix (see `dista_runtime.binding.unix_path`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from dista_runtime.binding import unix_path

__all__ = ["dial", "open_stream"]

P = TypeVar("P", bound=asyncio.BaseProtocol)


async def dial(
    loop: asyncio.AbstractEventLoop, factory: Callable[[], P], host: str, port: int
) -> tuple[asyncio.BaseTransport, P]:
    path = unix_path(host)
    if path is not None:
        return await loop.create_unix_connection(factory, path)
    return await loop.create_connection(factory, host, port)


async def open_stream(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    path = unix_path(host)
    if path is not None:
        return await asyncio.open_unix_connection(path)
    return await asyncio.open_connection(host, port)
