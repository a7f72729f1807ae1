"""``loadkit report DIR``: rebuild report.html from report.json (and the raw log when present),
or, with ``--format llmd-br``, write the llm-d Benchmark Report v0.2 (docs/llm-d.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson

from loadkit.errors import UserError
from loadkit.stats.rawlog import RAW_LOG_GLOB


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="loadkit report", description=__doc__)
    p.add_argument("report_dir", help="a run's --report-dir (holds report.json), or a report.json file")
    p.add_argument(
        "--format",
        choices=("html", "llmd-br"),
        default="html",
        help="html: report.html; llmd-br: llm-d Benchmark Report v0.2, one "
        "benchmark_report_v0.2,_loadkit_TARGET.yaml per target (docs/llm-d.md)",
    )
    p.add_argument(
        "-o",
        "--output",
        help="where to write the file (default: DIR/report.html; with llmd-br one file per target in DIR; "
        "a .json name writes JSON, any other YAML)",
    )
    p.add_argument("--target", help="llmd-br: only this target (needed with -o when the run had several)")
    p.add_argument(
        "--no-raw-log",
        action="store_true",
        help=f"ignore the raw logs ({RAW_LOG_GLOB}; plots from percentiles only)",
    )
    return p


def resolve(arg: str) -> tuple[Path, Path]:
    """(report directory, report.json path) for a directory or a report.json argument."""
    path = Path(arg)
    if path.is_dir():
        path = path / "report.json"
    if not path.is_file():
        raise UserError(f"{arg}: no report.json there (is it a loadkit --report-dir?)")
    return path.parent, path


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    from loadkit.report.page import read_report, write_html

    folder, path = resolve(args.report_dir)
    try:
        report = read_report(path)
    except (orjson.JSONDecodeError, ValueError, OSError) as exc:
        raise UserError(f"{path}: not a readable report: {exc}") from None
    if args.format == "llmd-br":
        return _llmd(folder, report, args.output, args.target)
    if args.target:
        raise UserError("--target applies to --format llmd-br only")
    try:
        out = write_html(folder, report, out=args.output, read_raw=not args.no_raw_log)
    except OSError as exc:
        raise UserError(f"cannot write the report: {exc}") from None
    print(f"report: {out}")
    return 0


def _llmd(folder: Path, report: dict[str, Any], out: str | None, target: str | None) -> int:
    from loadkit.report.llmdfiles import write_llmd_reports

    try:
        paths = write_llmd_reports(report, str(folder), out=out, engine=target)
    except OSError as exc:
        raise UserError(f"cannot write the Benchmark Report: {exc}") from None
    for path in paths:
        print(f"llm-d Benchmark Report: {path}")
    return 0
