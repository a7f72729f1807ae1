"""Read what a run left in its report directory: report.json (with its manifest) and the raw
logs, one JSON line per request (``requests.jsonl``, or ``requests.worker<N>.jsonl`` per worker)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from loadkit.errors import UserError

# Fields every raw-log line must carry for the recomputation (docs/metrics.md, "Raw-log lines").
REQUIRED = ("request_id", "engine", "label", "outcome", "n_in", "n_out", "t_send_ns", "t_first_ns",
            "t_last_ns", "t_end_ns")  # fmt: skip
TEXT = ("request_id", "engine", "label", "outcome")
# Integers when present (None: not measured); a float or a string here would be summed wrongly.
WHOLE = ("n_in", "n_out", "cached_tokens", "n_in_target", "t_sched_ns", "t_start_ns", "t_send_ns", "t_first_ns",
         "t_last_ns", "t_end_ns", "t_first_answer_ns", "t_first_reasoning_ns", "t_first_tool_ns", "turn",
         "n_reasoning", "n_answer", "n_tool", "max_tokens", "t_last_answer_ns", "t_wall_offset_ns")  # fmt: skip
# Fields added after the first raw logs (max_tokens, t_last_answer_ns, t_wall_offset_ns) are
# optional: an older line without them is read, and the checks that need them say so.
NUMBER = ("connect_ms", "tls_ms", "reasoning_ms", "answer_tpot_ms")
SESSION_TEXT = ("engine", "status", "ended_by")  # a session log line's (docs/metrics.md)


class VerifyInputError(UserError):
    """The report directory cannot be verified (exit 2): no report, no raw log, a bad line."""


@dataclass(frozen=True)
class Run:
    report_dir: Path
    report: dict[str, Any]
    rows: list[dict[str, Any]]
    files: list[Path]
    # How each session ended (sessions*.jsonl beside the raw logs); None: not logged (a raw
    # log from before the session log, whose lines have no t_wall_offset_ns either).
    sessions: list[dict[str, Any]] | None = None

    @property
    def manifest(self) -> dict[str, Any]:
        return self.report.get("manifest") or {}

    @property
    def has_events(self) -> bool:
        """Whether the raw log has per-event times (``--raw-log-events``) on every ok line."""
        ok = [r for r in self.rows if r["outcome"] == "ok"]
        return bool(ok) and all("event_t_ns" in r for r in ok)


def load_run(report_dir: str | Path) -> Run:
    """The report and every raw-log line of ``report_dir``; VerifyInputError naming what is wrong."""
    directory = Path(report_dir)
    report_path = directory / "report.json"
    if not report_path.is_file():
        raise VerifyInputError(f"{report_path}: no report.json (is {directory} a run's --report-dir?)")
    try:
        report = orjson.loads(report_path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise VerifyInputError(f"{report_path}: not JSON ({exc})") from None
    if not isinstance(report, dict) or not isinstance(report.get("engines"), dict):
        raise VerifyInputError(f"{report_path}: not a loadkit report (no 'engines' section)")
    files = sorted(directory.glob("requests*.jsonl"))
    if not files:
        raise VerifyInputError(
            f"{directory}: no raw log (requests*.jsonl); run with --raw-log (LOADKIT_RAW_LOG=1) to write one, "
            "and --raw-log-events to check ITL too"
        )
    rows: list[dict[str, Any]] = []
    for path in files:
        rows += _read_lines(path)
    session_files = sorted(directory.glob("sessions*.jsonl"))
    sessions: list[dict[str, Any]] | None = None
    if session_files or (rows and all("t_wall_offset_ns" in r for r in rows)):
        sessions = [line for path in session_files for line in _read_sessions(path)]
    return Run(directory, report, rows, files, sessions)


def _read_sessions(path: Path) -> list[dict[str, Any]]:
    out = []
    for number, row in _json_lines(path):
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in SESSION_TEXT):
            raise VerifyInputError(
                f"{path}:{number}: a session line needs {', '.join(SESSION_TEXT)} (strings)"
            )
        if not isinstance(row.get("at_turn"), int) or isinstance(row.get("at_turn"), bool):
            raise VerifyInputError(f"{path}:{number}: 'at_turn' is {row.get('at_turn')!r}, not an integer")
        out.append(row)
    return out


def _json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, decoded value) of each non-blank line; a line that is not JSON is named."""
    with path.open("rb") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield number, orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise VerifyInputError(f"{path}:{number}: not a JSON line ({exc})") from None


def _read_lines(path: Path) -> list[dict[str, Any]]:
    rows = []
    for number, row in _json_lines(path):
        if not isinstance(row, dict):
            raise VerifyInputError(f"{path}:{number}: not a JSON object")
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise VerifyInputError(f"{path}:{number}: raw-log line without {', '.join(map(repr, missing))}")
        bad = _bad_field(row)
        if bad:
            raise VerifyInputError(f"{path}:{number}: {bad}")
        row["_where"] = f"{path.name}:{number}"
        rows.append(row)
    return rows


def _bad_field(row: dict[str, Any]) -> str | None:
    """What is wrong with a line's field types, or None."""
    for key in TEXT:
        if not isinstance(row[key], str):
            return f"{key!r} is {row[key]!r}, not a string"
    if row["t_send_ns"] is None:
        return "'t_send_ns' is null"
    for key in WHOLE:
        value = row.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            return f"{key!r} is {value!r}, not an integer"
    for key in NUMBER:
        value = row.get(key)
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            return f"{key!r} is {value!r}, not a number"
    for key in ("event_t_ns", "event_tokens"):
        if key in row and not (isinstance(row[key], list) and all(isinstance(x, int) for x in row[key])):
            return f"{key!r} is not a list of integers"
    return None
