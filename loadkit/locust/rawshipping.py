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
  answers ``loadkit_rawlog_ack`` (bytes held, whether the chunk left a gap). Never more than
  the window unacknowledged, at the stop too; nothing acknowledged for RESEND_AFTER_S: sent
  again from the acknowledged offset;
- worker → master ``loadkit_rawlog_lost`` (host name, the worker indexes of the raw logs on its
  disk that it did not write), only from a worker process that ships its log and found such
  logs beside it (a restarted container whose volume survived), once the master answered its
  hello, every RESUME_ASK_S for RESUME_ASK_FOR_S or until each is resumed: the master answers
  ``loadkit_rawlog_lost_reply`` (the run, those of the indexes that are lost workers that said
  hello from that host and are not resumed yet). A fresh worker never asks;
- worker → master ``loadkit_rawlog_resume`` (worker index of the log, host name, the log's
  size on its disk): a process that finds such a log on its disk asks what the master holds
  of it; the master answers ``loadkit_rawlog_resumed`` (offset held and the SHA-256 of
  those bytes, or nothing: not that worker's host, or not its log), and the process ships
  from that offset once its file's prefix has that digest;
- worker → master ``loadkit_clock`` (t1), master → worker ``loadkit_clock_reply`` (t1, t2, t3).

At the worker's stop, Locust's message loop is the greenlet running the stop, so no answer
would reach the handlers: ``ship_rest`` reads the link itself for its bounded time, handles the
answers addressed to this module and hands every other message back to Locust, in order, once
it is done.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any

import gevent

from loadkit.stats import wallclock
from loadkit.stats.rawlog import raw_log_name
from loadkit.stats.rawship import (
    CLOCK_APPLY_MS,
    RESEND_AFTER_S,
    ClockEstimate,
    ShippedLog,
    ShipReader,
    clock_warnings,
    prefix_matches,
    token_name,
)

HELLO, MODE, CHUNK, ACK = (
    "loadkit_rawlog_hello",
    "loadkit_rawlog_mode",
    "loadkit_rawlog",
    "loadkit_rawlog_ack",
)
RESUME, RESUMED = "loadkit_rawlog_resume", "loadkit_rawlog_resumed"
LOST_LOGS, LOST_LOGS_REPLY = "loadkit_rawlog_lost", "loadkit_rawlog_lost_reply"
RESUME_ASK_S, RESUME_ASK_FOR_S = 2.0, 60.0
CLOCK, CLOCK_REPLY = "loadkit_clock", "loadkit_clock_reply"
_RAW_LOG_NAME = re.compile(r"requests\.worker(\d+)\.jsonl")  # raw_log_name(N)
# At the stop: the share of --final-report-wait the worker spends shipping (its final snapshot
# must still reach the master within that wait), and its resend timeout there.
STOP_SHARE, STOP_RESEND_S = 0.5, 1.0
CLOCK_FIRST_SAMPLES, CLOCK_FIRST_GAP_S, CLOCK_GAP_S = 8, 0.25, 5.0

logger = logging.getLogger("loadkit.stats")


@dataclass
class Resumed:
    """A log an earlier process of this host left, which this process ships the rest of."""

    run: str
    index: int
    path: str
    reader: ShipReader | None = None
    ship: bool | None = None  # None: asked, not answered yet
    refused: str | None = None  # why the master, or the file, refused


class RawLogShipping:
    """One node's side of the shipping and the clock samples (``stats``: its LocustStats)."""

    def __init__(self, stats: Any) -> None:
        self.stats, self.runner, self.role = stats, stats.runner, stats.role
        self.started_ns = time.time_ns()  # this process's start, near enough (others_logs)
        # worker
        self.reader: ShipReader | None = None
        self.ship: bool | None = None  # None: the master has not answered the hello yet
        self.run: str | None = None
        self.index: int | None = None
        self.token_path: str | None = None
        self.clock = ClockEstimate()
        self.applied_ns: int | None = None  # the correction this run's wall-clock times carry
        self.resumed: dict[int, Resumed] = {}  # earlier processes' logs this one ships the rest of
        self._deferred: list[Any] = []  # Locust's messages read while shipping at the stop
        # master
        self.logs: dict[int, ShippedLog] = {}
        self.shared: dict[int, dict[str, Any]] = {}
        self.clocks: dict[int, dict[str, Any]] = {}
        if self.role == "worker":
            self.runner.register_message(MODE, self._on_mode)
            self.runner.register_message(ACK, self._on_ack)
            self.runner.register_message(CLOCK_REPLY, self._on_clock_reply)
            self.runner.register_message(RESUMED, self._on_resumed)
            self.runner.register_message(LOST_LOGS_REPLY, self._on_lost_logs)
        elif self.role == "master":
            self.runner.register_message(HELLO, self._on_hello)
            self.runner.register_message(RESUME, self._on_resume)
            self.runner.register_message(LOST_LOGS, self._on_lost_logs_asked)
            self.runner.register_message(CHUNK, self._on_chunk)
            self.runner.register_message(CLOCK, self._on_clock)

    # -- worker -----------------------------------------------------------------------------

    def _resume_loop_logged(self, folder: str) -> None:
        try:
            self.resume_loop(folder)
        except Exception as exc:  # the link closed (the worker quit): the shipping of its own log is done
            logger.debug("loadkit: stopped asking the master for this host's lost raw logs: %s", exc)

    def start_worker(self, report_dir: str, path: str, index: int) -> None:
        """This run's raw log at ``path``: say hello with a fresh token, ship once answered."""
        self.reader, self.ship, self.run, self.index = ShipReader(path), None, report_dir, index
        self.token_path = os.path.join(report_dir, token_name(index))
        token = secrets.token_hex(16)
        with open(self.token_path, "w") as f:
            f.write(token)
        self.runner.send_message(HELLO, {"v": 1, "run": report_dir, "worker": index, "token": token,
                                         "node": socket.gethostname()})  # fmt: skip

    def others_logs(self, folder: str) -> list[int]:
        """The worker indexes of the raw logs in ``folder`` (this process's view of the run's
        directory) that this process did not write nor resume and that nothing wrote since it
        started: an earlier process's on this host (a restarted container whose volume
        survived), not a live sibling's (worker processes of one host sharing a volume)."""
        try:
            names = os.listdir(folder)
        except OSError:
            return []
        found = []
        for name in names:
            m = _RAW_LOG_NAME.fullmatch(name)
            if m is None or int(m.group(1)) == self.index or int(m.group(1)) in self.resumed:
                continue
            with contextlib.suppress(OSError):
                if os.stat(os.path.join(folder, name)).st_mtime_ns < self.started_ns:
                    found.append(int(m.group(1)))
        return sorted(found)

    def resume_loop(self, folder: str) -> None:
        """Only when ``folder`` holds raw logs this process did not write (``others_logs``):
        ask the master, every RESUME_ASK_S for RESUME_ASK_FOR_S or until each is resumed, which
        of them are of lost workers of the running run that said hello from this host (it marks
        a worker lost after its heartbeat timeout), and resume those (``_on_lost_logs``). A
        worker with no such log asks nothing."""
        found = self.others_logs(folder)
        deadline = time.monotonic() + RESUME_ASK_FOR_S
        while found and time.monotonic() < deadline:
            self.runner.send_message(LOST_LOGS, {"v": 1, "node": socket.gethostname(), "workers": found})
            gevent.sleep(RESUME_ASK_S)
            found = [i for i in found if i not in self.resumed]

    def _on_lost_logs(self, environment: Any, msg: Any, **_: Any) -> None:
        run = msg.data.get("run")
        for index in msg.data.get("workers") or []:
            path = self.local_path(run, int(index))
            if int(index) not in self.resumed and os.path.exists(path):
                logger.info(
                    "loadkit: resuming the shipping of %s, left by an earlier process on this host", path
                )
                self.resume_worker(run, path, int(index))

    def local_path(self, run: str, index: int) -> str:
        """Where worker ``index``'s log of ``run`` is on this process's disk: the path the master
        names (a worker sees its own volume where the master has its)."""
        return os.path.join(run, raw_log_name(index))

    def resume_worker(self, report_dir: str, path: str, index: int) -> Resumed:
        """This process found worker ``index``'s raw log of the run ``report_dir`` at ``path``
        (a restarted container whose volume survived): ask the master what it holds of it and
        ship the rest from there (``_on_resumed``); nothing is sent until it answers."""
        entry = Resumed(report_dir, index, path)
        self.resumed[index] = entry
        try:
            size = os.path.getsize(path)
        except OSError as exc:
            entry.ship, entry.refused = False, f"the log is gone: {exc}"
            return entry
        self.runner.send_message(RESUME, {"v": 1, "run": report_dir, "worker": index,
                                          "node": socket.gethostname(), "bytes": size})  # fmt: skip
        return entry

    def _on_resumed(self, environment: Any, msg: Any, **_: Any) -> None:
        d = msg.data
        entry = self.resumed.get(int(d.get("worker", -1)))
        if entry is None or d.get("run") != entry.run or entry.ship is not None:
            return
        held, digest = d.get("held"), d.get("digest")
        if held is None:
            entry.ship, entry.refused = False, str(d.get("why") or "refused by the master")
        elif not prefix_matches(entry.path, int(held), str(digest)):
            entry.ship = False
            entry.refused = f"the log here does not begin with the {held} bytes the master holds"
        else:
            entry.reader, entry.ship = ShipReader(entry.path, start=int(held)), True
        if entry.refused:
            logger.warning("loadkit: not resuming %s: %s", entry.path, entry.refused)

    def _streams(self) -> list[tuple[str | None, int | None, ShipReader]]:
        """What this process ships: its own log, and the logs it resumed."""
        out: list[tuple[str | None, int | None, ShipReader]] = []
        if self.ship and self.reader is not None:
            out.append((self.run, self.index, self.reader))
        out += [(r.run, r.index, r.reader) for r in self.resumed.values() if r.ship and r.reader is not None]
        return out

    def _on_mode(self, environment: Any, msg: Any, **_: Any) -> None:
        if msg.data.get("run") != self.run:
            return
        asked, self.ship = self.ship is not None, bool(msg.data.get("ship"))
        if self.token_path:
            with contextlib.suppress(OSError):
                os.remove(self.token_path)
        if self.ship and not asked and self.reader is not None:
            # Its own directory (not the master's): logs there it did not write may be a lost
            # worker's of this host, to resume. Most workers find none and ask nothing.
            folder = os.path.dirname(self.reader.path)
            if self.others_logs(folder):
                gevent.spawn(self._resume_loop_logged, folder)

    def _on_ack(self, environment: Any, msg: Any, **_: Any) -> None:
        d = msg.data
        index = d.get("worker")
        reader = None
        if (index is None or index == self.index) and d.get("run") == self.run:
            reader = self.reader
        elif index is not None and index in self.resumed and self.resumed[index].run == d.get("run"):
            reader = self.resumed[index].reader
        if reader is not None:
            reader.ack(int(d["held"]), bool(d.get("gap")))

    def tick(self, resend_after: float = RESEND_AFTER_S) -> None:
        """At the flush cadence, for each log shipped: send again from the acknowledged offset
        when nothing was acknowledged for ``resend_after`` s, then send chunks while the window
        allows."""
        for run, index, reader in self._streams():
            reader.resend_due(resend_after)
            while not reader.window_full():
                if not self._send_next(run, index, reader):
                    break
                gevent.sleep(0)

    def ship_rest(self, timeout: float | None = None) -> bool:
        """At the worker's stop, before its final snapshot: every whole line, in the same
        window, each acknowledged, for at most ``timeout`` s (default: STOP_SHARE of
        --final-report-wait, so the final snapshot still reaches the master within its wait).
        True when the master acknowledged every line; on a timeout the master's copy is a
        prefix, which its report says."""
        if not self._streams():
            return not self.ship
        if timeout is None:
            timeout = STOP_SHARE * float(
                getattr(getattr(self.stats, "options", None), "final_report_wait", 5.0)
            )
        deadline = time.monotonic() + timeout
        try:
            while True:
                done = True
                for run, index, reader in self._streams():
                    reader.resend_due(STOP_RESEND_S)
                    more = True
                    while not reader.window_full():
                        if not self._send_next(run, index, reader):
                            more = False
                            break
                    done = done and not more and reader.all_acked()
                if done:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._pump(min(left, 0.1))
        finally:
            self._hand_back()

    def _pump(self, seconds: float) -> None:
        """Wait up to ``seconds`` for one message on the worker's link to the master (Locust's
        message loop is running this stop): this module's answers are handled here, any other
        is kept for Locust (``_hand_back``). Without a link (one process): a sleep."""
        client = getattr(self.runner, "client", None)
        if client is None or not hasattr(client, "recv"):
            gevent.sleep(seconds)
            return
        msg = None
        with gevent.Timeout(seconds, False):  # only while waiting: a message is taken whole
            msg = client.recv()
        if msg is None:
            return
        own = {ACK: self._on_ack, CLOCK_REPLY: self._on_clock_reply, MODE: self._on_mode,
               RESUMED: self._on_resumed}  # fmt: skip
        handler = own.get(msg.type)
        if handler is not None:
            handler(environment=getattr(self.runner, "environment", None), msg=msg)
        else:
            self._deferred.append(msg)

    def _hand_back(self) -> None:
        """Locust's messages read while shipping, handled by Locust in their order after the stop."""
        deferred, self._deferred = self._deferred, []
        handle = getattr(self.runner, "handle_message", None)
        if deferred and handle is not None:

            def replay() -> None:
                for msg in deferred:
                    handle(msg)

            gevent.spawn(replay)

    def _send_next(self, run: str | None, index: int | None, reader: ShipReader) -> bool:
        chunk = reader.next_chunk()
        if chunk is None:
            return False
        offset, data = chunk
        self.runner.send_message(CHUNK, {"v": 1, "run": run, "worker": index,
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
            log = self.logs.setdefault(index, ShippedLog(os.path.join(run, raw_log_name(index))))
            log.node = msg.data.get("node")
            log.open()
        self.runner.send_message(MODE, {"run": run, "ship": not shared}, client_id=msg.node_id)

    def _on_lost_logs_asked(self, environment: Any, msg: Any, **_: Any) -> None:
        """A worker process asks which lost workers of this run said hello from its host
        (among ``workers``, the logs it found on its disk, when it names them)."""
        run, node = self.stats.report_dir, msg.data.get("node")
        if run is None or node is None:
            return
        lost = {w.index for w in self.stats.collector.remote.lost()}
        if isinstance(msg.data.get("workers"), list):
            lost &= {int(i) for i in msg.data["workers"]}
        mine = [i for i, shipped in sorted(self.logs.items())
                if i in lost and shipped.node == node and shipped.resumed_at is None]  # fmt: skip
        if mine:
            self.runner.send_message(LOST_LOGS_REPLY, {"run": run, "workers": mine}, client_id=msg.node_id)

    def _on_resume(self, environment: Any, msg: Any, **_: Any) -> None:
        """A process found worker N's log on its disk: what is held of it, if it is that
        worker's host and log (ShippedLog.resume)."""
        d = msg.data
        run, index = d.get("run"), int(d["worker"])
        if run is None or run != self.stats.report_dir:
            return
        log = self.logs.get(index)
        answer: dict[str, Any] = {"run": run, "worker": index, "held": None}
        if log is None:
            answer["why"] = f"the master ships no raw log of worker {index} in this run"
        else:
            held = log.resume(d.get("node"), int(d.get("bytes") or 0))
            if held is None:
                answer["why"] = (f"worker {index}'s log came from host {log.node!r}, holds {log.held_bytes} bytes: "
                                 "not this host's, or not this log")  # fmt: skip
            else:
                answer["held"], answer["digest"] = held
        self.runner.send_message(RESUMED, answer, client_id=msg.node_id)

    def _on_chunk(self, environment: Any, msg: Any, **_: Any) -> None:
        d = msg.data
        if d.get("run") != self.stats.report_dir:
            return
        log = self.logs.get(int(d["worker"]))
        if log is None:
            return
        result = log.receive(int(d["offset"]), bytes(d["data"]))
        self.runner.send_message(ACK, {"run": d["run"], "worker": int(d["worker"]), "held": log.held_bytes,
                                       "gap": result == "gap"}, client_id=msg.node_id)  # fmt: skip

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
        """A worker not lost whose copy does not yet hold what its snapshot counted, or a
        resumed log not yet whole."""
        lost = {w.index for w in self.stats.collector.remote.lost()}
        return any((i not in lost or log.resumed_at is not None) and not log.complete()
                   for i, log in self.logs.items())  # fmt: skip

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
            name = os.path.basename(log.path)
            if log.worker_lost and log.resumed_at is not None and log.complete():
                collector.warn(f"worker {index} was lost; a process restarted on {log.node} shipped the rest "
                               f"of its raw log from byte {log.resumed_at}: {name} is whole, {held}; "
                               f"its last snapshot, which report.json counts, had {counted}")  # fmt: skip
            elif log.worker_lost:
                collector.warn(f"worker {index} was lost: the master holds the first {held} of its raw log; "
                               f"its last snapshot, which report.json counts, had {counted}; "
                               f"{name} in the report directory is that prefix")  # fmt: skip
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
