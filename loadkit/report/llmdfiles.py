"""The llm-d Benchmark Report files: named as llm-d-benchmark looks for them, checked against
the schema, and written at the end of a run asked for with ``--report-format llmd-br``
(through the public ``loadkit_write_report`` hook; a built-in in
``loadkit.plugins.BUILTIN_PLUGINS``) or later by ``loadkit report --format llmd-br``.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any

import orjson

from loadkit.hookspecs import hookimpl
from loadkit.report.llmd import LlmdReportError, benchmark_reports, check
from loadkit.report.yamltext import dumps

log = logging.getLogger("loadkit")

FORMAT = "llmd-br"
# llm-d-benchmark's analysis reads every `benchmark_report_v0.2,_*.yaml` of a results directory
# (its own converters name them `benchmark_report_v0.2,_<native results file>.yaml`).
PREFIX = "benchmark_report_v0.2,_"


def file_name(engine: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", engine) or "target"
    return f"{PREFIX}loadkit_{safe}.yaml"


def encode(document: dict[str, Any], path: str) -> bytes:
    """JSON for a ``.json`` path, YAML (what llm-d-benchmark reads) for anything else."""
    if path.endswith(".json"):
        return orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n"
    return dumps(document).encode("utf-8")


def write_llmd_reports(report: dict[str, Any], report_dir: str, out: str | None = None,
                       engine: str | None = None) -> list[str]:  # fmt: skip
    """Write one Benchmark Report per engine into ``report_dir`` (or the one asked for, to
    ``out``); every document is checked against the schema first. Returns the paths."""
    from loadkit.report.files import write_atomic

    documents = benchmark_reports(report)
    if engine is not None:
        if engine not in documents:
            raise LlmdReportError(f"no target {engine!r} in this report (targets: {', '.join(documents)})")
        documents = {engine: documents[engine]}
    if out is not None and len(documents) > 1:
        raise LlmdReportError(
            f"-o names one file but the run has {len(documents)} targets ({', '.join(documents)}): "
            "choose one with --target, or leave out -o to write one file per target"
        )
    planned = {name: out or os.path.join(report_dir, file_name(name)) for name in documents}
    for name, document in documents.items():
        check(document, f"target {name!r}")  # nothing is written unless every document passes
    for name, path in planned.items():
        write_atomic(path, encode(documents[name], path))
    return list(planned.values())


def asked(report: dict[str, Any]) -> bool:
    formats = (report.get("manifest") or {}).get("report_formats") or []
    return FORMAT in formats


@hookimpl
def loadkit_write_report(report: dict[str, Any], report_dir: str, final: bool) -> None:
    if not final or not asked(report):
        return  # written once, from the final figures, and only when asked for
    try:
        paths = write_llmd_reports(report, report_dir)
    except Exception as exc:  # report.json is already written: say so, do not crash the run
        log.error("llm-d Benchmark Report not written: %s (rebuild it with `loadkit report --format %s %s`)",
                  exc, FORMAT, report_dir)  # fmt: skip
        return
    for path in paths:
        sys.stdout.write(f"loadkit: llm-d Benchmark Report {path}\n")
    sys.stdout.flush()
