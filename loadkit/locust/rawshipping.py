"""The Locust messages that ship a worker's raw log to the master and measure their clocks'
offset (the bookkeeping without Locust: stats/rawship.py; docs/distributed.md, "Workers on
other hosts").

Messages (all carry the run's directory as the master named it, so a late message of an
earlier run is dropped):
- worker → master ``loadkit_rawlog_hello`` (worker index, token): the master looks for the
  token file in its own directory and answers ``loadkit_rawlog_mode`` (ship or not: a worker
  writing into the master's directory ships nothing);
- worker → master ``loadkit_rawlog`` (worker index, byte offset, bytes of whole lines), sent at
  the raw log's flush cadence and, at the worker's stop, before its final snapshot; the master
  answers ``loadkit_rawlog_ack`` (bytes held, whether the chunk left a gap);
- worker → master ``loadkit_clock`` (t1), master → worker ``loadkit_clock_reply`` (t1, t2, t3).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from typing import Any

import gevent

from loadkit.stats import wallclock
from loadkit.stats.rawlog import raw_log_name
from loadkit.stats.rawship import (
    CLOCK_APPLY_MS,
    ClockEstimate,
    ShippedLog,
    ShipReader,
    clock_warnings,
    token_name,
)

HELLO, MODE, CHUNK, ACK = (
    "loadkit_rawlog_hello",
    "loadkit_rawlog_mode",
    "loadkit_rawlog",
    "loadkit_rawlog_ack",
)
CLOCK, CLOCK_REPLY = "loadkit_clock", "loadkit_clock_reply"
CLOCK_FIRST_SAMPLES, CLOCK_FIRST_GAP_S, CLOCK_GAP_S = 8, 0.25, 5.0


class RawLogShipping:
    """One node's side of the shipping and the clock samples (``stats``: its LocustStats)."""

    def __init__(self, stats: Any) -> None:
        self.stats, self.runner, self.role = stats, stats.runner, stats.role
        # worker
        self.reader: ShipReader | None = None
        self.ship: bool | None = None  # None: the master has not answered the hello yet
        self.run: str | None = None
        self.index: int | None = None
        self.token_path: str | None = None
        self.clock = ClockEstimate()
        self.applied_ns: int | None = None  # the correction this run's wall-clock times carry
        # master
        self.logs: dict[int, ShippedLog] = {}
        self.shared: dict[int, dict[str, Any]] = {}
        self.clocks: dict[int, dict[str, Any]] = {}
        if self.role == "worker":
            self.runner.register_message(MODE, self._on_mode)
            self.runner.register_message(ACK, self._on_ack)
            self.runner.register_message(CLOCK_REPLY, self._on_clock_reply)
        elif self.role == "master":
            self.runner.register_message(HELLO, self._on_hello)
            self.runner.register_message(CHUNK, self._on_chunk)
            self.runner.register_message(CLOCK, self._on_clock)

    # -- worker -----------------------------------------------------------------------------

    def start_worker(self, report_dir: str, path: str, index: int) -> None:
        """This run's raw log at ``path``: say hello with a fresh token, ship once answered."""
        self.reader, self.ship, self.run, self.index = ShipReader(path), None, report_dir, index
        self.token_path = os.path.join(report_dir, token_name(index))
        token = secrets.token_hex(16)
        with open(self.token_path, "w") as f:
            f.write(token)
        self.runner.send_message(HELLO, {"v": 1, "run": report_dir, "worker": index, "token": token})

    def _on_mode(self, environment: Any, msg: Any, **_: Any) -> None:
        if msg.data.get("run") != self.run:
            return
        self.ship = bool(msg.data.get("ship"))
        if self.token_path:
            with contextlib.suppress(OSError):
                os.remove(self.token_path)

    def _on_ack(self, environment: Any, msg: Any, **_: Any) -> None:
        if self.reader is not None and msg.data.get("run") == self.run:
            self.reader.ack(int(msg.data["held"]), bool(msg.data.get("gap")))

    def tick(self) -> None:
        """At the flush cadence: send chunks while the window allows."""
        while self.ship and self.reader is not None and not self.reader.window_full():
            if not self._send_next():
                break
            gevent.sleep(0)

    def ship_rest(self) -> None:
        """At the worker's stop, before its final snapshot: every whole line not yet sent (no
        acknowledgement can arrive while Locust's message loop runs this stop)."""
        while self.ship and self.reader is not None and self._send_next():
            pass

    def _send_next(self) -> bool:
        assert self.reader is not None
        chunk = self.reader.next_chunk()
        if chunk is None:
            return False
        offset, data = chunk
        self.runner.send_message(CHUNK, {"v": 1, "run": self.run, "worker": self.index,
                                         "offset": offset, "data": data})  # fmt: skip
        return True

    def correct_clock(self) -> None:
        """At the worker's test start, before its stats reset: put this run's wall-clock times
        on the master's clock when the estimate says they differ by more than its own error
        (and CLOCK_APPLY_MS); fixed for the run, so its windows and series stay whole."""
        offset, rtt = self.clock.offset_ns, self.clock.rtt_ns
        apply = offset is not None and rtt is not None and abs(offset) - rtt / 2 > CLOCK_APPLY_MS * 1e6
        self.applied_ns = offset if apply and offset is not None else 0
        wallclock.set_correction(self.applied_ns)

    def payload_fields(self) -> dict[str, Any]:
        """What a worker's snapshot adds: its raw log's own count, its clock estimate."""
        clock = self.clock.describe()
        clock["applied_ms"] = None if self.applied_ns is None else self.applied_ns / 1e6
        fields: dict[str, Any] = {"clock": clock}
        raw_log = self.stats.collector.raw_log
        if raw_log is not None:
            try:
                size = os.path.getsize(raw_log.path)
            except OSError:
                size = None
            fields["raw_log"] = {"bytes": size, "lines": raw_log.lines,
                                 "shipped": bool(self.ship), "resends": self.reader.resends if self.reader else 0}  # fmt: skip
        return fields

    def clock_loop(self) -> None:
        sent = 0
        while True:
            gevent.sleep(CLOCK_FIRST_GAP_S if sent < CLOCK_FIRST_SAMPLES else CLOCK_GAP_S)
            self.runner.send_message(CLOCK, {"v": 1, "t1": time.time_ns()})
            sent += 1

    def _on_clock_reply(self, environment: Any, msg: Any, **_: Any) -> None:
        t4 = time.time_ns()
        d = msg.data
        self.clock.add(int(d["t1"]), int(d["t2"]), int(d["t3"]), t4)

    # -- master -----------------------------------------------------------------------------

    def start_master(self) -> None:
        """A new run: forget the last run's shipped logs (its directory is never written again)."""
        for log in self.logs.values():
            log.close()
        self.logs, self.shared = {}, {}

    def _on_clock(self, environment: Any, msg: Any, **_: Any) -> None:
        t2 = time.time_ns()
        self.runner.send_message(CLOCK_REPLY, {"t1": msg.data["t1"], "t2": t2, "t3": time.time_ns()},
                                 client_id=msg.node_id)  # fmt: skip

    def _on_hello(self, environment: Any, msg: Any, **_: Any) -> None:
        run, index = msg.data.get("run"), int(msg.data["worker"])
        if run is None or run != self.stats.report_dir:
            return
        try:
            with open(os.path.join(run, token_name(index))) as f:
                shared = f.read() == msg.data.get("token")
        except OSError:
            shared = False
        if shared:
            self.shared[index] = {"mode": "shared directory (written by the worker itself)"}
        else:
            self.logs.setdefault(index, ShippedLog(os.path.join(run, raw_log_name(index))))
        self.runner.send_message(MODE, {"run": run, "ship": not shared}, client_id=msg.node_id)

    def _on_chunk(self, environment: Any, msg: Any, **_: Any) -> None:
        d = msg.data
        if d.get("run") != self.stats.report_dir:
            return
        log = self.logs.get(int(d["worker"]))
        if log is None:
            return
        result = log.receive(int(d["offset"]), bytes(d["data"]))
        self.runner.send_message(ACK, {"run": d["run"], "held": log.held_bytes, "gap": result == "gap"},
                                 client_id=msg.node_id)  # fmt: skip

    def note_payload(self, payload: Any) -> None:
        """A worker's snapshot: its own raw-log count and clock estimate, by its index."""
        if not isinstance(payload, dict) or not isinstance(payload.get("worker"), int):
            return
        index = payload["worker"]
        if isinstance(payload.get("clock"), dict):
            self.clocks[index] = payload["clock"]
        own = payload.get("raw_log")
        if isinstance(own, dict):
            target = self.logs.get(index)
            if target is not None:
                target.worker_bytes, target.worker_lines = own.get("bytes"), own.get("lines")
            elif index in self.shared:
                self.shared[index].update(worker_bytes=own.get("bytes"), worker_lines=own.get("lines"))

    def pending(self) -> bool:
        """A worker not lost whose copy does not yet hold what its snapshot counted."""
        lost = {w.index for w in self.stats.collector.remote.lost()}
        return any(i not in lost and not log.complete() for i, log in self.logs.items())

    def note_in_report(self, final: bool) -> None:
        """The manifest says what each worker's raw log and clock came to; the final write
        warns of a copy that is a prefix (a lost worker, or lines missing) and of a clock left
        off the master's."""
        collector = self.stats.collector
        lost = {w.index for w in collector.remote.lost()}
        for index, log in self.logs.items():
            log.worker_lost = index in lost
        fields = self.manifest_fields()
        collector.set_manifest_fields(fields)
        if not final:
            return
        for warning in clock_warnings(fields["worker_clocks"]):
            collector.warn(warning)
        for index, log in sorted(self.logs.items()):
            held = f"{log.held_lines} lines ({log.held_bytes} bytes)"
            counted = f"{log.worker_lines} lines ({log.worker_bytes} bytes)"
            if log.worker_lost:
                collector.warn(f"worker {index} was lost: the master holds the first {held} of its raw log; "
                               f"its last snapshot, which report.json counts, had {counted}")  # fmt: skip
            elif not log.complete():
                collector.warn(f"worker {index}'s raw log reached the master incomplete: {held} of the "
                               f"{counted} its final snapshot counted; the master's copy is that prefix")  # fmt: skip
            log.close()

    def manifest_fields(self) -> dict[str, Any]:
        shipping = {f"worker{i}": log.describe() for i, log in sorted(self.logs.items())}
        shipping.update({f"worker{i}": dict(s) for i, s in sorted(self.shared.items())})
        clocks = {f"worker{i}": c for i, c in sorted(self.clocks.items())}
        return {"raw_log_shipping": shipping, "worker_clocks": clocks}

    def close(self) -> None:
        for log in self.logs.values():
            log.close()
