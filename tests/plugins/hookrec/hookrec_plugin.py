"""A test plugin, loaded through a real entry point (see ``install``), that implements every
hook and appends one JSON line per call to the file named by ``LOADKIT_HOOKREC``: which hook,
in which process, and what it could observe then. ``LOADKIT_HOOKREC_FAIL=hook1,hook2`` makes
those hooks raise, to check that a third-party failure is named and stops nothing."""

from __future__ import annotations

import json
import os
import time

from loadkit import hookimpl


def _log(hook: str, **fields) -> None:
    line = json.dumps({"hook": hook, "pid": os.getpid(), "t": time.monotonic(), **fields})
    with open(os.environ["LOADKIT_HOOKREC"], "a") as f:
        f.write(line + "\n")  # one write of one short line: appends from several processes do not mix
    if hook in os.environ.get("LOADKIT_HOOKREC_FAIL", "").split(","):
        raise RuntimeError(f"hookrec fails in {hook} on purpose")


@hookimpl
def loadkit_register_engines(register):
    _log("loadkit_register_engines")


@hookimpl
def loadkit_register_sim_protocols(register):
    _log("loadkit_register_sim_protocols")


@hookimpl
def loadkit_detect_engine(probes):
    _log("loadkit_detect_engine", paths=sorted(probes))
    return None


@hookimpl
def loadkit_add_arguments(group):
    _log("loadkit_add_arguments")


@hookimpl
def loadkit_configure(options):
    _log("loadkit_configure", scenario=options.get("scenario"))


@hookimpl
def loadkit_request_finished(record):
    _log("loadkit_request_finished", request_id=record.request_id, outcome=record.outcome)


@hookimpl
def loadkit_write_report(report_dir, final):
    _log("loadkit_write_report", final=final, json=os.path.exists(os.path.join(report_dir, "report.json")))


@hookimpl
def loadkit_report_written(report, report_dir):
    files = sorted(
        f for f in ("report.json", "report.html", "stats.csv") if os.path.exists(os.path.join(report_dir, f))
    )
    _log("loadkit_report_written", files=files, valid=report["valid"])
