# pyright: strict, reportUnnecessaryTypeIgnoreComment=true
"""The four role machines are each a `dista_proto.Core`: checked by every checker (tests/test_typing_checkers.py)."""

from __future__ import annotations

import dista_proto as dp

address = dp.Address("127.0.0.1", 1)
head: dp.Core = dp.Head(epoch=1, first_number=1)
worker: dp.Core = dp.Worker(registry_hash=1, address=address)
driver: dp.Core = dp.Driver(registry_hash=1)
observer: dp.Core = dp.Observer()
cores: list[dp.Core] = [head, worker, driver, observer]
