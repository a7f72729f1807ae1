"""Scenario files (TOML, schema "loadkit.scenario/1"): parse, validate, expose.

``load_scenario(path)`` returns a :class:`Scenario` or raises :class:`ScenarioError` whose one
line names the file, the key path and what was expected. Every key is documented in
docs/scenarios.md; unknown keys are refused with the closest known key suggested.
"""

from __future__ import annotations

import hashlib
import logging
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadkit.core.priority import check_priority_as
from loadkit.metricnames import SLO_KEYS
from loadkit.workload import parts as parts_mod
from loadkit.workload.errors import (
    Ctx,
    ScenarioError,
    check_keys,
    get_bool,
    get_int,
    get_list,
    get_number,
    get_str,
    get_table,
    require,
)
from loadkit.workload.images import ImageSpec, parse_images, parse_trace_images
from loadkit.workload.servertok import FORMATS as TOKENIZE_FORMATS
from loadkit.workload.session_spec import parse_sessions
from loadkit.workload.shipped import find_scenario
from loadkit.workload.spec import PartSpec, PromptSpec, SessionSpec, TraceSpec
from loadkit.workload.tenants import MixParser, TenantSpec, parse_tenants
from loadkit.workload.tenantsessions import parse_session_mix

if TYPE_CHECKING:
    from loadkit.workload.source import RequestSource

SCHEMA = "loadkit.scenario/1"
TOP_KEYS = (
    "schema",
    "name",
    "description",
    "seed",
    "duration_s",
    "max_requests",
    "targets",
    "slos",
    "slo_tiers",
    "arrival",
    "prompt",
    "parts",
    "trace",
    "sessions",
    "tenants",
    "sim",
    "images",
)
TARGET_KEYS = ("name", "url", "engine", "api", "model", "priority_as", "gpu_hour_cost", "gpus", "gpu_metrics")
ARRIVAL_MODELS = ("closed", "poisson", "gamma", "constant", "trace", "tenants")


@dataclass(slots=True)
class Scenario:
    """A validated scenario. ``raw`` is the TOML as parsed; ``sha256`` is of the file's bytes."""

    path: Path
    name: str
    seed: int
    raw: dict[str, Any]
    sha256: str
    description: str = ""
    targets: list[dict[str, Any]] = field(default_factory=list)
    slos: dict[str, float] = field(default_factory=dict)
    slo_tiers: list[dict[str, Any]] = field(default_factory=list)  # [[slo_tiers]]: {"name", "slos"}
    arrival: dict[str, Any] = field(default_factory=dict)
    duration_s: float | None = None
    max_requests: int | None = None
    prompt: PromptSpec = field(default_factory=PromptSpec)
    parts: list[PartSpec] = field(default_factory=list)
    trace: TraceSpec | None = None
    sessions: SessionSpec | None = None
    tenants: list[TenantSpec] = field(default_factory=list)
    # [sim] profile: the simulator profile the workload fits (`loadkit run` starts it); None: the default.
    sim_profile: str | None = None
    # [images]: images in each chat request (workload/images.py); None: text only.
    images: ImageSpec | None = None

    @property
    def kind(self) -> str:
        """Which workload the file describes: "parts", "trace" or "sessions"."""
        return "sessions" if self.sessions else "trace" if self.trace else "parts"

    @property
    def lengths_asked(self) -> dict[str, Any]:
        """The length part of the file as written (for the report beside ``realised()``)."""
        if self.sessions is not None:
            keys = (
                "turns",
                "user_tokens",
                "output_tokens",
                "think_time_s",
                "system_prompts",
                "tool",
                "context",
            )
            return {"sessions": {k: self.raw["sessions"][k] for k in keys if k in self.raw["sessions"]}}
        if self.trace is not None:
            return {"trace": {k: v for k, v in self.raw["trace"].items()}}
        return {"parts": {p["name"]: {k: v for k, v in p.items() if k != "name"} for p in self.raw["parts"]}}

    def request_source(
        self, worker_index: int = 0, worker_count: int = 1, *, server_url: str | None = None, salt: int = 0
    ) -> RequestSource:
        from loadkit.workload.source import RequestSource

        return RequestSource(self, worker_index, worker_count, server_url=server_url, salt=salt)


def load_scenario(path: str | Path) -> Scenario:
    """Parse and validate a scenario file, or a shipped scenario by name (``uneven_chat``);
    ScenarioError (one line) on anything wrong."""
    path = find_scenario(path)
    ctx = Ctx(str(path))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ctx.error(f"cannot read file: {exc.strerror or exc}") from None
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ctx.error(f"expected valid UTF-8 TOML: {exc}") from None
    return parse_scenario(raw, path, hashlib.sha256(data).hexdigest())


def parse_scenario(raw: dict[str, Any], path: Path, sha256: str = "") -> Scenario:
    """Validate an already-parsed TOML document (the fuzz tests drive this directly)."""
    ctx = Ctx(str(path))
    get_table(ctx, raw)
    check_keys(ctx, raw, TOP_KEYS)
    schema = require(ctx, raw, "schema")
    if schema != SCHEMA:
        raise ctx.at("schema").error(f"expected {SCHEMA!r}, got {schema!r}")
    sc = Scenario(
        path=path,
        name=get_str(ctx.at("name"), require(ctx, raw, "name")),
        seed=get_int(ctx.at("seed"), require(ctx, raw, "seed"), low=0, high=2**63 - 1),
        raw=raw,
        sha256=sha256,
    )
    _parse_header(ctx, raw, sc)
    _parse_workload(ctx, raw, sc)
    if "images" in raw:
        sc.images = _parse_images(ctx, raw, sc)
    if "tenants" in raw:
        sc.tenants = parse_tenants(
            ctx.at("tenants"), raw["tenants"], sc.parts, _parse_slos, _parse_arrival, _mix_parser(raw, sc)
        )
    _check_arrival_fits(ctx, sc)
    return sc


def _mix_parser(raw: dict[str, Any], sc: Scenario) -> MixParser | None:
    """For a [sessions] workload: each tenant's session mix, the scenario's table as its base."""
    if sc.sessions is None:
        return None
    return lambda c, own, name: parse_session_mix(c, own, raw["sessions"], sc.path.parent, name)


def _parse_header(ctx: Ctx, raw: dict[str, Any], sc: Scenario) -> None:
    if "description" in raw:
        sc.description = get_str(ctx.at("description"), raw["description"])
    if "duration_s" in raw:
        sc.duration_s = get_number(ctx.at("duration_s"), raw["duration_s"], low=0.0, strict_low=True)
    if "max_requests" in raw:
        sc.max_requests = get_int(ctx.at("max_requests"), raw["max_requests"], low=1)
    sc.targets = [
        _parse_target(ctx.at("targets").at(i), t)
        for i, t in enumerate(get_list(ctx.at("targets"), raw.get("targets", [])))
    ]
    sc.slos = _parse_slos(ctx.at("slos"), raw.get("slos", {}))
    sc.slo_tiers = _parse_slo_tiers(ctx.at("slo_tiers"), raw.get("slo_tiers", []))
    sc.arrival = _parse_arrival(ctx.at("arrival"), raw.get("arrival", {"model": "closed", "users": 1}))
    sc.prompt = _parse_prompt(ctx.at("prompt"), raw.get("prompt", {}), sc.path.parent)
    if "sim" in raw:
        sc.sim_profile = _parse_sim(ctx.at("sim"), raw["sim"])


def _parse_sim(ctx: Ctx, raw: Any) -> str:
    """``[sim] profile = "long"``: the simulator profile whose context and KV pool the workload fits."""
    from loadkit.simprofiles import PROFILE_NAMES

    table = get_table(ctx, raw)
    check_keys(ctx, table, ("profile",))
    return get_str(ctx.at("profile"), require(ctx, table, "profile"), PROFILE_NAMES)


def _parse_target(ctx: Ctx, raw: Any) -> dict[str, Any]:
    table = get_table(ctx, raw)
    check_keys(ctx, table, TARGET_KEYS)
    out: dict[str, Any] = {
        "name": get_str(ctx.at("name"), require(ctx, table, "name")),
        "url": get_str(ctx.at("url"), require(ctx, table, "url")),
    }
    if not out["url"].startswith(("http://", "https://")):
        raise ctx.at("url").error(f"expected an http:// or https:// URL, got {out['url']!r}")
    out["engine"] = get_str(ctx.at("engine"), table.get("engine", "auto"))
    out["api"] = get_str(ctx.at("api"), table.get("api", "chat"), ("chat", "completions", "native"))
    out["model"] = get_str(ctx.at("model"), table["model"]) if "model" in table else None
    if "gpu_metrics" in table:
        out["gpu_metrics"] = get_str(ctx.at("gpu_metrics"), table["gpu_metrics"])
    if "priority_as" in table:
        try:
            out["priority_as"] = check_priority_as(get_str(ctx.at("priority_as"), table["priority_as"]))
        except ValueError as exc:
            raise ctx.at("priority_as").error(str(exc)) from None
    if "gpu_hour_cost" in table:
        out["gpu_hour_cost"] = get_number(ctx.at("gpu_hour_cost"), table["gpu_hour_cost"], low=0.0)
    if "gpus" in table:
        out["gpus"] = get_int(ctx.at("gpus"), table["gpus"], low=1)
    return out


def _parse_slo_tiers(ctx: Ctx, raw: Any) -> list[dict[str, Any]]:
    """[[slo_tiers]]: each a name and SLO keys (docs/cost.md); names differ."""
    tiers: list[dict[str, Any]] = []
    for i, item in enumerate(get_list(ctx, raw)):
        at = ctx.at(i)
        table = get_table(at, item)
        check_keys(at, table, ("name", *SLO_KEYS))
        name = get_str(at.at("name"), require(at, table, "name"))
        if not name or name == "run_slos" or any(t["name"] == name for t in tiers):
            raise at.at("name").error(f"tier name {name!r} is empty, reserved or given twice")
        slos = _parse_slos(at, {k: v for k, v in table.items() if k != "name"})
        if not slos:
            raise at.error(f"tier {name!r} names no SLO key ({', '.join(SLO_KEYS)})")
        tiers.append({"name": name, "slos": slos})
    return tiers


def _parse_slos(ctx: Ctx, raw: Any) -> dict[str, float]:
    table = get_table(ctx, raw)
    check_keys(ctx, table, SLO_KEYS)
    return {k: get_number(ctx.at(k), v, low=0.0, strict_low=True) for k, v in table.items()}


def _parse_arrival(ctx: Ctx, raw: Any) -> dict[str, Any]:
    table = get_table(ctx, raw)
    model = get_str(ctx.at("model"), require(ctx, table, "model"), ARRIVAL_MODELS)
    keys = {
        "closed": ("users", "spawn_rate"),
        "poisson": ("rate",),
        "constant": ("rate",),
        "gamma": ("rate", "cv"),
        "trace": (),
        "tenants": (),
    }[model]
    check_keys(ctx, table, ("model", "stages") + keys)
    out: dict[str, Any] = {"model": model}
    if model == "closed":
        out["users"] = get_int(ctx.at("users"), table.get("users", 1), low=1)
        if "spawn_rate" in table:
            out["spawn_rate"] = get_number(
                ctx.at("spawn_rate"), table["spawn_rate"], low=0.0, strict_low=True
            )
    for key in ("rate", "cv"):
        if key in keys and (key in table or "stages" not in table):
            out[key] = get_number(ctx.at(key), require(ctx, table, key), low=0.0, strict_low=True)
    if "stages" in table:
        if model == "trace":
            raise ctx.at("stages").error("stages do not apply to trace arrivals (use trace.speed)")
        if model == "tenants":
            raise ctx.at("stages").error(
                "stages do not apply to tenants' own arrivals (each has one steady rate)"
            )
        out["stages"] = _parse_stages(ctx.at("stages"), table["stages"], model, out)
    return out


def _parse_stages(ctx: Ctx, raw: Any, model: str, arrival: dict[str, Any]) -> list[dict[str, float]]:
    """Each stage: duration_s plus users (closed) or rate (open; cv for gamma, else inherited)."""
    items = get_list(ctx, raw)
    if not items:
        raise ctx.error("expected at least one stage")
    level = "users" if model == "closed" else "rate"
    stages = []
    for i, item in enumerate(items):
        s_ctx = ctx.at(i)
        table = get_table(s_ctx, item)
        check_keys(s_ctx, table, ("duration_s", level) + (("cv",) if model == "gamma" else ()))
        stage = {
            "duration_s": get_number(
                s_ctx.at("duration_s"), require(s_ctx, table, "duration_s"), low=0.0, strict_low=True
            )
        }
        if level == "users":
            stage["users"] = get_int(s_ctx.at("users"), require(s_ctx, table, "users"), low=0)
        else:
            stage["rate"] = get_number(s_ctx.at("rate"), require(s_ctx, table, "rate"), low=0.0)
        if model == "gamma":
            cv = table.get("cv", arrival.get("cv", 1.0))
            stage["cv"] = get_number(s_ctx.at("cv"), cv, low=0.0, strict_low=True)
        stages.append(stage)
    return stages


# prompt.api was renamed prompt.shape ("api" is the endpoint family, on targets); old values.
OLD_PROMPT_API = {"chat": "messages", "completions": "prompt"}
_WARNED: set[str] = set()
log = logging.getLogger("loadkit")


def _prompt_shape(ctx: Ctx, table: dict[str, Any]) -> str:
    if "api" not in table:
        return get_str(ctx.at("shape"), table.get("shape", "messages"), ("messages", "prompt"))
    if "shape" in table:
        raise ctx.at("api").error("give prompt.shape only (prompt.api is its deprecated old name)")
    old = get_str(ctx.at("api"), table["api"], tuple(OLD_PROMPT_API))
    if ctx.file not in _WARNED:  # once per file: a run loads its scenario on every (re)configure
        _WARNED.add(ctx.file)
        log.warning(
            '%s: prompt.api is deprecated ("api" names an endpoint family): write prompt.shape = "%s" '
            'instead of api = "%s"',
            ctx.file,
            OLD_PROMPT_API[old],
            old,
        )
    return OLD_PROMPT_API[old]


def _parse_prompt(ctx: Ctx, raw: Any, base: Path) -> PromptSpec:
    table = get_table(ctx, raw)
    check_keys(
        ctx,
        table,
        ("tokenizer", "tokenizer_path", "tokenize_url", "tokenize_format", "shape", "api", "exact_output"),
    )
    spec = PromptSpec()
    spec.tokenizer = get_str(
        ctx.at("tokenizer"), table.get("tokenizer", "approx"), ("approx", "hf", "server")
    )
    spec.shape = _prompt_shape(ctx, table)
    if "exact_output" in table:
        spec.exact_output = get_bool(ctx.at("exact_output"), table["exact_output"])
    if spec.tokenizer == "hf":
        p = get_str(ctx.at("tokenizer_path"), require(ctx, table, "tokenizer_path"))
        spec.tokenizer_path = str(parts_mod.resolver(base)(ctx.at("tokenizer_path"), p))
    if "tokenize_url" in table:
        spec.tokenize_url = get_str(ctx.at("tokenize_url"), table["tokenize_url"])
    spec.tokenize_format = get_str(
        ctx.at("tokenize_format"), table.get("tokenize_format", "llamacpp"), TOKENIZE_FORMATS
    )
    return spec


def _parse_workload(ctx: Ctx, raw: dict[str, Any], sc: Scenario) -> None:
    present = [k for k in ("parts", "trace", "sessions") if k in raw]
    if len(present) != 1:
        got = ", ".join(present) if present else "none"
        raise ctx.error(f"expected exactly one of [[parts]], [trace], [sessions]; got {got}")
    base = sc.path.parent
    if "parts" in raw:
        sc.parts = parts_mod.parse_parts(ctx.at("parts"), raw["parts"], base)
    elif "trace" in raw:
        sc.trace = parts_mod.parse_trace(ctx.at("trace"), raw["trace"], base)
    else:
        sc.sessions = parse_sessions(ctx.at("sessions"), raw["sessions"], base)


def _parse_images(ctx: Ctx, raw: dict[str, Any], sc: Scenario) -> ImageSpec:
    """Images go with [[parts]] requests sent as chat messages (content parts), or say how a
    ServeGen multimodal trace's images are sent (images.py parse_trace_images)."""
    if sc.kind == "trace" and sc.trace is not None and sc.trace.format == "servegen":
        return parse_trace_images(ctx.at("images"), raw["images"])
    if sc.kind != "parts":
        raise ctx.at("images").error(f"expected [images] with [[parts]] (not yet with [{sc.kind}])")
    if sc.prompt.shape != "messages":
        raise ctx.at("images").error(
            'expected prompt.shape = "messages" (images travel as chat content parts)'
        )
    base = sc.path.parent
    return parse_images(ctx.at("images"), raw["images"], parts_mod.resolver(base), base)


def _check_arrival_fits(ctx: Ctx, sc: Scenario) -> None:
    if sc.arrival["model"] == "trace":
        if sc.trace is None or sc.trace.format == "lengths" and sc.trace.columns[0] is None:
            raise ctx.at("arrival.model").error(
                "expected a [trace] with timestamps (azure, mooncake, or lengths with timestamp_column) "
                "for arrival model 'trace'"
            )
    _check_tenant_arrivals(ctx, sc)
    if sc.trace is not None and sc.trace.warm_cache and sc.arrival["model"] != "trace":
        raise ctx.at("trace.warm_cache").error(
            "expected arrival model 'trace' (warm-up runs before the window's own arrivals)"
        )
    if sc.trace is not None and sc.trace.loop and sc.duration_s is None and sc.max_requests is None:
        raise ctx.at("trace.loop").error("expected duration_s or max_requests to bound a looping trace")


def _check_tenant_arrivals(ctx: Ctx, sc: Scenario) -> None:
    """Tenants' own arrivals and ``[arrival] model = "tenants"`` come together, with a bound
    (the superposed schedule is drawn up front, as a timed trace's is)."""
    own = bool(sc.tenants) and sc.tenants[0].arrival is not None
    if sc.arrival["model"] == "tenants" and not own:
        raise ctx.at("arrival.model").error(
            "expected [[tenants]] that each give an arrival table for arrival model 'tenants'"
        )
    if own and sc.arrival["model"] != "tenants":
        raise ctx.at("arrival.model").error(
            f"expected 'tenants' (the tenants give their own arrivals), got {sc.arrival['model']!r}"
        )
    if own and sc.duration_s is None and sc.max_requests is None:
        raise ctx.at("arrival.model").error(
            "expected duration_s or max_requests to bound the tenants' arrivals"
        )


__all__ = ["SCHEMA", "Scenario", "ScenarioError", "load_scenario", "parse_scenario"]
