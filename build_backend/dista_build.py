"""Dista's build backend: setuptools' own, but for an editable install both type checkers see.

``pip install -e .`` with setuptools puts an import hook in site-packages (a ``.pth`` that
installs a meta-path finder), because ``dista_asyncio`` and its siblings live in
``bindings/``, not beside ``dista_proto``. Python imports through it, but mypy and pyright
only read the plain directory lines of ``.pth`` files: to them, nothing is installed
(mypy: ``import-not-found``; pyright: every type unknown). Here the editable wheel
setuptools builds is kept, except that its ``.pth`` lists the two directories the packages
are in (the checkout and ``bindings/``) instead of loading the finder, which is dropped.
Everything else (``build_wheel``, ``build_sdist``, the metadata, the mypyc build of
``setup.py``) is setuptools' unchanged. An editable mode asked for explicitly
(``--config-settings editable_mode=strict``) is left as setuptools made it.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # the rest of the backend, as it is

#: Where the packages are, relative to the checkout (pyproject.toml's package-dir).
PACKAGE_ROOTS = (".", "bindings")


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    name: str = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    if not (config_settings or {}).get("editable_mode"):
        _plain_paths(Path(wheel_directory) / name, Path.cwd())
    return name


def _plain_paths(wheel: Path, project: Path) -> None:
    """Rewrite ``wheel`` so that its ``.pth`` names directories and no finder is left."""
    with zipfile.ZipFile(wheel) as old:
        entries = {info.filename: old.read(info) for info in old.infolist()}
    finders = [n for n in entries if n.startswith("__editable___") and n.endswith("_finder.py")]
    hooks = [n for n in entries if n.startswith("__editable__") and n.endswith(".pth")]
    if not finders or len(hooks) != 1:
        return  # not the finder-based layout this backend knows: leave it as setuptools made it
    for finder in finders:
        del entries[finder]
    lines = [str((project / root).resolve()) for root in PACKAGE_ROOTS]
    entries[hooks[0]] = ("\n".join(lines) + "\n").encode()
    record = next(n for n in entries if n.endswith(".dist-info/RECORD"))
    rows = [
        f"{n},sha256={_digest(data)},{len(data)}" for n, data in entries.items() if n != record
    ]
    entries[record] = ("\n".join([*rows, f"{record},,"]) + "\n").encode()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as new:
        for n, data in entries.items():
            new.writestr(n, data)


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
