"""One request's life on the wire: token events, the normal end, faults, and its truth record.

``on_tokens`` is called by the runner at the end of each step that emitted tokens for this
request. It stamps ``time.monotonic_ns()`` right before the write and returns that stamp.
When the client does not read (the transport paused writing), tokens are held and sent as one
coalesced event when it drains — the way a real server's send buffer coalesces.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loadkit.sim.engine import Sequence
from loadkit.sim.faults import Fault, fault_point
from loadkit.sim.http import HttpConnection
from loadkit.sim.wire.common import Outcome, StreamFormat

if TYPE_CHECKING:
    from loadkit.sim.server import SimEngine

_mono = time.monotonic_ns


def _nowrite(data: bytes) -> None:
    """Stand-in writer for a connection without a transport (never on the fast path)."""


class ActiveStream:
    """Sink of a Sequence: formats its events and writes them to its connection."""

    __slots__ = (
        "engine", "conn", "fmt", "seq", "truth", "fault", "fault_at", "sent", "pending",
        "streaming", "t_first_step", "chunks", "ended", "trickle", "fast", "pre", "post", "plen",
        "write", "text_of", "start_word", "ts", "ks", "ctext", "coff",
    )  # fmt: skip

    def __init__(
        self,
        engine: SimEngine,
        conn: HttpConnection,
        fmt: StreamFormat,
        seq: Sequence,
        truth: dict[str, Any],
        fault: Fault | None,
    ) -> None:
        self.engine = engine
        self.conn = conn
        self.fmt = fmt
        self.seq = seq
        self.truth = truth
        self.fault = fault
        self.fault_at = fault_point(fault, seq.target_out) if fault else -1
        self.sent = 0  # tokens written
        self.pending = 0  # tokens held back while the client does not read
        self.streaming = fmt.spec.stream
        self.t_first_step: int | None = None
        self.chunks: list[bytes] = []  # non-streamed answer
        self.ended = False
        self.trickle: Trickle | None = None
        conn.on_lost = self._client_gone
        conn.on_resume = self._drained
        # Fast path (most events): fixed bytes around the text, no fault, no pause.
        parts = fmt.parts()
        self.fast = False
        self.pre, self.post = parts or (b"", b"")
        self.plen = len(self.pre) + len(self.post)
        self.write: Callable[[bytes], Any] = conn.transport.write if conn.transport is not None else _nowrite
        self.text_of = engine.corpus.text_of
        # The corpus is doubled and a window starts in its first half, so the text of tokens
        # [i, i+n) is ctext[coff[start+i]:coff[start+i+n]] without wrapping (max_model_len <= its length).
        self.ctext, self.coff = engine.corpus.text, engine.corpus.offsets
        self.start_word = fmt.start_word
        self.ts: array[int] = truth["t_token_ns"]
        self.ks: array[int] = truth["tokens_per_event"]

    # ---- called by the runner ------------------------------------------------------------

    def on_tokens(self, n: int) -> int:
        if self.fast and not self.seq.done and not self.conn.paused:
            i = self.sent
            a = self.start_word + i
            coff = self.coff
            text = self.ctext[coff[a] : coff[a + n]]
            t = _mono()
            self.write(b"%x\r\n%b%b%b\r\n" % (self.plen + len(text), self.pre, text, self.post))
            self.sent = i + n
            self.ts.append(t)
            self.ks.append(n)
            return t
        return self._slow_tokens(n)

    def _slow_tokens(self, n: int) -> int:
        if self.t_first_step is None:
            self.t_first_step = self.engine.runner.step_end_ns
        if not self.streaming:
            return self._collect(n)
        if self.fault_at >= 0 and self.sent + self.pending + n > self.fault_at:
            return self._strike(n)
        if self.conn.paused:
            self.pending += n
            return 0
        return self._write(self.pending + n)

    def _write(self, n: int) -> int:
        seq, fmt = self.seq, self.fmt
        index = self.sent
        first = fmt.start() if index == 0 else b""
        last = seq.done and index + n >= seq.n_out
        # A last write is stamped before its final event is built: its timings end there.
        t = _mono() if last else 0
        payload = first + self._events(index, n, last, t)
        if not last:
            t = _mono()
        if index <= fmt.reasoning_tokens or fmt.spec.tool_name is not None:
            self._channel_truth(index, n, t)
        if self.trickle is not None:
            self.trickle.push(payload, last)
        elif last:
            self.conn.end_stream(payload)
        else:
            self.conn.write_chunk(payload)
        self.sent, self.pending = index + n, 0
        self.ts.append(t)
        self.ks.append(n)
        self.fast = (
            self.pre != b""
            and self.fault_at < 0
            and self.trickle is None
            and self.write is not _nowrite
            and self.sent > fmt.reasoning_tokens
            and fmt.spec.tool_name is None
        )
        if last:
            self._finish(t)
        return t

    def _events(self, index: int, n: int, last: bool, t_last: int) -> bytes:
        """Tokens [index, index + n): reasoning first (split off into its own event where the
        answer starts inside this write), then answer or tool-call text; the last carries the end."""
        fmt = self.fmt
        text_of = self.engine.corpus.text_of
        parts = []
        if index < fmt.reasoning_tokens:
            m = min(n, fmt.reasoning_tokens - index)
            parts.append(fmt.reasoning_token(text_of(fmt.start_word, index, m), index, m))
            index, n = index + m, n - m
        if n:
            text = text_of(fmt.start_word, index, n)
            if last:
                out = self.outcome(t_last)
                parts.append(fmt.last_token(text, index, n, out) + fmt.end(out))
            else:
                parts.append(fmt.token(text, index, n))
        elif last:
            parts.append(fmt.end(self.outcome(t_last)))
        return b"".join(parts)

    def _channel_truth(self, index: int, n: int, t: int) -> None:
        """Write times of the first reasoning and the first answer (or tool-call) token."""
        truth, r = self.truth, self.fmt.reasoning_tokens
        if index == 0 and r > 0:
            truth["t_first_reasoning_ns"] = t
        if index <= r < index + n:
            truth["t_first_tool_ns" if self.fmt.spec.tool_name is not None else "t_first_answer_ns"] = t

    def _collect(self, n: int) -> int:
        fmt = self.fmt
        self.chunks.append(self.engine.corpus.text_of(fmt.start_word, self.sent, n))
        self.sent += n
        # The scheduler may already have finished the sequence in a later step whose tokens
        # the output loop has not written yet: the answer is complete only at n_out.
        if self.seq.done and self.sent >= self.seq.n_out:
            t = _mono()
            out = self.outcome(t)
            headers = self.headers()
            if fmt.spec.item_tokens is not None:  # embeddings, rerank: the answer's own headers (TEI's)
                headers.update(fmt.body_headers(out))
                if self.fault is not None and self.fault.name != "trickle":
                    self._body_fault(fmt.body(b"", out), headers)
                    self.truth["t_token_ns"].append(t)
                    self.truth["tokens_per_event"].append(self.sent)
                    self._finish(t)
                    return t
            self.conn.respond(200, fmt.body(b"".join(self.chunks), out), headers=headers)
            self.truth["t_token_ns"].append(t)
            self.truth["tokens_per_event"].append(self.sent)
            self._finish(t)
            return t
        return 0

    def headers(self) -> dict[str, str]:
        return {"x-request-id": self.truth["request_id"]}

    def outcome(self, t_last: int) -> Outcome:
        """The request's outcome at its last token (written at ``t_last``); its stage times are
        the simulator's own stamps, recorded in the truth log as the format reports them."""
        seq = self.seq
        finish = "length" if seq.n_out >= self.fmt.spec.max_tokens else "stop"
        if self.fmt.spec.tool_name is not None:
            finish = "tool_calls"
        out = Outcome(
            seq.n_prompt,
            seq.n_out,
            seq.cached_tokens or 0,
            finish,
            reasoning_tokens=min(self.fmt.reasoning_tokens, seq.n_out),
            image_tokens=len(self.fmt.spec.image_ids or ()),
        )
        self.stage_times(out, t_last)
        self.truth["server_stages_ms"] = {
            "queue": out.queue_ms,
            "prefill": out.prefill_ms,
            "decode": out.decode_ms,
        }
        self.truth["server_timings"] = self.fmt.server_timings(out)
        return out

    def stage_times(self, out: Outcome, t_last: int) -> None:
        """queue = arrival → admission, prefill = admission → first token written (a streamed
        request's first write; otherwise its answer), decode = first → last token."""
        arrival = self.truth["t_arrival_ns"]
        first = self.ts[0] if self.streaming and len(self.ts) else (self.t_first_step or t_last)
        admit = self.seq.t_admit_ns or first
        out.queue_ms = (admit - arrival) / 1e6
        out.prefill_ms = (first - admit) / 1e6
        out.decode_ms = (t_last - first) / 1e6

    # ---- faults --------------------------------------------------------------------------

    def _strike(self, n: int) -> int:
        """The fault point is inside this emission: send up to it, then misbehave."""
        fault = self.fault
        assert fault is not None
        before = self.fault_at - self.sent - self.pending
        t = self._write(self.pending + before) if before > 0 or self.pending else 0
        if self.ended:
            return t
        name = fault.name
        self.fault_at = -1
        self.truth["fault"] = name
        if name == "malformed":
            self.conn.write_chunk(self.fmt.malformed())
            rest = n - before
            return self._write(rest) if rest else t
        self._stop_engine_side()
        if name == "drop_mid_stream":
            self.conn.abort()
        elif name == "close_early":
            self.conn.end_stream()
        elif name == "error_event":
            self.conn.end_stream(self.fmt.error("simulated engine error (loadkit sim fault error_event)"))
        elif name == "stall_after":
            loop = asyncio.get_running_loop()
            loop.call_later(self.engine.options.stall_seconds, self.conn.abort)
        self._finish(_mono())
        return t

    def _body_fault(self, body: bytes, headers: dict[str, str]) -> None:
        """A non-streamed answer's fault, when it is ready: ``drop_mid_stream`` resets the
        connection before any byte, ``close_early`` closes it halfway through the body (its
        Content-Length promised more), ``malformed`` answers a body no parser accepts,
        ``error_event`` an error object in a 200, ``stall_after`` never answers (the connection
        is cut after --stall-seconds)."""
        assert self.fault is not None
        name, conn = self.fault.name, self.conn
        self.truth["fault"] = name
        conn.on_lost = None
        if name == "drop_mid_stream":
            conn.abort()
        elif name == "close_early":
            conn.keep_alive = False
            head = conn._head(200, {"Content-Type": self.fmt.content_type, **headers},
                              b"Content-Length: %d\r\n" % len(body))  # fmt: skip
            conn.write_raw(head + body[: len(body) // 2])
            conn.close()
        elif name == "malformed":
            conn.respond(200, self.fmt.malformed(), self.fmt.content_type, headers)
        elif name == "error_event":
            conn.respond(200, self.fmt.error("simulated engine error (loadkit sim fault error_event)"),
                         self.fmt.content_type, headers)  # fmt: skip
        elif name == "stall_after":
            asyncio.get_running_loop().call_later(self.engine.options.stall_seconds, conn.abort)

    def _stop_engine_side(self) -> None:
        self.conn.on_lost = None
        self.engine.scheduler.abort(self.seq)

    # ---- endings -------------------------------------------------------------------------

    def _drained(self) -> None:
        if self.pending and not self.ended:
            self._write(self.pending)

    def _client_gone(self) -> None:
        if self.ended:
            return
        self.engine.scheduler.abort(self.seq)
        self.truth["client_disconnected"] = True
        self._finish(_mono())

    def _finish(self, t_end: int) -> None:
        if self.ended:
            return
        self.ended = True
        truth = self.truth
        truth["t_end_ns"] = t_end
        truth["prompt_tokens"] = self.seq.n_prompt
        truth["cached_tokens"] = self.seq.cached_tokens
        # A non-streamed kind's one "token" is the end of its prefill, not output.
        truth["completion_tokens"] = self.sent if self.fmt.spec.item_tokens is None else 0
        # Break the sequence <-> stream cycle so reference counting frees both now: left to
        # the garbage collector, 2,000 streams' worth made full collections stall ~35 ms.
        self.seq.sink = None
        self.engine.record_truth(truth)


class Trickle:
    """Writes a request's bytes a few at a time (the ``trickle`` fault)."""

    def __init__(self, conn: HttpConnection, bytes_per_write: int, interval_s: float) -> None:
        self.conn = conn
        self.size = bytes_per_write
        self.interval = interval_s
        self.buf = bytearray()
        self.close_after = False
        self.handle: asyncio.TimerHandle | None = None

    def push(self, payload: bytes, last: bool) -> None:
        self.buf += b"%x\r\n%s\r\n" % (len(payload), payload)
        if last:
            self.buf += b"0\r\n\r\n"
            self.close_after = True
        if self.handle is None:
            self._tick()

    def _tick(self) -> None:
        self.handle = None
        if self.conn.closed:
            return
        piece, self.buf = bytes(self.buf[: self.size]), self.buf[self.size :]
        self.conn.write_raw(piece)
        if self.buf:
            self.handle = asyncio.get_running_loop().call_later(self.interval, self._tick)
        elif self.close_after:
            self.conn._done()
