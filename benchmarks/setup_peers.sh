#!/usr/bin/env bash
# Create .venv-peers (a virtual environment apart from the project's own) with Dista installed
# editable (with uvloop, as a user after speed would, and the anyio, trio and gevent bindings'
# libraries, for --systems dista-anyio,dista-trio,dista-gevent) plus the peers the
# side-by-side benchmark compares it with: Ray, Dask distributed, and numpy, psutil and
# matplotlib for the workloads, memory readings and the chart.
#
#   bash benchmarks/setup_peers.sh            # then: .venv-peers/bin/python -m benchmarks
#   VENV=/some/where bash benchmarks/setup_peers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv-peers}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -e ".[uvloop,anyio,trio,gevent]" -r benchmarks/requirements-peers.txt
# pip compiles the peers' bytecode as it installs them; an editable install leaves ours to
# each process start, every time where PYTHONDONTWRITEBYTECODE is set. Compile it too.
"$venv/bin/python" -m compileall -q dista_proto dista_runtime bindings benchmarks
"$venv/bin/python" - <<'PY'
from importlib.metadata import version

import dask
import distributed
import ray

print(f"ray {ray.__version__}, dask {dask.__version__}, distributed {distributed.__version__}")
for name in ("numpy", "psutil", "matplotlib"):
    print(name, version(name))
PY
echo "peers ready: $venv/bin/python -m benchmarks --quick"
