#!/usr/bin/env bash
# Run the pytest suite with the system Python (ctest's python_test).
# Usage: run.sh [SANITIZERS]; exit 77 (ctest: skipped) when it cannot run.
set -euo pipefail
PY=/usr/bin/python3
if [ -n "${1:-}" ]; then
    echo "SKIPPED: a $1 sanitizer build's libsyncrep cannot load into an uninstrumented $PY"
    exit 77
fi
if ! "$PY" -c 'import numpy, pytest' 2>/dev/null; then
    echo "SKIPPED: $PY lacks numpy or pytest (./run test installs python3-numpy python3-pytest)"
    exit 77
fi
cd "$(dirname "$0")"
exec "$PY" -m pytest -q -p no:cacheprovider -rs .
