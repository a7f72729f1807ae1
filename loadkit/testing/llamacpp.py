"""Start a real llama.cpp `llama-server` on loopback with a tiny local model, for tests.

    from loadkit.testing.llamacpp import llama_server
    with llama_server(slots=4, ctx=2048) as srv:
        srv.url              # "http://127.0.0.1:PORT"
        srv.model_path       # the tiny GGUF
        srv.tokenizer_json   # tokenizer.json whose ids equal the server's
        srv.prompt_of_length(500)   # text that is exactly 500 prompt tokens (BOS included)

The binary comes from scripts/build_llama_server.sh (llama.cpp source from the
llama-cpp-python sdist on PyPI, cached under $LOADKIT_CACHE) and the model from
scripts/make_tiny_model.py. Both are reused when present; building the binary cold takes
minutes, so CI runs the build script before the tests.

`LlamaServerUnavailable` means "cannot be had on this machine" (no compiler/cmake, no
tokenizers/gguf): tests skip on it unless LOADKIT_REQUIRE_LLAMA=1. Anything else that goes
wrong raises `LlamaServerError`, which is a real failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
BUILD_SCRIPT = "build_llama_server.sh"
MODEL_SCRIPT = "make_tiny_model.py"
# Exit code of the build script when cmake / a compiler / pip is missing.
EXIT_TOOLS_MISSING = 3
BUILD_TIMEOUT_S = 3600.0
MODEL_TIMEOUT_S = 300.0
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
HTTP_TIMEOUT_S = 30.0


class LlamaServerUnavailable(RuntimeError):
    """The server cannot be had on this machine (build tools or Python deps missing)."""


class LlamaServerError(RuntimeError):
    """Building, generating the model, or starting the server failed for another reason."""


def cache_dir() -> Path:
    """`$LOADKIT_CACHE`, default ~/.cache/loadkit: outside the repo so clones share it."""
    env = os.environ.get("LOADKIT_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "loadkit"


def require_llama() -> bool:
    """True when a missing server must fail rather than skip (CI sets LOADKIT_REQUIRE_LLAMA=1)."""
    return os.environ.get("LOADKIT_REQUIRE_LLAMA", "") not in ("", "0", "false", "no")


def scripts_dir() -> Path:
    """The repo's scripts/ folder (the helper drives the same scripts CI and users run)."""
    path = Path(__file__).resolve().parents[2] / "scripts"
    if not (path / BUILD_SCRIPT).is_file():
        raise LlamaServerUnavailable(f"{path / BUILD_SCRIPT} not found: run from a loadkit checkout")
    return path


def binary_path(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """Where the build script puts the binary; `$LOADKIT_LLAMA_SERVER` overrides."""
    env = os.environ.get("LOADKIT_LLAMA_SERVER")
    return Path(env) if env else cache_dir() / f"llama-server-{version}" / "llama-server"


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def ensure_binary(build: bool = True, timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """Return the llama-server binary, building it first if it is missing and `build` is set."""
    path = binary_path()
    if path.is_file() and os.access(path, os.X_OK):
        return path
    if os.environ.get("LOADKIT_LLAMA_SERVER"):
        raise LlamaServerError(f"LOADKIT_LLAMA_SERVER={path} is not an executable file")
    if not build:
        raise LlamaServerUnavailable(f"{path} not built; run scripts/{BUILD_SCRIPT}")
    env = {**os.environ, "LOADKIT_CACHE": str(cache_dir())}
    proc = _run(["bash", str(scripts_dir() / BUILD_SCRIPT)], env, timeout_s)
    if proc.returncode == EXIT_TOOLS_MISSING:
        raise LlamaServerUnavailable(_tail(proc.stderr, 3))
    if proc.returncode != 0 or not path.is_file():
        raise LlamaServerError(
            f"building llama-server failed (exit {proc.returncode}):\n{_tail(proc.stderr)}"
        )
    return path


def _run(cmd: list[str], env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise LlamaServerError(f"{cmd[-1]} did not finish within {timeout_s:.0f} s") from exc


@dataclass(frozen=True)
class TinyModel:
    """A generated GGUF and the tokenizer.json that tokenizes exactly like it."""

    gguf: Path
    tokenizer_json: Path


def ensure_model(
    seed: int = 0, extra_args: Sequence[str] = (), timeout_s: float = MODEL_TIMEOUT_S
) -> TinyModel:
    """Generate (or reuse) the tiny model in `$LOADKIT_CACHE/models`."""
    cmd = [sys.executable, str(scripts_dir() / MODEL_SCRIPT), "--seed", str(seed), *extra_args]
    proc = _run(cmd, {**os.environ, "LOADKIT_CACHE": str(cache_dir())}, timeout_s)
    if proc.returncode != 0:
        missing = "ModuleNotFoundError" in proc.stderr
        exc_type = LlamaServerUnavailable if missing else LlamaServerError
        raise exc_type(f"making the tiny model failed (exit {proc.returncode}):\n{_tail(proc.stderr)}")
    gguf = Path(proc.stdout.strip().splitlines()[-1])
    return TinyModel(gguf, gguf.with_name(gguf.name.removesuffix(".gguf") + ".tokenizer.json"))


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (the caller retries if someone takes it first)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def http_json(url: str, body: Any = None, timeout_s: float = HTTP_TIMEOUT_S) -> Any:
    """GET (body None) or POST JSON; return the decoded JSON reply. Raises urllib errors."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return json.loads(resp.read())


@dataclass
class LlamaServer:
    """A running llama-server. Use `llama_server(...)` rather than building this yourself."""

    host: str
    port: int
    binary: Path
    model: TinyModel
    slots: int
    ctx: int
    process: subprocess.Popen[bytes]
    log_path: Path
    args: list[str] = field(default_factory=list)
    _tokenizer: Any = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def model_path(self) -> Path:
        return self.model.gguf

    @property
    def tokenizer_json(self) -> Path:
        return self.model.tokenizer_json

    def log(self) -> str:
        """The server's combined stdout/stderr so far (for failure messages)."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def get(self, path: str, timeout_s: float = HTTP_TIMEOUT_S) -> Any:
        return http_json(self.url + path, None, timeout_s)

    def post(self, path: str, body: Any, timeout_s: float = HTTP_TIMEOUT_S) -> Any:
        return http_json(self.url + path, body, timeout_s)

    def tokenizer(self) -> Any:
        """A `tokenizers.Tokenizer` with the server's ids; encode() adds BOS like the server."""
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            self._tokenizer = Tokenizer.from_file(str(self.tokenizer_json))
        return self._tokenizer

    def prompt_of_length(self, n_tokens: int, seed: int = 0) -> str:
        """Text the server tokenizes into exactly `n_tokens` prompt tokens (BOS included)."""
        return prompt_of_length(self.tokenizer(), n_tokens, seed)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then SIGKILL after `timeout_s`; returns the exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout_s)
        return self.process.returncode


def single_token_words(tokenizer: Any) -> list[str]:
    """Words " xyz" that are one token on their own, sorted for reproducibility.

    The GPT-2 split makes each " word" its own pre-token, so a run of such words costs
    exactly one token per word, whatever their neighbours.
    """
    words = []
    for tok, tid in tokenizer.get_vocab(with_added_tokens=False).items():
        if tok.startswith("\u0120") and tok[1:].isascii() and tok[1:].isalpha():
            word = " " + tok[1:]
            if tokenizer.encode(word, add_special_tokens=False).ids == [tid]:
                words.append(word)
    return sorted(words)


def prompt_of_length(tokenizer: Any, n_tokens: int, seed: int = 0) -> str:
    """Random words, seeded, that encode to exactly `n_tokens` ids including BOS."""
    if n_tokens < 2:
        raise ValueError("n_tokens must be >= 2 (BOS plus at least one token)")
    words = single_token_words(tokenizer)
    rng = random.Random(seed)
    # The first word loses nothing: a leading " word" is still one pre-token.
    text = "".join(rng.choice(words) for _ in range(n_tokens - 1))
    got = len(tokenizer.encode(text).ids)
    if got != n_tokens:  # the construction guarantees this; fail loudly if a tokenizer breaks it
        raise AssertionError(f"prompt_of_length built {got} tokens, wanted {n_tokens}")
    return text


def server_args(binary: Path, model: Path, port: int, slots: int, ctx: int, threads: int) -> list[str]:
    """Command line. `-c` is the total KV size: llama.cpp splits it evenly across slots."""
    return [
        str(binary), "--host", "127.0.0.1", "--port", str(port), "-m", str(model),
        "-np", str(slots), "-c", str(ctx * slots), "--cont-batching",
        "-t", str(threads), "-tb", str(threads), "--metrics", "--slots",
        "--no-webui", "--no-warmup", "--alias", "tiny",
    ]  # fmt: skip


def wait_healthy(srv: LlamaServer, timeout_s: float) -> None:
    """Poll /health until 200; fail early if the process dies.

    "/health ok" alone could come from another server that already owns the port (ours then
    exits on bind failure ~20 ms later), so our own log must also say it is listening.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if srv.process.poll() is not None:
            raise LlamaServerError(f"llama-server exited with {srv.process.returncode}:\n{_tail(srv.log())}")
        with contextlib.suppress(OSError, ValueError):
            if "listening on" in srv.log() and srv.get("/health", timeout_s=2.0).get("status") == "ok":
                return
        time.sleep(0.05)
    raise LlamaServerError(f"llama-server not healthy after {timeout_s:.0f} s:\n{_tail(srv.log())}")


def _port_taken(srv: LlamaServer) -> bool:
    return srv.process.poll() is not None and "bind" in srv.log().lower()


def start_llama_server(
    slots: int = 4,
    ctx: int = 2048,
    *,
    threads: int = 1,
    seed: int = 0,
    extra_args: Sequence[str] = (),
    build: bool = True,
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
) -> LlamaServer:
    """Start a server (call `.stop()` yourself); prefer the `llama_server` context manager.

    `ctx` is the context per slot. `threads` defaults to 1 so a load generator on the same
    2-core machine keeps a core: the client's clock must not queue behind the server.
    """
    binary, model = ensure_binary(build=build), ensure_model(seed=seed)
    for _attempt in range(3):  # another process may grab the free port before we bind it
        srv = _spawn(binary, model, slots, ctx, threads, extra_args)
        try:
            wait_healthy(srv, startup_timeout_s)
            return srv
        except LlamaServerError:
            taken = _port_taken(srv)
            _stop_and_clean(srv)  # the error message already carries the log's tail
            if not taken:
                raise
    raise LlamaServerError("llama-server could not bind a free loopback port in 3 attempts")


def _spawn(
    binary: Path, model: TinyModel, slots: int, ctx: int, threads: int, extra_args: Sequence[str]
) -> LlamaServer:
    port = free_port()
    args = [*server_args(binary, model.gguf, port, slots, ctx, threads), *extra_args]
    fd, log_name = tempfile.mkstemp(prefix=f"llama-server-{port}-", suffix=".log")
    with os.fdopen(fd, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return LlamaServer("127.0.0.1", port, binary, model, slots, ctx, proc, Path(log_name), args)


@contextlib.contextmanager
def llama_server(
    slots: int = 4,
    ctx: int = 2048,
    *,
    threads: int = 1,
    seed: int = 0,
    extra_args: Sequence[str] = (),
    build: bool = True,
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
) -> Iterator[LlamaServer]:
    """Run llama-server for the duration of the block; always stopped on exit."""
    srv = start_llama_server(
        slots, ctx, threads=threads, seed=seed, extra_args=extra_args, build=build,
        startup_timeout_s=startup_timeout_s,
    )  # fmt: skip
    try:
        yield srv
    finally:
        _stop_and_clean(srv)


def _stop_and_clean(srv: LlamaServer) -> None:
    srv.stop()
    with contextlib.suppress(OSError):
        srv.log_path.unlink()


def skip_or_fail(exc: LlamaServerUnavailable) -> NoReturn:
    """In a test: skip because the server cannot be had, or fail if LOADKIT_REQUIRE_LLAMA is set."""
    import pytest

    if require_llama():
        pytest.fail(f"LOADKIT_REQUIRE_LLAMA is set but llama-server is unavailable: {exc}")
    pytest.skip(f"llama-server unavailable: {exc}")


@contextlib.contextmanager
def pytest_llama_server(slots: int = 4, ctx: int = 2048, **kwargs: Any) -> Iterator[LlamaServer]:
    """`llama_server` for pytest fixtures: unavailable -> skip (or fail under CI's switch)."""
    try:
        srv = start_llama_server(slots, ctx, **kwargs)
    except LlamaServerUnavailable as exc:
        skip_or_fail(exc)
    try:
        yield srv
    finally:
        _stop_and_clean(srv)
