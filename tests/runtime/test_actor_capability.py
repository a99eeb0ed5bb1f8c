"""An actor handle carries its actor's capability wherever it goes (pickled into a task, or
out of band to another driver): the head asks it of anyone but the actor's creator."""

from __future__ import annotations

import pickle

import dista_proto as dp
from dista_runtime._api.actor import ActorHandle


def test_a_pickled_handle_carries_its_capability() -> None:
    capability = bytes(range(dp.ACTOR_CAPABILITY_SIZE))
    handle: ActorHandle[object] = ActorHandle(
        5 << dp.ID_BITS | 1, "m:Vault", {"peek": (7, False)}, None, False, capability
    )
    copy = pickle.loads(pickle.dumps(handle))
    assert copy == handle and copy.actor_id == handle.actor_id
    assert copy._capability == capability
    # A handle built from the ID alone has none: the head refuses its calls.
    bare: ActorHandle[object] = ActorHandle(handle.actor_id, "m:Vault", {}, None)
    assert pickle.loads(pickle.dumps(bare))._capability == b""
