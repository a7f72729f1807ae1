"""The conditions a run was taken under (manifest), its warnings, and the metric definitions."""

from __future__ import annotations

import time
from typing import Any

from loadkit.report.htmlutil import NOT_MEASURED, macro, section, table
from loadkit.report.redact import redact
from loadkit.report.tables import engines_of, flatten

# (what the reader needs, manifest keys that may hold it, first found wins)
CONDITIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("scenario file", ("scenario.path", "scenario_file", "scenario.name")),
    ("scenario hash (sha256)", ("scenario.sha256", "scenario_sha256", "scenario_hash")),
    ("seed", ("scenario.seed", "seed")),
    # Per run (issue 32): shown so a reader can repeat the prompts (--seed), never compared.
    ("prompt salt (--seed to repeat the prompts)", ("prompts.salt",)),
    ("lengths asked", ("scenario.lengths_asked", "lengths_asked", "lengths.asked", "scenario.lengths")),
    (
        "lengths realised",
        ("scenario.lengths_realised", "lengths_realised", "lengths.realised", "realised_lengths"),
    ),
    ("arrival model", ("scenario.arrival.model", "arrival.model", "arrival")),
    ("open loop", ("open_loop",)),
    ("concurrency (users, spawn rate)", ("users", "concurrency")),
    ("stages", ("scenario.arrival.stages", "stages", "arrival.stages")),
    ("duration asked", ("scenario.duration_s", "run_time", "duration_s")),
    ("duration", ("_derived",)),
    ("loadkit version", ("loadkit_version",)),
    ("Locust version", ("locust_version",)),
    ("Python version", ("client.python", "python_version")),
    ("client host", ("client.hostname", "host")),
    ("client CPU model", ("client.cpu_model", "cpu_model")),
    ("client CPU cores", ("client.cores", "cpu_count", "cpu_cores")),
    ("client platform", ("client.platform",)),
    ("worker processes", ("workers",)),
    ("engines as the server reported them", ("targets", "engines", "server_info")),
    ("SLOs", ("slos",)),
    ("metric definitions", ("metric_definitions",)),
)
SKIP_IN_FULL = ("server_metrics", "gpu_samples")  # rendered as plots in its own section


def lookup(manifest: dict[str, Any], dotted: str) -> Any:
    node: Any = manifest
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _derived(report: dict[str, Any], label: str) -> str | None:
    m = report.get("manifest") or {}
    if label == "concurrency (users, spawn rate)" and m.get("users") is not None:
        return f"{m['users']} users, spawn rate {m.get('spawn_rate', '?')}/s"
    arrival = lookup(m, "scenario.arrival")
    if label == "stages" and isinstance(arrival, dict) and not arrival.get("stages"):
        rate = arrival.get("rate")
        return "one stage for the whole run" + (f" at {rate}/s" if rate is not None else "")
    if label == "lengths realised" and lookup(m, "scenario.lengths_realised") is None:
        return _realised(report)
    if label == "duration" and m.get("started_unix") and m.get("stopped_unix"):
        return f"{m['stopped_unix'] - m['started_unix']:.1f} s (started {_utc(m['started_unix'])})"
    return None


def _realised(report: dict[str, Any]) -> str | None:
    """Realised lengths from the report's n_in / n_out summaries (ok requests)."""
    parts = []
    for engine, sec in engines_of(report).items():
        for name in ("n_in", "n_out"):
            summ = sec.get(name)
            if isinstance(summ, dict) and summ.get("count"):
                stats = " ".join(
                    f"{k} {summ[k]:.0f}"
                    for k in ("mean", "p50", "p90", "p99", "max")
                    if summ.get(k) is not None
                )
                parts.append(f"{engine} {name}: {stats}")
    return "; ".join(parts) + " (tokens, from the report)" if parts else None


def _utc(unix: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix))


def condition_rows(report: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(label, text or None when the manifest does not record it)."""
    manifest = redact(report.get("manifest") or {})
    rows: list[tuple[str, str | None]] = []
    for label, keys in CONDITIONS:
        value = next((v for k in keys if (v := lookup(manifest, k)) is not None), None)
        text = _derived(report, label)
        if text is None and value is not None:
            text = targets_text(value) if label.startswith("engines") else _text(value)
        rows.append((label, text))
    workers = report.get("workers") or {}
    count = workers.get("count")
    rows.append(("distributed workers", None if count is None else f"{count} (lost {workers.get('lost', 0)})" if count
                 else "local run (one process)"))  # fmt: skip
    return rows


def _text(value: Any) -> str:
    return "; ".join(f"{k}: {v}" if k else v for k, v in flatten(value))


def targets_text(targets: Any) -> str:
    """One line per target: name, adapter, what the server said about itself, URL."""
    if not isinstance(targets, list):
        return _text(targets)
    lines = []
    for t in targets:
        if not isinstance(t, dict):
            lines.append(str(t))
            continue
        server = t["server"] if isinstance(t.get("server"), dict) else {}
        said = ", ".join(f"{k} {v}" for k, v in server.items()) or "the server reported nothing"
        detection = t["detection"] if isinstance(t.get("detection"), dict) else None
        detected = f"; --engine auto {detection.get('explanation')}" if detection else ""
        lines.append(f"{t.get('name')}: adapter {t.get('engine')} ({t.get('api') or '?'} API) at {t.get('url')}; "
                     f"server: {said}; model asked: {t.get('model_requested') or 'server default'}{detected}")  # fmt: skip
    return " | ".join(lines)


def missing_conditions(report: dict[str, Any]) -> list[str]:
    """What the manifest does not record (for the lead: fields to add)."""
    return [label for label, text in condition_rows(report) if text is None]


def manifest_section(report: dict[str, Any]) -> str:
    cond = [[label, text if text else macro("nm_span", "not recorded")]
            for label, text in condition_rows(report)]  # fmt: skip
    manifest = redact({k: v for k, v in (report.get("manifest") or {}).items() if k not in SKIP_IN_FULL})
    full = [[k, macro("code", v)] for k, v in flatten(manifest)]
    return section("manifest", "Conditions of the run (manifest)", table(("condition", "value"), cond, "manifest"),
                   macro("details", "Full manifest", table(("key", "value"), full, "manifest")))  # fmt: skip


def warnings_list(report: dict[str, Any], extra: list[str]) -> list[str]:
    """The report's warnings plus what the renderer can tell: estimated token counts, validity."""
    out = [f"error: {e}" for e in report.get("errors") or []]
    out += [str(w) for w in report.get("warnings") or []]
    tls_warning = lookup(report.get("manifest") or {}, "tls.warning")
    if tls_warning:
        out.append(str(tls_warning))
    if report.get("valid") is False:
        reasons = report.get("invalid_reasons") or ["errors, lost workers or conservation failure"]
        out += [f"run INVALID: {r}" for r in reasons]
    for engine, s in engines_of(report).items():
        sources = s.get("n_out_sources") or {}
        estimated = sum(v for k, v in sources.items() if k != "usage")
        if estimated:
            out.append(f"{engine}: output token counts estimated (not from server usage) for {estimated} requests "
                       f"({', '.join(f'{k} {v}' for k, v in sources.items() if k != 'usage')})")  # fmt: skip
    return [str(redact(w)) for w in out + extra]


def warnings_section(report: dict[str, Any], extra: list[str]) -> str:
    items = warnings_list(report, extra)
    body = macro("items", items, "warnings") if items else macro("paragraph", "None.")
    return section("warnings", f"Warnings ({len(items)})", body)


DEFINITIONS = (
    ("t_sched", "when the request was meant to be sent (open-loop schedule); equals t_send in closed loop"),
    ("t_start", "when loadkit began the request: before taking a kept-alive connection or opening one"),
    ("t_send", "just before the request is written, after any connection set-up (TCP connect, TLS handshake)"),
    ("t_first", "arrival of the first stream event carrying ≥ 1 output token (role-only or empty chunks do not count)"),
    ("t_i, k_i", "arrival of the i-th token-bearing event and the number of tokens in it"),
    ("n_out", "output tokens: server usage when sent (exact), else tokenizer count, else token-bearing events; source recorded per request"),
    ("TTFT", "t_first − t_send"),
    ("TTFT from schedule", "t_first − t_sched: free of coordinated omission"),
    ("TPOT", "(t_last − t_first) / (n_out − 1), requests with n_out ≥ 2"),
    ("ITL per chunk", "t_i − t_{i−1}"),
    ("ITL per token", "(t_i − t_{i−1}) / k_i, recorded k_i times (the ITL column)"),
    ("E2E", "t_end − t_send"),
    ("TTFT with connect", "t_first − t_start: TTFT with the connection set-up of requests that opened one"),
    ("connect / TLS", "TCP connect and TLS handshake of each new connection (none on a reused one)"),
    ("output tok/s", "Σ n_out of ok requests / measured window (first send to last end)"),
    ("goodput", "requests/s that meet every SLO given (TTFT, TPOT, E2E), DistServe-style"),
    ("outcomes", "every request ends in exactly one: ok, http_error:<status>, connect_error, tls_error, timeout_first_token, "
                 "timeout_total, disconnected, incomplete, in_band_error, malformed_stream, adapter_error, cancelled; "
                 "latency percentiles use ok requests; everything is counted"),
    ("not measured", f"shown as {NOT_MEASURED}: the value was not measured (never 0)"),
)  # fmt: skip


def definitions_section() -> str:
    rows = [[macro("bold", k), v] for k, v in DEFINITIONS]
    return section("definitions", "Metric definitions", macro("paragraph", "All intervals use the monotonic clock "
                   "(perf_counter_ns); wall clock only labels events."), table(("metric", "definition"), rows))  # fmt: skip
