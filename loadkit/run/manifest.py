"""What a run's report must say about the conditions it was taken under.

Collected on the node that writes the report (local or master) at test start: the scenario
and its hash, the targets with what each server says about itself, the client machine and the
versions in play. Secrets are never copied here: targets are listed without the API key.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

from loadkit.servers.targets import Target


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return platform.processor() or None


def client_host() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }


def describe_target(
    target: Target, probe: bool, tls: dict[str, Any] | None = None, detection: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``tls``: what the pre-flight handshake saw; ``detection``: with --engine auto, what
    detection found and what each probe saw."""
    spec = target.spec
    out: dict[str, Any] = {
        "name": spec.name,
        "url": spec.url,
        "engine": target.adapter.name,
        "api": target.adapter.api,
        "model_requested": target.adapter.options.model,
        "server": None,
        "detection": detection,
    }
    if target.endpoint.ssl_context is not None:
        out["tls"] = tls  # version, cipher, ALPN the pre-flight handshake saw (None: check skipped)
    if probe:
        out["server"] = server_info(target)
    return out


def server_info(target: Target) -> dict[str, Any] | None:
    """Engine version and model as the server reports them; None when it says nothing."""
    try:
        from loadkit.servers.info import describe
    except ImportError:
        return None
    try:
        info = describe(
            target.adapter, target.spec.url, timeout_s=2.0, ssl_context=target.endpoint.ssl_context
        )
    except Exception as exc:  # the server's self-description is optional; say why it is missing
        return {"error": f"{type(exc).__name__}: {exc}"}
    return info or None


def _detection(runtime: Any, name: str) -> dict[str, Any] | None:
    detections = getattr(runtime, "detections", None)
    return None if detections is None else detections.manifest_entry(name)


def scenario_fields(scenario: Any) -> dict[str, Any]:
    if scenario is None:
        return {}
    return {
        "scenario": {
            "name": getattr(scenario, "name", None),
            "path": str(getattr(scenario, "path", "")) or None,
            "sha256": getattr(scenario, "sha256", None),
            "seed": getattr(scenario, "seed", None),
            "arrival": getattr(scenario, "arrival", None),
            "slos": getattr(scenario, "slos", None),
            "duration_s": getattr(scenario, "duration_s", None),
            "max_requests": getattr(scenario, "max_requests", None),
            # As written in the file; the realised side is the report's `lengths` section.
            "lengths_asked": getattr(scenario, "lengths_asked", None),
        }
    }


def tier_fields(runtime: Any) -> dict[str, Any]:
    """The run's SLO tiers (name -> limits; empty: none), the attainment a stage needs, and each
    priced target's GPU-hour price and GPUs (docs/cost.md; empty: none priced)."""
    from loadkit.run.tierrun import tier_context

    ctx = tier_context(runtime)
    out: dict[str, Any] = {"slo_tiers": {t.name: t.limits for t in ctx.tiers}}
    if ctx.tiers:
        out["slo_attainment_pct"] = 100 * ctx.attainment_target
    out["costs"] = {name: {"gpu_hour_cost": c.gpu_hour_cost, "gpus": c.gpus, "currency": ctx.currency}
                    for name, c in sorted(ctx.costs.items())}  # fmt: skip
    return out


def class_kind(cls: type) -> str:
    if getattr(cls, "loadkit_sends_scenario", False):
        return "scenario"
    return "llm" if getattr(cls, "loadkit_user", False) else "locust"


def user_class_fields(runtime: Any) -> dict[str, Any]:
    """The run's user classes (kind, weight, fixed_count, target, scenario) and, when it sends
    several, each scenario with the classes sending it."""
    out: dict[str, Any] = {}
    workloads = list(runtime.schedules.workloads.values())
    sends = {cls: w.label for w in workloads for cls in w.classes}
    classes = {}
    for cls in runtime.user_classes() or []:
        entry: dict[str, Any] = {"kind": class_kind(cls), "weight": getattr(cls, "weight", None),
                                 "fixed_count": getattr(cls, "fixed_count", None)}  # fmt: skip
        if entry["kind"] != "locust":
            entry["target"] = getattr(cls, "target", None) or None
        if cls in sends:
            entry["scenario"] = sends[cls]
        classes[cls.__name__] = entry
    if classes:
        out["user_classes"] = classes
    if len(workloads) > 1:
        out["scenarios"] = [{**scenario_fields(w.scenario)["scenario"], "label": w.label,
                             "user_classes": [c.__name__ for c in w.classes]} for w in workloads]  # fmt: skip
    steps = runtime.schedules.shape_steps
    if steps is not None:
        out["shape"] = steps.manifest()
    return out


def run_manifest(runtime: Any, workers: int, probe_servers: bool = True) -> dict[str, Any]:
    """The manifest of the run ``runtime`` configured (its RunConfig, targets and schedules)."""
    from loadkit import __version__

    config = runtime.config
    launch = config.launch

    return {
        **scenario_fields(runtime.scenario),
        **user_class_fields(runtime),
        "targets": [
            describe_target(
                t,
                probe_servers,
                getattr(runtime, "tls_negotiated", {}).get(t.name),
                _detection(runtime, t.name),
            )
            for t in runtime.targets
        ],
        "client": client_host(),
        "workers": workers,
        "users": launch.num_users,
        "spawn_rate": launch.spawn_rate,
        "run_time": config.run_time_s,
        "run_time_from": config.run_time_source,
        "slos_from": config.slo_source,
        # The SLO tiers judged and the prices costed: `loadkit compare` names them when two runs differ.
        **tier_fields(runtime),
        # What fixes the prompt texts (issue 32): `loadkit compare` warns when two runs share it.
        "prompts": {
            "salt": config.salt,
            "salt_from": config.salt_source,
            "repeat_with": f"--seed {config.salt}",
        },
        "timeouts": {
            "first_token_s": runtime.timeouts.first_token_s,
            "total_s": runtime.timeouts.total_s,
            "connect_s": runtime.timeouts.connect_s,
            "tls_handshake_s": runtime.timeouts.handshake_s,
        },
        "tls": runtime.tls.manifest(),
        "open_loop": runtime.schedules.open_loop,
        "loadkit_version": __version__,
        "plugins": runtime.fingerprint(),
        "model_config": launch.model_config,
        # Extra report formats asked for (--report-format); their writers read this at the end.
        "report_formats": list(launch.report_formats),
        "metric_definitions": "docs/metrics.md: t_send = request written, after any TCP connect and TLS handshake; "
        "TTFT=t_first-t_send; TTFT with connect=t_first-t_start; TPOT=(t_last-t_first)/(n_out-1); "
        "ITL per chunk and per token; E2E=t_end-t_send; connect_ms, tls_ms per new connection; "
        "latency percentiles over ok requests",
    }
