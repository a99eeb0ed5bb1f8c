"""Optional compiled core: ``DISTA_MYPYC=1`` compiles dista_proto's hot modules with mypyc.

Without the variable this adds nothing (pyproject.toml holds the metadata) and Dista is
pure Python. With it, mypy (mypyc) must be importable in the build environment::

    pip install "mypy==2.4.1" && DISTA_MYPYC=1 pip install --no-build-isolation .
    DISTA_MYPYC=1 python setup.py build_ext --inplace   # in a checkout; rm dista_proto/*.so

`frame` (the protocol page's module), `_events` and `_decisions` (dataclasses mypyc cannot
compile as written) and the package's ``__init__`` stay interpreted. ``DISTA_MYPYC_OPT``
sets the C compiler's optimization level (default 3); tests/test_mypyc.py builds at 0,
which compiles in about 60% of the time and checks the same code.
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import setup

INTERPRETED = {"__init__.py", "frame.py", "_events.py", "_decisions.py"}


def _modules() -> list[str]:
    core = Path(__file__).resolve().parent / "dista_proto"
    return sorted(f"dista_proto/{p.name}" for p in core.glob("*.py") if p.name not in INTERPRETED)


if os.environ.get("DISTA_MYPYC") == "1":
    from mypyc.build import mypycify

    setup(ext_modules=mypycify(_modules(), opt_level=os.environ.get("DISTA_MYPYC_OPT", "3")))
else:
    setup()
