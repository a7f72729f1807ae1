"""A run whose scenario has [images] refuses, at start, a target whose engine sends no images
on its api, naming target, engine and feature (loadkit/run/workloads.py check_image_targets)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loadkit.engines.base import AdapterOptions
from loadkit.plugins import get_engine
from loadkit.run.errors import ConfigError
from loadkit.run.workloads import check_image_targets


def target(engine: str, api: str | None = None) -> SimpleNamespace:
    adapter = get_engine(engine).adapter(AdapterOptions(api=api))
    return SimpleNamespace(name=f"t-{engine}", adapter=adapter)


def workload(images: object) -> SimpleNamespace:
    return SimpleNamespace(label="vision.toml", scenario=SimpleNamespace(images=images))


@pytest.mark.parametrize("engine", ["openai", "vllm", "sglang", "llamacpp"])
def test_engines_that_take_images_on_chat_pass(engine):
    check_image_targets([workload(object())], [target(engine, "chat")])


@pytest.mark.parametrize(
    ("engine", "api"),
    [
        ("vllm", "completions"),
        ("tgi", "chat"),
        ("tensorrt-llm", "chat"),
        ("ollama", "native"),
        ("llamacpp", "native"),
    ],
)
def test_engines_without_images_are_refused_by_name(engine, api):
    with pytest.raises(
        ConfigError, match=rf"target 't-{engine}': engine '{engine}' \(api '{api}'\) takes no images"
    ):
        check_image_targets([workload(object())], [target(engine, api)])


def test_a_scenario_without_images_takes_any_engine():
    check_image_targets([workload(None)], [target("tgi", "chat")])
