"""``dista run SCRIPT``: a script as ``python SCRIPT`` runs it, on a fresh local cluster.

The cluster (a head and workers on loopback) starts on the script's first use of Dista
(`_context.auto_init`) and stops when the script ends, however it ends. The script's own
error shows its traceback from the script's frame on, as python would show it, exit 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

__all__ = ["cmd_run"]

_log = logging.getLogger("dista.driver")


def cmd_run(args: argparse.Namespace) -> int:
    """Run ``args.script`` with ``args.args``; 2 if it is not a file, 1 if it raised."""
    import runpy

    from .._api import cluster as _cluster
    from .._api.progress import PROGRESS_ENV
    from .._session import context as _context

    if args.no_progress:
        os.environ[PROGRESS_ENV] = "0"  # for the script's gets, here and in what it starts
    if not os.path.isfile(args.script):
        what = "is a directory" if os.path.isdir(args.script) else "no such file"
        _log.error("dista run: %s: %s", args.script, what)
        return 2

    def start() -> object:
        return _cluster.init(workers=args.workers, loop=args.loop)

    _context.auto_init = start
    sys.argv = [args.script, *args.args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))
    try:
        runpy.run_path(args.script, run_name="__main__")
    except KeyboardInterrupt:
        _log.warning("dista run: interrupted; stopping the local cluster")
        return 130
    except SystemExit:
        raise
    except BaseException:  # the script's own error: its traceback, as python would show it
        import traceback

        kind, error, tb = sys.exc_info()
        mine = tb
        while mine is not None and mine.tb_frame.f_code.co_filename != args.script:
            mine = mine.tb_next  # from the script's frame on, not dista's and runpy's
        traceback.print_exception(kind, error, mine or tb)
        return 1
    finally:
        _cluster.shutdown()
    return 0
