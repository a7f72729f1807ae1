#!/usr/bin/env bash
# Quick start, part 1: set up (a venv in .venv) and run the main job — a short headless load test
# against two embedded engine simulators with different profiles, side by side, ending in a report.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e .
exec .venv/bin/loadkit demo "$@"
