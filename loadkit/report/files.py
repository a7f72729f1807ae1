"""loadkit's own report files — report.json, stats.csv, timeseries.csv — written through the
public ``loadkit_write_report`` hook, like any plugin's format (registered as a built-in in
``loadkit.plugins.BUILTIN_PLUGINS``). report/ owns them: it sits above stats/, whose report
document (``StatsCollector.report()``) it writes; nothing in stats/ imports report/.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from typing import Any

import orjson

from loadkit.hookspecs import hookimpl
from loadkit.stats.metrics import METRICS
from loadkit.stats.report import QUANTILES

STAT_FIELDS = ("count", "mean", "min", "max") + tuple(name for name, _ in QUANTILES)
ROW_FIELDS = ("engine", "label", "requests", "ok", "failures", "cancelled", "output_tokens", "input_tokens",
              "cached_tokens", "window_s", "requests_per_s", "output_tokens_per_s", "goodput_per_s")  # fmt: skip
SERIES_FIELDS = ("t", "unix", "requests", "ok", "output_tokens", "in_flight")


@hookimpl(tryfirst=True)
def loadkit_write_report(report: dict[str, Any], report_dir: str) -> None:
    write_reports(report, report_dir)


def write_atomic(path: str, data: bytes) -> None:
    """Write via a temporary file and rename, so a reader never sees half a report."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def stats_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per engine (label "*") and per (engine, label)."""
    rows = []
    for engine, section in report["engines"].items():
        rows.append(_row(engine, "*", section))
        for label, sub in section["labels"].items():
            rows.append(_row(engine, label, sub))
    return rows


def _row(engine: str, label: str, section: dict[str, Any]) -> dict[str, Any]:
    row = {"engine": engine, "label": label, **{k: section.get(k) for k in ROW_FIELDS[2:]}}
    for metric in METRICS:
        for stat in STAT_FIELDS:
            row[f"{metric}_{stat}"] = section[metric][stat]
    return row


def _csv(fields: list[str], rows: list[dict[str, Any]]) -> bytes:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue().encode()


def stats_csv(report: dict[str, Any]) -> bytes:
    fields = list(ROW_FIELDS) + [f"{m}_{s}" for m in METRICS for s in STAT_FIELDS]
    return _csv(fields, stats_rows(report))


def timeseries_csv(report: dict[str, Any]) -> bytes:
    rows = []
    for engine, section in report["engines"].items():
        cols = section["timeseries"]
        for i in range(len(cols["t"])):
            rows.append({"engine": engine, **{k: cols[k][i] for k in SERIES_FIELDS}})
    return _csv(["engine", *SERIES_FIELDS], rows)


def write_reports(report: dict[str, Any], report_dir: str) -> list[str]:
    """Write report.json, stats.csv and timeseries.csv into ``report_dir``; returns the paths."""
    files = {
        "report.json": orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS),
        "stats.csv": stats_csv(report),
        "timeseries.csv": timeseries_csv(report),
    }
    paths = []
    for name, data in files.items():
        path = os.path.join(report_dir, name)
        write_atomic(path, data)
        paths.append(path)
    return paths
