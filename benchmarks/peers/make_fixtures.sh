#!/usr/bin/env bash
# Real result files of peer benchmark tools, for loadkit's importers (loadkit/report/peers/).
#
# Installs pinned GuideLLM, AIPerf, vLLM, SGLang and genai-bench into venvs of their own (never
# the project's), starts `loadkit sim` on loopback (an OpenAI-protocol engine, and an
# SGLang-protocol one for SGLang's native /generate client), runs each tool for a short bounded
# run (concurrency 2, 64-token prompts, 32-token answers) and saves its result files under
# tests/report/data/peers/<tool>-<version>/ with the command that made them (command.txt).
#
# usage: benchmarks/peers/make_fixtures.sh [guidellm] [aiperf] [vllm] [sglang] [genai-bench]
#        (default: all five)
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
VLLM_VERSION=0.33.0
SGLANG_VERSION=0.5.23
GENAI_BENCH_VERSION=0.0.5
TOOLS=("$@")
[ ${#TOOLS[@]} -eq 0 ] && TOOLS=(guidellm aiperf vllm sglang genai-bench)

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
"$LOADKIT" sim --port $((PORT + 1)) --engine sglang --profile fast --seed 1 >"$VENVS/sim-sglang.log" 2>&1 &
SIM_SGLANG=$!
trap 'kill $SIM $SIM_SGLANG 2>/dev/null || true' EXIT
for log in sim sim-sglang; do
  for _ in $(seq 50); do grep -q listening "$VENVS/$log.log" && break; sleep 0.2; done
  grep listening "$VENVS/$log.log"
done
URL=http://127.0.0.1:$PORT
SGLANG_URL=http://127.0.0.1:$((PORT + 1))

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
  vllm)
    # vLLM pins a torch of its own; `bench serve` is only an HTTP client, and runs on the CPU
    venv vllm "vllm==$VLLM_VERSION"
    tokenizer "$VENVS/vllm"
    dest=$OUT/vllm-$VLLM_VERSION
    rm -rf "$dest" && mkdir -p "$dest"
    cmd=(vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --base-url "$URL"
      --model sim-fast --tokenizer "$VENVS/tok" --dataset-name random --random-input-len 64
      --random-output-len 32 --num-prompts 20 --max-concurrency 2 --seed 1 --ignore-eos
      --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99
      --save-result --save-detailed --result-dir "$dest" --result-filename vllm-bench-serve.json)
    HF_HUB_OFFLINE=1 "$VENVS/vllm/bin/${cmd[0]}" "${cmd[@]:1}" >"$VENVS/vllm-run.log" 2>&1
    ;;
  sglang)
    venv sglang "sglang==$SGLANG_VERSION"
    tokenizer "$VENVS/sglang"
    dest=$OUT/sglang-$SGLANG_VERSION
    rm -rf "$dest" && mkdir -p "$dest"
    # random-ids: random token ids (plain `random` samples ShareGPT, a download); the native
    # /generate backend against the SGLang-protocol simulator
    cmd=(python -m sglang.bench_serving --backend sglang --base-url "$SGLANG_URL" --model sim-fast
      --tokenizer "$VENVS/tok" --dataset-name random-ids --random-input-len 64 --random-output-len 32
      --random-range-ratio 1 --num-prompts 20 --max-concurrency 2 --seed 1
      --output-file "$dest/sglang-bench-serving.jsonl" --output-details)
    HF_HUB_OFFLINE=1 "$VENVS/sglang/bin/${cmd[0]}" "${cmd[@]:1}" >"$VENVS/sglang-run.log" 2>&1
    ;;
  genai-bench)
    venv genai-bench "genai-bench==$GENAI_BENCH_VERSION"
    tokenizer "$VENVS/genai-bench"
    dest=$OUT/genai-bench-$GENAI_BENCH_VERSION
    rm -rf "$dest" && mkdir -p "$dest"
    art=$VENVS/genai-bench-artifacts && rm -rf "$art"
    cmd=(genai-bench benchmark --api-backend openai --api-base "$URL" --api-key none
      --api-model-name sim-fast --model-tokenizer "$VENVS/tok" --task text-to-text
      --traffic-scenario "D(64,32)" --num-concurrency 2 --max-requests-per-run 20 --max-time-per-run 1
      --server-engine vLLM --experiment-base-dir "$art" --experiment-folder-name run --log-dir "$art/logs")
    HF_HUB_OFFLINE=1 ENABLE_UI=false "$VENVS/genai-bench/bin/${cmd[0]}" "${cmd[@]:1}" \
      >"$VENVS/genai-bench-run.log" 2>&1
    cp "$art"/run/*.json "$dest/"
    ;;
  *)
    echo "unknown tool $tool (guidellm, aiperf, vllm, sglang, genai-bench)" >&2
    exit 2
    ;;
  esac
  printf '%s\n' "${cmd[*]}" | sed "s#$VENVS#\$PEERS_VENV#g; s#$REPO/##g; s#$URL#http://127.0.0.1:PORT#g; s#$SGLANG_URL#http://127.0.0.1:PORT#g" >"$dest/command.txt"
  for f in "$dest"/*; do  # keep fixtures small: compress anything over 1 MB
    [ "$(stat -c %s "$f")" -gt 1048576 ] && gzip -9 "$f"
  done
  ls -la "$dest"
done
