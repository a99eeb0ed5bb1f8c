"""Executors and pools over a Dista cluster: `Executor` (`concurrent.futures`) and `Pool`
(`multiprocessing.Pool`). docs/executor.md says how they match the standard library's."""

from .executor import Executor
from .futures import DistaFuture
from .pool import Pool
from .results import AsyncResult, IMapIterator, MapResult, PoolTimeoutError

__all__ = [
    "AsyncResult",
    "DistaFuture",
    "Executor",
    "IMapIterator",
    "MapResult",
    "Pool",
    "PoolTimeoutError",
]
