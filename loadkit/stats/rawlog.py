"""The per-request JSON-lines log (``--raw-log``): its file names, its writer and its reader.

The one home of the raw log: the name pattern (``RAW_LOG_GLOB``, ``raw_log_name``,
``raw_log_paths``), the writer (``RawLog``, on the node that sent the request) and a streaming
reader (``read_blocks`` / ``read_rows``, ``read_columns`` for numpy columns), used by the report
(report/rawdata.py), compare, capacity and the test kit. ``loadkit.verify`` keeps a reader of
its own on purpose: it is the independent second implementation that checks this one.

Each line is ``RequestRecord.to_json()``: the request's metrics as computed once for it
(loadkit.formulas' RequestMetrics), in ms, and ``t_wall_offset_ns``, the writing process's
wall-clock offset (``t_*_ns + t_wall_offset_ns`` = Unix ns, as the report's windows take them).
Lines of older runs lack the fields added since (``t_wall_offset_ns``, ``max_tokens``,
``t_last_answer_ns``): a reader takes a missing field as not recorded. Beside it, the session
log (``sessions.jsonl``, ``sessions.worker<N>.jsonl``) holds one line per session that ended
(``session_line``): how it ended is no request's, so it is no line of the request log, which
stays one line per request. Lines are buffered (a flush per line would cost a syscall per request) and flushed when the
oldest unflushed line is a second old on a write, and by ``flush_pending``, which the Locust
glue calls every second; so a crash loses at most about the last second of requests. A worker
also flushes right before each snapshot it sends, so the lines lost are never of requests the
master already counts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from loadkit.records import RequestRecord

FLUSH_INTERVAL_NS = 1_000_000_000
# Every raw log of a run directory: one per process that sent requests (see raw_log_name).
RAW_LOG_GLOB = "requests*.jsonl"
# Beside each, how that process's sessions ended, one line per session (session_log_path).
SESSION_LOG_GLOB = "sessions*.jsonl"
BLOCK_BYTES = 1 << 22  # read in 4 MiB blocks: a Python-level loop per line costs more


def raw_log_name(worker_index: int | None) -> str:
    """``requests.jsonl`` locally, ``requests.worker<N>.jsonl`` on distributed worker N."""
    return "requests.jsonl" if worker_index is None else f"requests.worker{worker_index}.jsonl"


def session_log_path(raw_log_path: str) -> str:
    """The session log beside a raw log: ``sessions.jsonl`` / ``sessions.worker<N>.jsonl``."""
    folder, name = os.path.split(raw_log_path)
    stem = name[len("requests") :] if name.startswith("requests") else "." + name
    return os.path.join(folder, "sessions" + stem)


def session_line(engine: str, session: Any, at_turn: int) -> dict[str, Any]:
    """How one session (a scenario session or a Conversation) ended, as the sessions section
    counts it: ``status`` (``completed`` / ``broken``), ``ended_by`` (a completed session's end
    reason, else ``completed``; a broken one's reason: ``cancelled`` when the test stopped it,
    the failed turn's outcome, ``task_error``), ``at_turn`` (a broken one: the turn it broke at)."""
    broken = session.status == "broken"
    reason = session.broken_reason if broken else getattr(session, "end_reason", None)
    return {"session_id": getattr(session, "session_id", None), "engine": engine, "status": session.status,
            "ended_by": (reason or "unknown") if broken else (reason or "completed"),
            "at_turn": at_turn, "turns_sent": session.turns_sent}  # fmt: skip


def raw_log_paths(folder: str | Path) -> list[Path]:
    """The raw logs a run wrote into ``folder`` (one per sending process), in name order."""
    return sorted(Path(folder).glob(RAW_LOG_GLOB))


class MalformedLine(ValueError):
    """A raw-log line that is not a JSON object (a crash can truncate the last line)."""


def read_blocks(path: str | Path, strict: bool = False) -> Iterator[tuple[list[dict[str, Any]], int]]:
    """Stream ``path``'s lines as (JSON objects, lines that were not one) a block at a time;
    blank lines are skipped. ``strict``: a malformed line raises MalformedLine instead of being
    counted. Works on any JSON-lines file (capacity sniffs traces with it too)."""
    with open(path, "rb") as f:
        tail = b""
        while block := f.read(BLOCK_BYTES):
            lines = (tail + block).split(b"\n")
            tail = lines.pop()
            kept = [line for line in lines if line.strip()]
            if kept:
                yield _parse(kept, strict, path)
        if tail.strip():
            yield _parse([tail], strict, path)


def read_rows(paths: Iterable[str | Path], strict: bool = False) -> Iterator[dict[str, Any]]:
    """Every line of every file in ``paths`` as a dict, streamed (malformed lines skipped, or
    with ``strict`` raised)."""
    for path in paths:
        for rows, _ in read_blocks(path, strict):
            yield from rows


def _parse(chunk: list[bytes], strict: bool, path: str | Path) -> tuple[list[dict[str, Any]], int]:
    try:  # one orjson call for the whole chunk is several times faster than one per line
        rows = orjson.loads(b"[" + b",".join(chunk) + b"]")
    except orjson.JSONDecodeError:
        return _parse_lines(chunk, strict, path)
    # As many objects as lines: a line holding "{..},{..}" would parse as two here.
    if len(rows) == len(chunk) and all(isinstance(row, dict) for row in rows):
        return rows, 0
    return _parse_lines(chunk, strict, path)


def _parse_lines(chunk: list[bytes], strict: bool, path: str | Path) -> tuple[list[dict[str, Any]], int]:
    rows, bad = [], 0
    for line in chunk:
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        elif strict:
            raise MalformedLine(f"{path}: not a JSON object: {line[:80]!r}")
        else:
            bad += 1
    return rows, bad


@dataclass(frozen=True)
class Columns:
    """Raw-log columns as numpy arrays, read as a stream (only the columns asked for are kept,
    so 100k lines cost a few MB): floats (NaN where the log had null or a non-number), texts
    (object arrays) and ``file``, each row's index in ``files``. ``malformed``: lines skipped."""

    files: list[str]
    malformed: int
    columns: dict[str, np.ndarray]


def read_columns(paths: Iterable[str | Path], floats: Sequence[str], texts: Sequence[str]) -> Columns:
    """Stream every file in ``paths`` into the ``floats`` and ``texts`` columns (see Columns)."""
    files: list[str] = []
    malformed = 0
    parts: dict[str, list[np.ndarray]] = {n: [] for n in (*floats, *texts, "file")}
    for index, path in enumerate(paths):
        files.append(str(path))
        for rows, bad in read_blocks(path):
            malformed += bad
            if not rows:
                continue
            for name in floats:
                parts[name].append(_floats(rows, name))
            for name in texts:
                parts[name].append(_texts(rows, name))
            parts["file"].append(np.full(len(rows), index, dtype=np.int32))
    columns: dict[str, np.ndarray] = {}
    for name, arrays in parts.items():
        dtype = object if name in texts else np.int32 if name == "file" else np.float64
        columns[name] = np.concatenate(arrays) if arrays else np.array([], dtype=dtype)
    return Columns(files, malformed, columns)


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else np.nan


def _column(rows: list[dict[str, Any]], name: str) -> list[Any]:
    try:  # every loadkit raw-log line has every key: subscripting is faster than .get
        return [row[name] for row in rows]
    except KeyError:
        return [row.get(name) for row in rows]


def _floats(rows: list[dict[str, Any]], name: str) -> np.ndarray:
    values = _column(rows, name)
    try:  # numpy turns None into NaN itself: one C loop instead of one Python call per value
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):  # a string or object where a number belongs: not a number
        return np.array([_num(v) for v in values], dtype=np.float64)


def _texts(rows: list[dict[str, Any]], name: str) -> np.ndarray:
    return np.array(
        [v if v is None or isinstance(v, str) else str(v) for v in _column(rows, name)], dtype=object
    )


class RawLog:
    """Append RequestRecord.to_json() lines to ``path``; see the module docstring."""

    def __init__(
        self,
        path: str,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        truncate: bool = False,
        events: bool = False,
    ) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self._clock_ns = clock_ns
        mode = "wb" if truncate else "ab"
        self._file: IO[bytes] = open(path, mode, buffering=1 << 16)  # noqa: SIM115 - closed in close()
        self._pending_since: int | None = None
        self.lines = 0
        # --raw-log-events: each token event's arrival (monotonic ns, the t_*_ns clock) and
        # token count, in arrival order (``n_events`` of them).
        self.events = events
        self._mode = mode
        self._sessions: IO[bytes] | None = None  # opened at the first session's end

    def write_session(self, line: dict[str, Any]) -> None:
        """One session's end (``session_line``) into the session log; sessions end seldom
        next to requests, so each line is flushed at once. After close (a session ended by
        the stop after the stats closed): not written."""
        if self._file.closed:
            return
        if self._sessions is None:
            self._sessions = open(session_log_path(self.path), self._mode)  # noqa: SIM115 - closed in close()
        self._sessions.write(orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))
        self._sessions.flush()

    def write(self, record: RequestRecord, wall_offset_ns: int | None = None) -> None:
        """One line; ``wall_offset_ns``: the writing process's wall-clock offset (Unix ns −
        monotonic ns, the one its stats put the report's windows on the wall clock with), so
        lines of several processes can be put on one timeline (``t_wall_offset_ns``)."""
        line = record.to_json()
        line["t_wall_offset_ns"] = wall_offset_ns
        if self.events:
            line["event_t_ns"], line["event_tokens"] = record.event_t_ns, record.event_tokens
        self._file.write(orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))
        self.lines += 1
        now = self._clock_ns()
        if self._pending_since is None:
            self._pending_since = now
        elif now - self._pending_since >= FLUSH_INTERVAL_NS:
            self.flush()

    def flush_pending(self) -> None:
        if self._pending_since is not None:
            self.flush()

    def flush(self) -> None:
        if not self._file.closed:
            self._file.flush()
        self._pending_since = None

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            self._file.close()
        if self._sessions is not None and not self._sessions.closed:
            self._sessions.close()
