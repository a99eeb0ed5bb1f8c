"""Optional compiled core: ``DISTA_MYPYC=1`` compiles dista_proto's hot modules with mypyc.

Without the variable this adds nothing (pyproject.toml holds the metadata) and Dista is
pure Python. With it, mypy (mypyc) must be importable in the build environment::

    pip install "mypy==2.4.1" && DISTA_MYPYC=1 pip install --no-build-isolation .
    DISTA_MYPYC=1 python setup.py build_ext --inplace   # in a checkout; rm dista_proto/*.so

`frame` (the protocol page's module), `_events` and `_decisions` (dataclasses mypyc cannot
compile as written), the package's ``__init__`` and the dashboard's modules (off every
task's path) stay interpreted. ``DISTA_MYPYC_OPT``
sets the C compiler's optimization level (default 3); tests/test_mypyc.py builds at 0,
which compiles in about 60% of the time and checks the same code, with
``DISTA_MYPYC_MULTI_FILE=1`` and ``build_ext -j 2`` (30 s instead of 68 s on 2 cores).
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import setup

INTERPRETED = {"__init__.py", "frame.py", "_events.py", "_decisions.py"}
# Off every task's path (a dashboard's labels, vitals and snapshots): compiling them would
# only lengthen the build.
INTERPRETED |= {"_head_labels.py", "_head_snapshot.py", "_head_watching.py", "_telling.py"}
INTERPRETED |= {"_watch_frames.py"}


def _modules() -> list[str]:
    core = Path(__file__).resolve().parent / "dista_proto"
    return sorted(f"dista_proto/{p.name}" for p in core.glob("*.py") if p.name not in INTERPRETED)


if os.environ.get("DISTA_MYPYC") == "1":
    from mypyc.build import mypycify

    setup(
        ext_modules=mypycify(
            _modules(),
            opt_level=os.environ.get("DISTA_MYPYC_OPT", "3"),
            # Many smaller C files, which `build_ext -j N` compiles in parallel: a build in
            # less than half the time (tests/test_mypyc.py); one file is a little faster.
            multi_file=os.environ.get("DISTA_MYPYC_MULTI_FILE") == "1",
        )
    )
else:
    setup()
