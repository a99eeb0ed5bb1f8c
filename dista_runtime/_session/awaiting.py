"""``await ref`` on whatever loop runs the caller: the binding for that loop waits.

A ref's value is settled on the loop that runs its session, which need not be the loop of
the coroutine awaiting it (a trio program reading refs of a ``dista.init`` driver, a
worker's ``async def`` task). The awaiting coroutine's library (sniffio's answer, as anyio
asks it) names the binding whose backend (an `AsyncBackend`) awaits the latch there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from .._net.contract import AsyncBackend
from .._net.latch import Latch
from ..loops import backend

__all__ = ["current_library", "wait_latch"]

T = TypeVar("T")

#: The binding that waits on each async library's loop.
_LOOP_OF: Final = {"asyncio": "asyncio", "trio": "trio"}
_waits: dict[str, Callable[[Latch[Any], float | None], Awaitable[Any]]] = {}


def current_library() -> str:
    """The async library running the current task ("asyncio", "trio")."""
    try:
        import sniffio
    except ImportError:  # without sniffio there is no trio either
        return "asyncio"
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return "asyncio"


async def wait_latch(latch: Latch[T], timeout: float | None) -> T:
    """Wait for ``latch`` on the running loop (TimeoutError after ``timeout`` seconds)."""
    if latch.done():
        return latch.result()
    library = current_library()
    wait = _waits.get(library)
    if wait is None:
        name = _LOOP_OF.get(library)
        if name is None:
            raise RuntimeError(
                f"Dista cannot wait on {library}'s loop: await refs on asyncio or trio"
            )
        found = backend(name)
        if not issubclass(found, AsyncBackend):
            raise RuntimeError(f"Dista's {name} binding cannot be awaited")
        wait = _waits[library] = found.wait
    value: T = await wait(latch, timeout)
    return value
