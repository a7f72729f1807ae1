"""The per-request JSON-lines log (``--raw-log``), written by the node that sent the request.

Lines are buffered (a flush per line would cost a syscall per request) and flushed when the
oldest unflushed line is a second old on a write, and by ``flush_pending``, which the Locust
glue calls every second; so a crash loses at most about the last second of requests. A worker
also flushes right before each snapshot it sends, so the lines lost are never of requests the
master already counts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import IO

import orjson

from loadkit.records import RequestRecord

FLUSH_INTERVAL_NS = 1_000_000_000


def raw_log_name(worker_index: int | None) -> str:
    """``requests.jsonl`` locally, ``requests.worker<N>.jsonl`` on distributed worker N."""
    return "requests.jsonl" if worker_index is None else f"requests.worker{worker_index}.jsonl"


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

    def write(self, record: RequestRecord) -> None:
        line = record.to_json()
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
