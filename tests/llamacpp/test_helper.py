"""loadkit.testing.llamacpp without a running server: paths, env switches, errors, args."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from loadkit.testing import llamacpp


def test_cache_dir_follows_env(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("LOADKIT_CACHE", str(tmp_path))
    assert llamacpp.cache_dir() == tmp_path
    assert llamacpp.binary_path() == tmp_path / "llama-server-0.3.36" / "llama-server"
    monkeypatch.delenv("LOADKIT_CACHE")
    assert llamacpp.cache_dir() == Path.home() / ".cache" / "loadkit"


@pytest.mark.parametrize(
    ("value", "expected"), [("", False), ("0", False), ("no", False), ("1", True), ("yes", True)]
)
def test_require_llama_switch(monkeypatch, value, expected):
    monkeypatch.setenv("LOADKIT_REQUIRE_LLAMA", value)
    assert llamacpp.require_llama() is expected


def test_missing_binary_without_build_is_unavailable(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("LOADKIT_CACHE", str(tmp_path))
    monkeypatch.delenv("LOADKIT_LLAMA_SERVER", raising=False)
    with pytest.raises(llamacpp.LlamaServerUnavailable, match="not built"):
        llamacpp.ensure_binary(build=False)


def test_bad_explicit_binary_is_an_error_not_a_skip(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("LOADKIT_LLAMA_SERVER", str(tmp_path / "nope"))
    with pytest.raises(llamacpp.LlamaServerError):
        llamacpp.ensure_binary()


def test_explicit_binary_is_used(monkeypatch, tmp_path: Path):
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("LOADKIT_LLAMA_SERVER", str(fake))
    assert llamacpp.ensure_binary() == fake


def test_free_port_is_bindable_on_loopback():
    port = llamacpp.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_server_args_split_context_per_slot():
    args = llamacpp.server_args(Path("/b"), Path("/m.gguf"), 1234, slots=4, ctx=2048, threads=1)
    joined = " ".join(args)
    assert "--host 127.0.0.1 --port 1234" in joined
    assert "-np 4 -c 8192 --cont-batching" in joined
    assert "-m /m.gguf" in joined and "--metrics" in args


def test_server_that_dies_at_startup_reports_its_log(monkeypatch, tmp_path: Path):
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'error: model is broken' >&2\nexit 7\n")
    fake.chmod(0o755)
    monkeypatch.setenv("LOADKIT_LLAMA_SERVER", str(fake))
    model = llamacpp.TinyModel(tmp_path / "m.gguf", tmp_path / "t.json")
    monkeypatch.setattr(llamacpp, "ensure_model", lambda seed=0: model)
    with pytest.raises(llamacpp.LlamaServerError, match=r"exited with 7[\s\S]*model is broken"):
        llamacpp.start_llama_server(startup_timeout_s=10)


def _unavailable(*_args, **_kwargs):
    raise llamacpp.LlamaServerUnavailable("no cmake")


def test_fixture_skips_when_unavailable(monkeypatch):
    monkeypatch.delenv("LOADKIT_REQUIRE_LLAMA", raising=False)
    monkeypatch.setattr(llamacpp, "start_llama_server", _unavailable)
    with pytest.raises(pytest.skip.Exception, match="no cmake"):
        with llamacpp.pytest_llama_server():
            pass


def test_fixture_fails_when_ci_requires_the_server(monkeypatch):
    monkeypatch.setenv("LOADKIT_REQUIRE_LLAMA", "1")
    monkeypatch.setattr(llamacpp, "start_llama_server", _unavailable)
    with pytest.raises(pytest.fail.Exception, match="LOADKIT_REQUIRE_LLAMA"):
        with llamacpp.pytest_llama_server():
            pass


def test_other_errors_are_never_skipped(monkeypatch):
    def broken(*_args, **_kwargs):
        raise llamacpp.LlamaServerError("crashed")

    monkeypatch.delenv("LOADKIT_REQUIRE_LLAMA", raising=False)
    monkeypatch.setattr(llamacpp, "start_llama_server", broken)
    with pytest.raises(llamacpp.LlamaServerError):
        with llamacpp.pytest_llama_server():
            pass


def test_port_taken_by_another_server_is_retried(monkeypatch, tmp_path: Path):
    """The first two ports are 'taken' (the fake server fails to bind and exits); the third works."""
    fake = tmp_path / "llama-server"
    attempts = tmp_path / "attempts"
    fake.write_text(
        "#!/bin/sh\n"
        f"echo x >> {attempts}\n"
        f'if [ $(wc -l < {attempts}) -lt 3 ]; then echo "couldn\'t bind HTTP server socket"; exit 1; fi\n'
        "echo 'listening on'; exec sleep 30\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("LOADKIT_LLAMA_SERVER", str(fake))
    model = llamacpp.TinyModel(tmp_path / "m.gguf", tmp_path / "t.json")
    monkeypatch.setattr(llamacpp, "ensure_model", lambda seed=0: model)
    # No HTTP server answers, so the third attempt times out: what matters is that it was made.
    with pytest.raises(llamacpp.LlamaServerError, match="not healthy"):
        llamacpp.start_llama_server(startup_timeout_s=0.5)
    assert attempts.read_text().count("x") == 3
