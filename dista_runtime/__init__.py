"""dista_runtime: the user API (arrives with the runtime issue)."""

from __future__ import annotations

__all__: list[str] = []
