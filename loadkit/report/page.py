"""``write_html``: the self-contained report.html (inline CSS and SVG, nothing fetched, no JS needed)."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any

import orjson

from loadkit.report import plots, tables
from loadkit.report.channels import channels_section
from loadkit.report.classes import classes_section
from loadkit.report.delivered import delivered_section
from loadkit.report.htmlutil import not_measured, section
from loadkit.report.manifest import definitions_section, manifest_section, warnings_section
from loadkit.report.rawdata import RawData, load_raw
from loadkit.report.redact import redact
from loadkit.report.tenants import tenants_section

log = logging.getLogger("loadkit")

CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1400px;padding:16px 24px;color:#222}
h1{font-size:22px;margin:4px 0}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:3px;margin-top:28px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}
th{background:#f4f4f4;text-align:left}td:first-child,td:nth-child(2){text-align:left}table.manifest td{text-align:left}
.summary td:nth-child(n+9):nth-child(-n+18){background:#fafcff}
figure{display:inline-block;margin:6px 12px 6px 0;vertical-align:top}figcaption{font-size:12px;color:#555}
svg.plot{display:inline-block;margin:6px 12px 6px 0;background:#fff;vertical-align:top}
svg .frame{fill:none;stroke:#999}svg .grid{stroke:#eee}svg .tk{font-size:11px;fill:#444}
svg .al{font-size:12px;fill:#222}svg .tt{font-size:14px;font-weight:600}svg .lg{font-size:12px}
.nm{color:#8a6d3b;background:#fcf8e3;padding:4px 8px;display:inline-block}.note{color:#555;font-size:13px}
.bad{color:#fff;background:#c9302c;padding:2px 8px;border-radius:3px}.good{color:#fff;background:#3c763d;padding:2px 8px;border-radius:3px}
.invalid{border:2px solid #c9302c;background:#fdf2f2;padding:4px 12px;margin:6px 0}.invalid ul{margin:4px 0}
nav a{margin-right:12px}code{font-size:12px;word-break:break-all}ul.warnings li{color:#8a3b3b}
"""
NAV = (("summary", "Summary"), ("classes", "User classes"), ("slo", "SLOs"), ("cdfs", "CDFs"), ("timeseries", "Over time"), ("stages", "Stages"),
       ("delivered", "Delivered load"), ("buckets", "Input lengths"), ("turns", "Turns"), ("outcomes", "Outcomes"), ("errors", "Errors"), ("server", "Server metrics"),
       ("capacity", "KV capacity"), ("warnings", "Warnings"), ("manifest", "Manifest"), ("definitions", "Definitions"))  # fmt: skip


def _safe(name: str, build: Callable[[], str], errors: list[str]) -> str:
    """One section; a bug in it costs that section, not the report (and is said on the page)."""
    try:
        return build()
    except Exception as exc:  # the report must still be written: the failure is shown and logged
        log.exception("report section %s failed", name)
        errors.append(f"report section {name!r} could not be drawn: {exc!r}")
        return section(name, name, not_measured(name, f"this section failed to render: {exc!r}"))


def capacity_section(report: dict[str, Any], report_dir: Path) -> str:
    model_config = (report.get("manifest") or {}).get("model_config")
    if not model_config:
        return section(
            "capacity", "KV-cache capacity", not_measured("capacity", "the run named no model config")
        )
    from loadkit.capacity import report_section

    _, html = report_section(model_config, report_dir)
    return f'<section id="capacity">{html}</section>'


def _header(report: dict[str, Any], raw: RawData | None) -> str:
    valid = report.get("valid")
    badge = ('<span class="good">valid</span>' if valid else '<span class="bad">INVALID</span>' if valid is False
             else '<span class="nm">validity not recorded</span>')  # fmt: skip
    generated = report.get("generated_unix")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(generated)) if generated else "unknown time"
    engines = ", ".join(tables.engines_of(report)) or "none"
    rawtext = ("no raw log (plots that need per-request values say not measured)" if raw is None
               else f"raw log: {raw.rows:,} requests from {len(raw.files)} file(s)")  # fmt: skip
    nav = "".join(f'<a href="#{k}">{v}</a>' for k, v in NAV)
    return (f"<header><h1>loadkit report {badge}</h1>{_invalid_box(report)}<p>Engines: <b>{escape(engines)}</b> · "
            f"report generated {when} · schema {escape(str(report.get('schema', 'unknown')))} · {escape(rawtext)}</p>"
            f"<nav>{nav}</nav></header>")  # fmt: skip


def _invalid_box(report: dict[str, Any]) -> str:
    """Why the run is invalid (or was stopped), right under the title: the first thing to read."""
    reasons = report.get("invalid_reasons") or []
    if report.get("valid") is not False:
        return ""
    if not reasons:
        reasons = ["this report does not say why (written by an older loadkit): see Warnings"]
    items = "".join(f"<li>{escape(str(redact(r)))}</li>" for r in reasons)
    return f'<div class="invalid"><b>This run is invalid:</b><ul>{items}</ul></div>'



def build_html(report: dict[str, Any], raw: RawData | None = None, report_dir: str | Path = ".") -> str:
    """The whole report page as a string (no I/O except the capacity hook's raw-log read)."""
    errors: list[str] = []
    extra = (
        [] if raw is None or not raw.malformed else [f"raw log: {raw.malformed} malformed line(s) not used"]
    )
    parts = [
        _safe("summary", lambda: tables.summary_section(report), errors),
        _safe("classes", lambda: classes_section(report), errors),
        _safe("slo", lambda: tables.slo_section(report), errors),
        _safe("connections", lambda: tables.connections_section(report), errors),
        _safe("channels", lambda: channels_section(report), errors),
        _safe("cdfs", lambda: plots.cdf_section(report, raw), errors),
        _safe("timeseries", lambda: plots.timeseries_section(report, raw), errors),
        _safe("stages", lambda: plots.stages_section(report, raw), errors),
        _safe("delivered", lambda: delivered_section(report), errors),
        _safe("tenants", lambda: tenants_section(report), errors),
        _safe("buckets", lambda: plots.buckets_section(report, raw), errors),
        _safe("turns", lambda: plots.turns_section(report, raw), errors),
        _safe("outcomes", lambda: tables.outcomes_section(report), errors),
        _safe("errors", lambda: tables.errors_section(report), errors),
        _safe("server", lambda: plots.server_metrics_section(report), errors),
        _safe("capacity", lambda: capacity_section(report, Path(report_dir)), errors),
    ]  # fmt: skip
    parts.append(warnings_section(report, extra + errors))
    parts.append(_safe("manifest", lambda: manifest_section(report), errors))
    parts.append(definitions_section())
    return ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>loadkit report</title>'
            f'<meta name="viewport" content="width=device-width"><style>{CSS}</style></head><body>'
            f'{_header(report, raw)}{"".join(parts)}</body></html>')  # fmt: skip


def read_report(path: str | Path) -> dict[str, Any]:
    data = orjson.loads(Path(path).read_bytes())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a loadkit report (top level is not an object)")
    return data


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-report-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_html(report_dir: str | Path, report: dict[str, Any] | None = None, *, raw: RawData | None = None,
               out: str | Path | None = None, read_raw: bool = True) -> Path:  # fmt: skip
    """Write ``report_dir/report.html`` (or ``out``) atomically; returns its path.

    ``report`` defaults to ``report_dir/report.json``; the raw logs ``requests*.jsonl`` in
    ``report_dir`` are read when present (unless ``raw`` is given or ``read_raw`` is False).
    Missing optional sections render "not measured".
    """
    folder = Path(report_dir)
    if report is None:
        report = read_report(folder / "report.json")
    if raw is None and read_raw:
        raw = load_raw(folder)
    target = Path(out) if out is not None else folder / "report.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(target, build_html(report, raw, folder))
    return target
