#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from the source vendored in the llama-cpp-python sdist.
#
# Why the sdist: PyPI is the only source registry every loadkit machine (and CI) can reach,
# and llama-cpp-python's sdist carries llama.cpp's full tree under vendor/llama.cpp.
#
# Idempotent: if $CACHE/llama-server-$VERSION/llama-server exists, print its path and exit 0.
# Output: the last line on stdout is the absolute path of the binary.
# Exit codes: 0 built or reused; 3 build tools missing (tests may skip); other = real failure.
#
# Env: LOADKIT_CACHE (default ~/.cache/loadkit), LOADKIT_LLAMA_VERSION (default 0.3.36),
#      LOADKIT_BUILD_JOBS (default 2), LOADKIT_KEEP_BUILD=1 keeps the source tree and objects.
set -euo pipefail

VERSION="${LOADKIT_LLAMA_VERSION:-0.3.36}"
CACHE="${LOADKIT_CACHE:-$HOME/.cache/loadkit}"
JOBS="${LOADKIT_BUILD_JOBS:-2}"
OUT_DIR="$CACHE/llama-server-$VERSION"
BIN="$OUT_DIR/llama-server"
SRC_ROOT="$CACHE/src"
SDIST="$SRC_ROOT/llama_cpp_python-$VERSION.tar.gz"
SRC="$SRC_ROOT/llama_cpp_python-$VERSION/vendor/llama.cpp"
BUILD="$CACHE/build/llama-server-$VERSION"

log() { echo "[build_llama_server] $*" >&2; }

if [[ -x "$BIN" ]]; then
    log "reusing $BIN"
    echo "$BIN"
    exit 0
fi

missing=()
for tool in cmake c++ cc; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
python3 -m pip --version >/dev/null 2>&1 || missing+=("python3 -m pip")
if ((${#missing[@]})); then
    log "missing build tools: ${missing[*]} (Debian: apt-get install -y cmake build-essential)"
    exit 3
fi

mkdir -p "$SRC_ROOT" "$OUT_DIR" "$(dirname "$BUILD")"

# One build at a time per cache: parallel test sessions would otherwise race on $BUILD.
exec 9>"$OUT_DIR/.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
fi
if [[ -x "$BIN" ]]; then  # another process finished the build while we waited
    log "reusing $BIN"
    echo "$BIN"
    exit 0
fi

started=$(date +%s)

if [[ ! -f "$SDIST" ]]; then
    log "downloading llama-cpp-python==$VERSION sdist"
    tmpdl=$(mktemp -d "$SRC_ROOT/dl.XXXXXX")
    python3 -m pip download --quiet --no-deps --no-binary :all: \
        "llama-cpp-python==$VERSION" -d "$tmpdl" >&2
    mv "$tmpdl"/llama_cpp_python-"$VERSION".tar.gz "$SDIST"
    rm -rf "$tmpdl"
fi

if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
    log "extracting $SDIST"
    # Into a scratch dir first: an interrupted extraction must not pass for a complete tree.
    tmpx=$(mktemp -d "$SRC_ROOT/x.XXXXXX")
    tar -xzf "$SDIST" -C "$tmpx"
    rm -rf "$SRC_ROOT/llama_cpp_python-$VERSION"
    mv "$tmpx/llama_cpp_python-$VERSION" "$SRC_ROOT/"
    rm -rf "$tmpx"
fi

generator=()
if command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
fi

# CPU only, static, portable (no -march=native: the cache may be copied between hosts of one
# kind), no network at build time (no prebuilt web UI download, no curl/openssl), only the
# server target. LLAMA_CURL is deprecated/ignored in this version but harmless for older ones.
log "configuring in $BUILD"
cmake -S "$SRC" -B "$BUILD" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF \
    -DGGML_OPENMP=OFF \
    -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_TOOLS=ON >&2

log "building llama-server with -j$JOBS"
cmake --build "$BUILD" --config Release --target llama-server -j "$JOBS" >&2

# Copy then rename so a reader never sees a half-written binary.
cp "$BUILD/bin/llama-server" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
elapsed=$(( $(date +%s) - started ))
printf 'version=%s\nbuild_seconds=%s\njobs=%s\nbuilt_at=%s\n' \
    "$VERSION" "$elapsed" "$JOBS" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$OUT_DIR/BUILD_INFO"
log "built $BIN in ${elapsed}s"
# The tree (~290 MB) and objects (~85 MB) are not needed to run; the sdist stays for rebuilds.
if [[ "${LOADKIT_KEEP_BUILD:-0}" != 1 ]]; then
    rm -rf "$BUILD" "$SRC_ROOT/llama_cpp_python-$VERSION"
fi
echo "$BIN"
