#!/usr/bin/env bash
# Real result files of peer benchmark tools, for loadkit's importers (loadkit/report/peers/).
#
# Installs pinned GuideLLM and AIPerf into venvs of their own (never the project's), starts
# `loadkit sim` on loopback, runs each tool for a short bounded run (concurrency 2, 64-token
# prompts, 32-token answers) and saves its result files under
# tests/report/data/peers/<tool>-<version>/ with the command that made them (command.txt).
#
# usage: benchmarks/peers/make_fixtures.sh [guidellm] [aiperf]     (default: both)
# env:   PEERS_VENV (default /tmp/peers-venv), LOADKIT (default .venv/bin/loadkit), SIM_PORT
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
VENVS=${PEERS_VENV:-/tmp/peers-venv}
LOADKIT=${LOADKIT:-$REPO/.venv/bin/loadkit}
PORT=${SIM_PORT:-18431}
OUT=$REPO/tests/report/data/peers
TORCH_VERSION=2.13.0     # GuideLLM imports torch at start: the CPU wheel this machine holds
GUIDELLM_VERSION=0.8.1
AIPERF_VERSION=0.13.0
TOOLS=("$@")
[ ${#TOOLS[@]} -eq 0 ] && TOOLS=(guidellm aiperf)

venv() {  # venv NAME PACKAGE...: a venv of its own per tool (their pins conflict)
  local dir=$VENVS/$1
  shift
  [ -x "$dir/bin/python" ] || python3.11 -m venv "$dir"
  for pkg in "$@"; do
    "$dir/bin/pip" install -q "$pkg"
  done
}

mkdir -p "$VENVS" "$OUT"
"$LOADKIT" sim --port "$PORT" --profile fast --seed 1 >"$VENVS/sim.log" 2>&1 &
SIM=$!
trap 'kill $SIM 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q listening "$VENVS/sim.log" && break; sleep 0.2; done
grep listening "$VENVS/sim.log"
URL=http://127.0.0.1:$PORT

tokenizer() {  # a local word-level tokenizer: neither tool can reach a hub here
  [ -f "$VENVS/tok/tokenizer.json" ] || "$1/bin/python" "$REPO/benchmarks/peers/make_tokenizer.py" "$VENVS/tok"
}

for tool in "${TOOLS[@]}"; do
  case $tool in
  guidellm)
    venv guidellm "torch==$TORCH_VERSION" "guidellm==$GUIDELLM_VERSION"
    tokenizer "$VENVS/guidellm"
    dest=$OUT/guidellm-$GUIDELLM_VERSION
    rm -rf "$dest" && mkdir -p "$dest"
    cmd=(guidellm run --backend "kind=openai_http,target=$URL,model=sim-fast"
      --profile kind=concurrent,streams=2 --constraint kind=max_duration,seconds=4
      --tokenizer "kind=huggingface_auto,model=$VENVS/tok"
      --data kind=synthetic_text,prompt_tokens=64,output_tokens=32
      --output "kind=json,path=$dest/benchmarks.json" --disable-progress)
    HF_HUB_OFFLINE=1 "$VENVS/guidellm/bin/${cmd[0]}" "${cmd[@]:1}" >"$VENVS/guidellm-run.log" 2>&1
    ;;
  aiperf)
    venv aiperf "aiperf==$AIPERF_VERSION"
    tokenizer "$VENVS/aiperf"
    dest=$OUT/aiperf-$AIPERF_VERSION
    rm -rf "$dest" && mkdir -p "$dest"
    art=$VENVS/aiperf-artifacts && rm -rf "$art"
    # HF_HUB_OFFLINE is not set here: AIPerf 0.13.0 in offline mode looks a local path up as a
    # hub cache entry and fails; online, it loads the path (DNS fails fast, nothing is sent).
    cmd=(aiperf profile --model sim-fast --url "$URL" --endpoint-type chat --streaming
      --concurrency 2 --request-count 20 --synthetic-input-tokens-mean 64 --synthetic-input-tokens-stddev 0
      --output-tokens-mean 32 --output-tokens-stddev 0 --tokenizer "$VENVS/tok" --random-seed 1
      --ui-type none --artifact-dir "$art")
    "$VENVS/aiperf/bin/${cmd[0]}" "${cmd[@]:1}" >"$VENVS/aiperf-run.log" 2>&1
    cp "$art/profile_export_aiperf.json" "$art/profile_export_aiperf.csv" "$dest/"
    ;;
  *)
    echo "unknown tool $tool (guidellm, aiperf)" >&2
    exit 2
    ;;
  esac
  printf '%s\n' "${cmd[*]}" | sed "s#$VENVS#\$PEERS_VENV#g; s#$REPO/##g; s#$URL#http://127.0.0.1:PORT#g" >"$dest/command.txt"
  for f in "$dest"/*; do  # keep fixtures small: compress anything over 1 MB
    [ "$(stat -c %s "$f")" -gt 1048576 ] && gzip -9 "$f"
  done
  ls -la "$dest"
done
