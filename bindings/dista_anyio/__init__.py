"""dista_anyio: the anyio binding (roles arrive with the runtime issue)."""

from __future__ import annotations

__all__: list[str] = []
