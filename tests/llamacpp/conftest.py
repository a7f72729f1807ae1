"""Fixtures for the llama.cpp test engine: one real llama-server per test module.

Skips only when the server cannot be had on this machine (LlamaServerUnavailable: no
cmake/compiler, or tokenizers/gguf missing); with LOADKIT_REQUIRE_LLAMA=1 (CI) that skip is a
failure instead. Every other problem is an error either way.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from loadkit.testing import llamacpp
from loadkit.testing.llamacpp import LlamaServer, LlamaServerUnavailable

SLOTS = 4
CTX = 2048


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    with llamacpp.pytest_llama_server(slots=SLOTS, ctx=CTX) as srv:
        yield srv


@pytest.fixture(scope="session")
def model_script() -> ModuleType:
    """scripts/make_tiny_model.py imported as a module (scripts/ is not a package)."""
    path = Path(llamacpp.scripts_dir()) / llamacpp.MODEL_SCRIPT
    spec = importlib.util.spec_from_file_location("make_tiny_model", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def tiny_model() -> llamacpp.TinyModel:
    try:
        return llamacpp.ensure_model()
    except LlamaServerUnavailable as exc:
        llamacpp.skip_or_fail(exc)
