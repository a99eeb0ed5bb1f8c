"""dista_runtime: Dista's typed user API.

import dista_runtime as dista

@dista.task
def add(a: int, b: int) -> int:
    return a + b

with dista.init():                     # a local cluster: a head and a worker per core
    ref = add.remote(1, 2)             # ObjectRef[int], at once
    print(add.remote(ref, 3).get())    # 6: the ref became an input, no round trip
"""

from __future__ import annotations

from dista_proto import HeadStats, TimelineRecord

from ._api.actor import ActorHandle, ActorMethod, CheckpointWarning, actor, get_actor
from ._api.actor_base import Actor, ActorOptions
from ._api.cluster import Cluster, init, local_pids, shutdown
from ._api.objects import (
    as_completed,
    get,
    put,
    stats,
    stats_async,
    timeline,
    timeline_async,
    wait,
)
from ._api.ref import ObjectRef, value_of
from ._api.remote_function import (
    RemoteFunction,
    RemoteFunction2,
    RemoteFunction3,
    RemoteFunction4,
    RemoteFunction5,
    RemoteFunction6,
    RemoteFunctionN,
)
from ._api.task import task
from ._api.trace import chrome_trace, write_chrome_trace
from ._errors import CheckpointError, DistaError, GetTimeoutError, TaskCancelledError, TaskError
from ._pools import Executor, Pool
from .logs import install_default as _install_log_handler

# Dista's lines get a time and a role in an application that has not configured logging,
# and step aside for its handlers once it has (`dista_runtime.logs`).
_install_log_handler()

__all__ = [
    "Actor",
    "ActorHandle",
    "ActorOptions",
    "ActorMethod",
    "CheckpointError",
    "CheckpointWarning",
    "Cluster",
    "DistaError",
    "Executor",
    "GetTimeoutError",
    "HeadStats",
    "ObjectRef",
    "Pool",
    "RemoteFunction",
    "RemoteFunction2",
    "RemoteFunction3",
    "RemoteFunction4",
    "RemoteFunction5",
    "RemoteFunction6",
    "RemoteFunctionN",
    "TaskCancelledError",
    "TaskError",
    "TimelineRecord",
    "actor",
    "as_completed",
    "chrome_trace",
    "get",
    "get_actor",
    "init",
    "local_pids",
    "put",
    "shutdown",
    "stats",
    "stats_async",
    "task",
    "value_of",
    "timeline",
    "timeline_async",
    "wait",
    "write_chrome_trace",
]
