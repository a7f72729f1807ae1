#!/usr/bin/env bash
# CI for the third-party route: install this distribution next to loadkit, check that
# `loadkit plugins` lists it (and that LOADKIT_LOAD_PLUGINS=none hides it), then run its tests,
# which include a real run through loadkit's stream timer against a local Messages server.
# Usage (from the repository root): bash plugins/loadkit-anthropic/ci.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python -m pip install -e "$here"
loadkit plugins | python -c 'import json,sys; e={x["engine"]:x for x in json.load(sys.stdin)["engines"]}; assert e["anthropic"]["plugin"]=="loadkit-anthropic", e; print("loadkit plugins lists anthropic from", e["anthropic"]["plugin"], e["anthropic"]["version"])'
LOADKIT_LOAD_PLUGINS=none loadkit plugins | python -c 'import json,sys; n=[x["engine"] for x in json.load(sys.stdin)["engines"]]; assert "anthropic" not in n, n; print("LOADKIT_LOAD_PLUGINS=none hides it")'
cd "$here" && python -m pytest tests -q
