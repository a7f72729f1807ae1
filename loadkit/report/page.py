"""``write_html``: the self-contained report.html (inline CSS and SVG, nothing fetched, no JS needed)."""

from __future__ import annotations

import logging
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from markupsafe import Markup

from loadkit.report import costtiers, grouped, plots, tables
from loadkit.report.breakdown import breakdown_section
from loadkit.report.channels import channels_section
from loadkit.report.classes import classes_section
from loadkit.report.delivered import delivered_section
from loadkit.report.gpu import html_section as gpu_html_section
from loadkit.report.htmlutil import macro, not_measured, render, section
from loadkit.report.images import images_section
from loadkit.report.manifest import definitions_section, manifest_section, warnings_section
from loadkit.report.rawdata import RawData, load_raw
from loadkit.report.redact import redact
from loadkit.report.taskerrors import header_line, task_errors_section
from loadkit.report.tenants import tenants_section

log = logging.getLogger("loadkit")

NAV = (("summary", "Summary"), ("classes", "User classes"), ("slo", "SLOs"), ("cdfs", "CDFs"), ("breakdown", "Where the time goes"), ("timeseries", "Over time"), ("stages", "Stages"),
       ("delivered", "Delivered load"), ("tenants", "Tenants"), ("cost", "Cost and SLO tiers"), ("images", "Images"), ("buckets", "Input lengths"), ("turns", "Turns"), ("outcomes", "Outcomes"),
       ("errors", "Errors"), ("task-errors", "Task errors"), ("server", "Server metrics"), ("gpu", "GPU"), ("capacity", "KV capacity"), ("warnings", "Warnings"), ("manifest", "Manifest"),
       ("definitions", "Definitions"))  # fmt: skip
_SECTION_ID = re.compile(r'<section id="([^"]+)"')


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
    return macro("wrap", "capacity", Markup(html))  # capacity/render.py escapes its own text


def _header(report: dict[str, Any], raw: RawData | None) -> dict[str, Any]:
    """The template context of the page header (title badge, why invalid, what was read)."""
    generated = report.get("generated_unix")
    reasons = report.get("invalid_reasons") or [
        "this report does not say why (written by an older loadkit): see Warnings"
    ]
    return {
        "valid": report.get("valid"),
        "invalid_reasons": [str(redact(r)) for r in reasons],
        "task_errors": str(redact(header_line(report))),
        "engines": ", ".join(tables.engines_of(report)) or "none",
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(generated)) if generated else "unknown time",
        "schema": str(report.get("schema", "unknown")),
        "rawtext": ("no raw log (plots that need per-request values say not measured)" if raw is None
                    else f"raw log: {raw.rows:,} requests from {len(raw.files)} file(s)"),
        "nav": NAV,
    }  # fmt: skip


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
        _safe("breakdown", lambda: breakdown_section(report), errors),
        _safe("timeseries", lambda: plots.timeseries_section(report, raw), errors),
        _safe("stages", lambda: grouped.stages_section(report), errors),
        _safe("delivered", lambda: delivered_section(report), errors),
        _safe("tenants", lambda: tenants_section(report), errors),
        _safe("cost", lambda: costtiers.html_section(report), errors),
        _safe("images", lambda: images_section(report), errors),
        _safe("buckets", lambda: grouped.buckets_section(report), errors),
        _safe("turns", lambda: grouped.turns_section(report), errors),
        _safe("outcomes", lambda: tables.outcomes_section(report), errors),
        _safe("errors", lambda: tables.errors_section(report), errors),
        _safe("task-errors", lambda: task_errors_section(report), errors),
        _safe("server", lambda: plots.server_metrics_section(report), errors),
        _safe("gpu", lambda: gpu_html_section(report), errors),  # report/gpu.py
        _safe("capacity", lambda: capacity_section(report, Path(report_dir)), errors),
    ]  # fmt: skip
    parts.append(warnings_section(report, extra + errors))
    parts.append(_safe("manifest", lambda: manifest_section(report), errors))
    parts.append(definitions_section())
    header = _header(report, raw)
    # Link only the sections this page has (cost, GPU, images... appear only when measured).
    present = {m for part in parts for m in _SECTION_ID.findall(str(part))}
    header["nav"] = tuple(item for item in header["nav"] if item[0] in present)
    return render("report.html.j2", sections=parts, **header)


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

    ``report`` defaults to ``report_dir/report.json``; the run's raw logs in
    ``report_dir`` (loadkit/stats/rawlog.py) are read when present (unless ``raw`` is given or ``read_raw`` is False).
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
