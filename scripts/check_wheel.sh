#!/usr/bin/env bash
# The installed package stands alone: build a wheel of this checkout, install it into a fresh venv,
# and from an empty directory replay a real trace (--scenario mooncake_replay, a shipped name whose
# trace is package data) for a few seconds against the embedded simulator; then check that the
# report was written, requests came back ok and every request is accounted for.
# Usage: scripts/check_wheel.sh [WORKDIR]   (default: a new temporary directory; kept on failure)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
created=""
[ -n "${1:-}" ] || created=yes
work=${1:-$(mktemp -d)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
"$PY" -m venv "$work/venv"
venv="$work/venv/bin"
"$venv/pip" wheel -q --disable-pip-version-check --no-deps -w "$work/dist" .
"$venv/pip" install -q --disable-pip-version-check "$work"/dist/loadkit-*.whl
mkdir "$work/empty"
cd "$work/empty"
unset LOADKIT_DATA
# Mooncake prompts reach ~128k tokens: the simulator needs a long context (as the scenario says).
"$venv/loadkit" sim --profile fast --max-model-len 131072 --port 0 >"$work/sim.log" 2>&1 &
sim=$!
trap 'kill "$sim" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 300); do
  url=$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$work/sim.log" | head -n1 | cut -d' ' -f3 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "check_wheel: simulator did not start:" >&2; cat "$work/sim.log" >&2; exit 1; }
"$venv/loadkit" run --host "$url" --engine vllm -u 4 -r 4 -t 6s --stop-timeout 5 \
    --scenario mooncake_replay --report-dir r --raw-log --no-console-table
"$venv/python" - "$work/venv" <<'PYCHECK'
import json, pathlib, sys

venv = pathlib.Path(sys.argv[1]).resolve()
report = json.loads(pathlib.Path("r/report.json").read_text())
scenario = pathlib.Path(report["manifest"]["scenario"]["path"]).resolve()
assert venv in scenario.parents, f"scenario not read from the installed package: {scenario}"
cons = report["conservation"]
assert cons["holds"] and cons["scheduled"] == cons["sent"] + cons["dropped"], cons
outcomes = {}
for section in report["engines"].values():
    for outcome, n in section["outcomes"].items():
        outcomes[outcome] = outcomes.get(outcome, 0) + n
rows = [json.loads(line) for line in pathlib.Path("r/requests.jsonl").read_text().splitlines() if line]
assert len(rows) == cons["sent"] == sum(outcomes.values()), (len(rows), cons, outcomes)
assert outcomes.get("ok", 0) > 0, outcomes
assert set(outcomes) <= {"ok", "cancelled"}, outcomes
# report.html is drawn from the Jinja2 templates shipped in the wheel (loadkit/report/templates).
html = pathlib.Path("r/report.html").read_text()
assert '<section id="summary">' in html and '<svg class="plot"' in html, "report.html lacks its sections"
print(f"check_wheel: ok: {outcomes.get('ok')} requests ok from {scenario.name} (installed), "
      f"conservation holds ({cons['sent']} sent, {cons['dropped']} dropped)")
PYCHECK
kill "$sim" && wait "$sim" 2>/dev/null || true
[ -z "$created" ] || rm -rf "$work"
