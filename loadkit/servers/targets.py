"""Targets: which servers a run loads, with which adapter, under which name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loadkit.client.httpstream import Endpoint
from loadkit.core.adapter import AdapterOptions, EngineAdapter
from loadkit.core.priority import check_priority_as
from loadkit.errors import UserError
from loadkit.plugins import get_engine

TARGET_KEYS = ("engine", "api", "model", "priority_as", "gpu_hour_cost", "gpus", "gpu_metrics")
NUMERIC_KEYS = {"gpu_hour_cost": float, "gpus": int}  # the cost figures' (docs/cost.md)


class TargetError(ValueError, UserError):
    """A --target or --host value that cannot be used; the message names it."""


@dataclass(slots=True)
class TargetSpec:
    name: str
    url: str
    engine: str = "openai"
    api: str | None = None
    model: str | None = None
    priority_as: str | None = (
        None  # where tenants' priorities go (loadkit/core/priority.py); None: the engine's
    )
    gpu_hour_cost: float | None = None  # None: --gpu-hour-cost (stats/cost.py)
    gpus: int | None = None  # None: --gpus
    gpu_metrics: str | None = None  # a dcgm-exporter URL serving this target's GPUs (docs/gpu.md)


@dataclass(slots=True)
class Target:
    spec: TargetSpec
    adapter: EngineAdapter
    endpoint: Endpoint
    server_info: dict[str, object] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def priority_as(self) -> str:
        return self.spec.priority_as or self.adapter.priority_as


def parse_target(text: str, default_engine: str = "openai") -> TargetSpec:
    """NAME=URL[,engine=E][,api=A][,model=M][,priority_as=field:F|header:H|none]."""
    name, sep, rest = text.partition("=")
    if not sep or not name.strip() or not rest.strip():
        raise TargetError(f"--target {text!r}: expected NAME=URL[,engine=E][,api=A][,model=M]")
    url, *pairs = rest.split(",")
    spec = TargetSpec(name.strip(), url.strip(), default_engine)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or key not in TARGET_KEYS:
            raise TargetError(
                f"--target {text!r}: unknown part {pair!r}; allowed keys: {', '.join(TARGET_KEYS)}"
            )
        setattr(
            spec, key, _numeric(text, key, value.strip()) if key in NUMERIC_KEYS else value.strip() or None
        )
    if spec.priority_as is not None:
        try:
            check_priority_as(spec.priority_as)
        except ValueError as exc:
            raise TargetError(f"--target {text!r}: priority_as: {exc}") from None
    return spec


def _numeric(text: str, key: str, value: str) -> float | int:
    """gpu_hour_cost (>= 0) or gpus (>= 1) of a --target; TargetError naming the part."""
    try:
        number = NUMERIC_KEYS[key](value)
    except ValueError:
        raise TargetError(f"--target {text!r}: {key}={value!r} is not a number") from None
    if number < (1 if key == "gpus" else 0):
        raise TargetError(f"--target {text!r}: {key}={value} is out of range")
    return number


def build_target(
    spec: TargetSpec,
    api_key: str | None,
    default_model: str | None,
    run_options: Mapping[str, Any] | None = None,
) -> Target:
    try:
        endpoint = Endpoint.parse(spec.url)
    except ValueError as exc:
        raise TargetError(f"target {spec.name!r}: {exc}") from None
    info = get_engine(spec.engine)
    options = AdapterOptions(
        model=spec.model or default_model,
        api=spec.api,
        api_key=api_key,
        run_options=run_options if run_options is not None else {},
    )
    try:
        adapter = info.adapter(options)
    except ValueError as exc:
        raise TargetError(f"target {spec.name!r}: {exc}") from None
    return Target(spec, adapter, endpoint)


def check_unique_names(specs: list[TargetSpec]) -> None:
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise TargetError(f"target name {spec.name!r} given twice; names key the stats and must differ")
        seen.add(spec.name)
