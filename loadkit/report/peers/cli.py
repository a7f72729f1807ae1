"""``loadkit import FILE -o DIR``: a peer tool's result file as a loadkit report directory.

DIR gets report.json (the loadkit-shaped figures, with ``source``, ``unmapped`` and
``definitions``) and report.html, so ``loadkit compare DIR other-run`` and ``loadkit report
DIR`` read it like a run of loadkit's own. The format is detected from the file's content.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from loadkit.errors import UserError
from loadkit.report.peers import IMPORTERS, notes, read_peer


def _parser() -> argparse.ArgumentParser:
    tools = ", ".join(i.tool for i in IMPORTERS)
    p = argparse.ArgumentParser(prog="loadkit import", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("file", help=f"a peer tool's result file ({tools}; genai-bench's experiment folder too); "
                   "gzip-compressed is read too")  # fmt: skip
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="report directory to write")
    p.add_argument("--no-html", action="store_true", help="write report.json only")
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    report = read_peer(args.file)
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
        if not args.no_html:
            from loadkit.report.page import write_html

            write_html(out, report, read_raw=False)
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc}") from None
    for line in notes(report):
        print(line)
    print(f"report: {out / 'report.json'}")
    return 0
