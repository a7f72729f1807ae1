"""``loadkit verify REPORT_DIR``: recompute report.json from the raw log and say what disagrees.

Exit 0: every figure checked agrees; 1: at least one disagrees (each printed as
``section / key / figure: report X, recomputed Y (tolerance T)``); 2: the directory cannot be
verified (no report.json, no raw log, a bad raw-log line: the file and line are named)."""

from __future__ import annotations

import argparse

from loadkit.verify.checks import verify_run
from loadkit.verify.rawlog import load_run


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="loadkit verify",
        description="Recompute a run's report.json from its raw log (--raw-log) and compare every figure.",
    )
    parser.add_argument("report_dir", metavar="REPORT_DIR", help="the run's --report-dir")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only disagreements and the verdict")
    args = parser.parse_args(argv)
    run = load_run(args.report_dir)  # VerifyInputError is a UserError: exit 2, one line
    verdict = verify_run(run)
    files = ", ".join(p.name for p in run.files)
    print(f"loadkit verify {run.report_dir}: {len(run.rows)} raw-log lines ({files})")
    if not args.quiet:
        for section, count in verdict.checked.items():
            print(f"  checked {section}: {count} figures")
        for remark in verdict.remarks:
            print(f"  note: {remark}")
        for note in verdict.notes:
            print(f"  not checked: {note}")
    for d in verdict.disagreements:
        print(f"DISAGREES {d}")
    total = sum(verdict.checked.values())
    if verdict.ok:
        print(
            f"OK: {total} figures agree (percentiles within {verdict.relative_error:.3%} + one recording unit)"
        )
        return 0
    print(f"FAILED: {len(verdict.disagreements)} of {total} figures disagree")
    return 1
