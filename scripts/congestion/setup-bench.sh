#!/usr/bin/env bash
# Makes .build/bench-venv: a Python with aiortc (the reference stack of `callend bench congestion`)
# and matplotlib (its plot), from PyPI. Needs python3-venv and ffmpeg (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! python3 -m venv --help >/dev/null 2>&1; then
  apt-get update && apt-get install -y -o DPkg::Lock::Timeout=600 python3-venv
fi
python3 -m venv .build/bench-venv
.build/bench-venv/bin/pip install --quiet --disable-pip-version-check aiortc matplotlib
.build/bench-venv/bin/python -c "import aiortc, matplotlib; print('bench-venv: aiortc', aiortc.__version__, 'matplotlib', matplotlib.__version__)"
