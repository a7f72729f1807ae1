"""The arrival offsets a scenario's trace asks, read by the oracle itself (not by
loadkit.workload's reader, which it checks): the scenario file's ``[trace]`` table, then the
trace file's timestamps, as docs/scenarios.md defines the replay:

- Azure CSV (``TIMESTAMP``, or ``timestamp_column``): seconds, or ISO date-times; Mooncake
  JSONL: ``timestamp`` in ms. Times start at the trace's earliest (0);
- ``order = "time"`` (default): sorted; ``"file"``: each row no earlier than the one above;
- the window ``start_s <= t < end_s`` (on a µs grid), re-based to ``start_s``; divided by
  ``speed``; cut at ``duration_s`` and after ``max_requests``.

What it does not replay says why (``TraceUnread``): ServeGen windows (synthesised from
statistics), a looping trace, sessions from a trace, ``on_bad_row = "skip"``, rows it cannot parse.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

PACKAGE_DATA = Path(__file__).resolve().parents[1] / "data"  # ${LOADKIT_PACKAGE_DATA}
TIME_COLUMN = {"azure": "TIMESTAMP", "mooncake": "timestamp"}


class TraceUnread(Exception):
    """This trace's asked offsets are not recomputed; the message says why."""


def scenario_table(path: str | None, sha256: str | None) -> dict[str, Any]:
    """The scenario file the run read, parsed; TraceUnread when it is gone or was changed since."""
    if not path or not Path(path).is_file():
        raise TraceUnread(f"the scenario file {path!r} is not here")
    data = Path(path).read_bytes()
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise TraceUnread(f"{path} changed since the run (its sha256 is not the manifest's)")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TraceUnread(f"{path}: not TOML ({exc})") from None


def trace_offsets(scenario_path: str, table: dict[str, Any]) -> list[float]:
    """The asked arrival offsets (s from the window's start, scaled by speed) of a scenario's trace."""
    trace = table.get("trace") or {}
    fmt = trace.get("format", "azure")
    if fmt not in TIME_COLUMN:
        raise TraceUnread(f"a {fmt!r} trace's arrivals are not read by the oracle")
    for key in ("loop", "as_sessions"):
        if trace.get(key):
            raise TraceUnread(f"trace.{key} replays are not read by the oracle")
    if trace.get("on_bad_row") == "skip":
        raise TraceUnread('on_bad_row = "skip": which rows the loader skipped is its own reading')
    path = _resolve(str(trace.get("path", "")), Path(scenario_path).parent)
    column = str(trace.get("timestamp_column") or TIME_COLUMN[fmt])
    times = _mooncake_times(path) if fmt == "mooncake" else _csv_times(path, column)
    if not times:
        return []
    if trace.get("order", "time") == "file":
        running, kept = -math.inf, []
        for t in times:
            running = max(running, t)
            kept.append(running)
        times = kept
    else:
        times = sorted(times)
    first = times[0]
    times = [t - first for t in times]
    start, end = trace.get("start_s"), trace.get("end_s")
    lo = 0.0 if start is None else float(start)
    window = [t - lo for t in times if _in_window(t, start, end)]
    speed = float(trace.get("speed", 1.0))
    offsets = [t / speed for t in window]
    duration = table.get("duration_s")
    if duration is not None:
        offsets = [t for t in offsets if t < float(duration)]
    limit = table.get("max_requests")
    return offsets[: int(limit)] if limit is not None else offsets


def _in_window(t: float, start: Any, end: Any) -> bool:
    us = round(t * 1e6)
    return (start is None or us >= round(float(start) * 1e6)) and (
        end is None or us < round(float(end) * 1e6)
    )


def _resolve(raw: str, base: Path) -> Path:
    text = raw.replace("${LOADKIT_PACKAGE_DATA}", str(PACKAGE_DATA))
    text = text.replace("${LOADKIT_DATA}", os.environ.get("LOADKIT_DATA") or str(PACKAGE_DATA))
    path = Path(os.path.expanduser(os.path.expandvars(text)))
    path = path if path.is_absolute() else base / path
    if not path.is_file():
        raise TraceUnread(f"the trace file {path} is not here")
    return path


def _seconds(text: str, where: str) -> float:
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise TraceUnread(f"{where}: timestamp {text!r} is neither seconds nor a date-time") from None


def _csv_times(path: Path, column: str) -> list[float]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = csv.reader(fh)
        header = next(rows, None) or []
        if column not in header:
            raise TraceUnread(f"{path}: no column {column!r}")
        index = header.index(column)
        return [_seconds(row[index], f"{path}:{n}") for n, row in enumerate(rows, 2) if row]


def _mooncake_times(path: Path) -> list[float]:
    times = []
    with path.open("rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                stamp = orjson.loads(line)["timestamp"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                raise TraceUnread(f"{path}:{n}: a row without a readable timestamp") from None
            if not isinstance(stamp, int | float) or isinstance(stamp, bool):
                raise TraceUnread(f"{path}:{n}: timestamp {stamp!r} is not a number")
            times.append(float(stamp) / 1000.0)
    return times
