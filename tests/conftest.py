from __future__ import annotations

import dista_proto._head


def pytest_report_header() -> str:
    # A checkout built in place with DISTA_MYPYC=1 runs the compiled core: say which.
    compiled = not dista_proto._head.__file__.endswith(".py")
    return f"dista_proto: {'compiled (mypyc)' if compiled else 'pure Python'}"
