# pyright: strict, reportUnnecessaryTypeIgnoreComment=true
"""Public types of dista_proto, checked by every checker (tests/test_typing_checkers.py)."""

from __future__ import annotations

from typing import assert_type

import dista_proto as dp
from dista_proto import frame

conn = dp.Connection(dp.Role.DRIVER)
event = conn.next_event()
if event is not dp.NEED_DATA and not isinstance(event, dp.ConnectionClosed):
    assert_type(event, dp.Event)
assert_type(conn.data_to_send(), list[frame.Bytes])
assert_type(frame.fetch_part(b""), int)
assert_type(frame.decode_addr(b"\x7f\x00\x00\x01" + bytes(8)), tuple[bytes, int, int])
assert_type(dp.Task(1, 2, b"").object_id, int)
parts = frame.Parts()
assert_type(parts.add(b""), bool)
assert_type(parts.take(), bytearray)
