"""The stream timer against a scripted loopback server: timing truth and outcome classification."""

from __future__ import annotations

import socket

import orjson
import pytest

from loadkit import types as t
from loadkit.client.httpstream import ConnectionPool
from loadkit.client.timer import Timeouts, run_request
from loadkit.engines.openai import OpenAIAdapter
from loadkit.records import e2e_ms, itl_chunk_ms, tpot_ms, ttft_ms
from tests.helpers.openai_chunks import DONE, REQ, ROLE, USAGE, delta, sse
from tests.helpers.scripted_server import END_CHUNK, Script, ScriptedServer, ScriptedServerProcess, chunk


def serve(script: Script):
    return ScriptedServer(lambda _req: script)


def test_timestamps_match_server_writes_and_metrics_agree():
    gaps = [0.05, 0.02, 0.02, 0.02, 0.02]
    writes = (
        [(0.0, ROLE)]
        + [(g, delta(f"w{i}")) for i, g in enumerate(gaps)]
        + [(0.0, USAGE), (0.0, DONE), (0.0, END_CHUNK)]
    )
    with ScriptedServerProcess(Script(writes=writes)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
        truth = srv.write_times()
    assert rec.outcome == t.OK, rec.error
    token_writes = truth[1:6]
    assert len(rec.event_t_ns) == 5
    for measured, sent in zip(rec.event_t_ns, token_writes, strict=True):
        # Same monotonic clock in both processes: arrival within a few ms of the write, never before.
        assert 0 <= measured - sent < 5_000_000
    assert rec.n_out == 5 and rec.n_out_source == "usage"
    assert rec.n_in == 11 and rec.cached_tokens == 3
    # The metrics agree with what the server actually sent (its sleeps overshoot on a busy box).
    assert ttft_ms(rec) >= 50
    assert ttft_ms(rec) == pytest.approx((token_writes[0] - rec.t_send_ns) / 1e6, abs=5)
    assert tpot_ms(rec) == pytest.approx((token_writes[-1] - token_writes[0]) / 4e6, abs=1.5)
    true_gaps = [(b - a) / 1e6 for a, b in zip(token_writes, token_writes[1:], strict=False)]
    assert itl_chunk_ms(rec) == pytest.approx(true_gaps, abs=5)
    assert e2e_ms(rec) >= ttft_ms(rec) + 4 * 19
    assert rec.text == "w0w1w2w3w4"


def test_request_id_header_sent_and_kept():
    with serve(Script(writes=[(0, delta("a")), (0, DONE), (0, END_CHUNK)])) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ, request_id="abc123")
        sent = srv.requests[0]
    assert b"X-Request-ID: abc123" in sent
    assert rec.request_id == "abc123"


def test_role_only_chunk_is_not_first_token():
    writes = [(0.0, ROLE), (0.04, delta("x")), (0, DONE), (0, END_CHUNK)]
    with serve(Script(writes=writes)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
    assert rec.outcome == t.OK
    assert ttft_ms(rec) >= 35
    assert rec.n_out == 1 and rec.n_out_source == "events"
    assert tpot_ms(rec) is None  # one token: TPOT not measured, never 0


@pytest.mark.parametrize(
    ("writes", "outcome"),
    [
        ([(0, delta("a"))], t.DISCONNECTED),  # socket closed, no terminating chunk
        ([(0, delta("a")), (0, END_CHUNK)], t.INCOMPLETE),  # clean end of body, no [DONE]
        ([(0, delta("a")), (0, sse({"error": {"message": "overloaded"}}))], t.IN_BAND_ERROR),
        ([(0, delta("a")), (0, chunk(b"data: {not json\n\n"))], t.MALFORMED_STREAM),
        ([(0, chunk(b"data: \xff\xfe\n\n"))], t.MALFORMED_STREAM),
        ([(0, b"zz\r\n")], t.MALFORMED_STREAM),  # bad chunk size
        ([], t.DISCONNECTED),  # nothing after the headers
    ],
)
def test_outcomes(writes, outcome):
    with serve(Script(writes=writes)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
    assert rec.outcome == outcome, rec.error
    assert rec.error


FINISH = sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
              "usage": {"prompt_tokens": 11, "completion_tokens": 2}})  # fmt: skip


@pytest.mark.parametrize(
    ("writes", "outcome", "end"),
    [
        ([(0, delta("a")), (0.01, delta("b")), (0, DONE), (0, END_CHUNK)], t.OK, "marker"),
        # Many servers send no [DONE]: a clean close after the finish chunk is the normal end.
        ([(0, delta("a")), (0.01, delta("b")), (0, FINISH), (0, END_CHUNK)], t.OK, "close"),
        (
            [(0, delta("a")), (0.01, delta("b")), (0, USAGE), (0, END_CHUNK)],
            t.OK,
            "close",
        ),  # usage-only chunk
        ([(0, delta("a")), (0.01, delta("b")), (0, END_CHUNK)], t.INCOMPLETE, None),
        ([(0, delta("a")), (0.01, delta("b")), (0, FINISH)], t.DISCONNECTED, None),  # no terminating chunk
    ],
)
def test_how_a_stream_ended(writes, outcome, end):
    with serve(Script(writes=writes)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
    assert (rec.outcome, rec.end) == (outcome, end), rec.error
    if outcome == t.OK:
        assert ttft_ms(rec) is not None and len(rec.event_t_ns) == 2 and e2e_ms(rec) >= ttft_ms(rec)


def test_close_delimited_body_after_the_finish_chunk_is_ok():
    """HTTP/1.0-style: no length, no chunking, the body ends when the server closes."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    raw = [b"data: " + orjson.dumps({"choices": [{"delta": {"content": c}}]}) + b"\n\n" for c in "ab"]
    finish = b'data: {"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"completion_tokens":2}}\n\n'
    with serve(Script(head=head, writes=[(0, raw[0]), (0.01, raw[1]), (0, finish)])) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
    assert (rec.outcome, rec.end, rec.finish_reason, rec.n_out) == (t.OK, "close", "stop", 2), rec.error
    with serve(Script(head=head, writes=[(0, raw[0]), (0.01, raw[1])])) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
    assert rec.outcome == t.INCOMPLETE


def test_utf8_character_split_across_writes():
    raw = f"data: {orjson.dumps({'choices': [{'delta': {'content': 'é€😀'}}]}).decode()}\n\n".encode()
    cut = raw.index("€".encode()) + 1
    writes = [(0, chunk(raw[:cut])), (0.01, chunk(raw[cut:])), (0, DONE), (0, END_CHUNK)]
    with serve(Script(writes=writes)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
    assert rec.outcome == t.OK and rec.text == "é€😀"


def test_http_error_status_and_body():
    head = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nContent-Length: 17\r\n\r\n"
    with serve(Script(head=head, writes=[(0, b'{"error":"slow"}\n')])) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
    assert rec.outcome == "http_error:429"
    assert rec.http_status == 429 and rec.error == 'HTTP 429: {"error":"slow"}'
    assert rec.end is None


def test_connection_refused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    rec = run_request(OpenAIAdapter(), f"http://127.0.0.1:{port}", REQ)
    assert rec.outcome == t.CONNECT_ERROR


def test_first_token_timeout_and_total_timeout():
    with serve(Script(writes=[(0.5, delta("late"))])) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ, timeouts=Timeouts(first_token_s=0.1, total_s=5))
    assert rec.outcome == t.TIMEOUT_FIRST_TOKEN
    writes = [(0, delta("a")), (0.5, delta("b"))]
    with serve(Script(writes=writes)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ, timeouts=Timeouts(first_token_s=1, total_s=0.2))
    assert rec.outcome == t.TIMEOUT_TOTAL
    assert len(rec.event_t_ns) == 1


def test_keep_alive_connection_is_reused():
    writes = [(0, delta("a")), (0, DONE), (0, END_CHUNK)]
    with serve(Script(writes=writes, close=False)) as srv:
        pool = ConnectionPool()
        recs = [run_request(OpenAIAdapter(), srv.url, REQ, pool=pool) for _ in range(3)]
        pool.close()
    assert [r.outcome for r in recs] == [t.OK] * 3
    assert recs[0].t_connected_ns is not None
    assert recs[1].t_connected_ns is None and recs[2].t_connected_ns is None


def test_several_events_in_one_read_are_counted_as_coalesced():
    writes = [(0, delta("a") + delta("b") + delta("c")), (0, DONE), (0, END_CHUNK)]
    with serve(Script(writes=writes)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
    assert rec.outcome == t.OK and rec.n_out == 3
    assert rec.coalesced_reads == 1


def test_cancel_records_cancelled_and_reraises():
    import threading

    class Stop(BaseException):
        pass

    seen = []
    writes = [(0, delta("a")), (0.3, delta("b")), (0, DONE), (0, END_CHUNK)]
    with serve(Script(writes=writes)) as srv:
        adapter = OpenAIAdapter()
        parser_factory = adapter.new_parser

        def raising_parser():
            p = parser_factory()
            orig = p.parse

            def parse(data, event=None):
                ev = orig(data, event)
                if ev is not None and ev.text == "a":
                    threading.Timer(0, lambda: None).start()
                    raise Stop()
                return ev

            p.parse = parse
            return p

        adapter.new_parser = raising_parser
        with pytest.raises(Stop):
            run_request(adapter, srv.url, REQ, sink=seen.append)
    assert len(seen) == 1 and seen[0].outcome == t.CANCELLED
    assert seen[0].t_end_ns is not None


# ---- kernel receive timestamps ------------------------------------------------------------


def _tcp_pair():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    cli = socket.create_connection(srv.getsockname())
    peer, _ = srv.accept()
    srv.close()
    return cli, peer


def test_kernel_stamp_is_arrival_time_not_read_time():
    import time

    from loadkit.client.stamps import enable_kernel_timestamps, kernel_timestamps_on, recv_stamped

    cli, peer = _tcp_pair()
    try:
        assert enable_kernel_timestamps(cli) and kernel_timestamps_on(cli)
        t_write = time.perf_counter_ns()
        peer.sendall(b"data: x\n\n")
        time.sleep(0.05)  # the reader is "busy": the data waits in the socket
        data, t_kernel = recv_stamped(cli, kernel=True)
        t_read = time.perf_counter_ns()
        peer.sendall(b"y")
        time.sleep(0.02)
        _, t_user = recv_stamped(cli, kernel=False)
    finally:
        cli.close()
        peer.close()
    assert data == b"data: x\n\n"
    assert t_write - 1_000_000 <= t_kernel <= t_write + 5_000_000  # arrival, within the clock mapping error
    assert t_read - t_kernel >= 40_000_000  # a read-time stamp would have been ≥ 50 ms late
    assert t_user - t_write >= 60_000_000  # user-space stamps are read times


def test_arrival_clock_maps_wall_to_mono_and_refreshes():
    from loadkit.client.stamps import OFFSET_REFRESH_NS, ArrivalClock

    state = {"mono": 1_000, "wall": 5_000_000}

    def mono() -> int:
        state["mono"] += 1
        return state["mono"]

    def wall() -> int:
        return state["wall"] + state["mono"]

    clock = ArrivalClock(mono=mono, wall=wall)
    assert clock.to_mono(5_000_000 + 2_000, now_mono=0) == 2_000
    state["wall"] += 7  # wall clock stepped: the offset follows only at the next refresh
    assert clock.to_mono(5_000_000 + 2_000, now_mono=10) == 2_000
    assert clock.to_mono(5_000_000 + 2_000, now_mono=OFFSET_REFRESH_NS + 1) == 2_000 - 7


def test_timer_without_kernel_stamps_still_measures(monkeypatch):
    monkeypatch.setenv("LOADKIT_KERNEL_TIMESTAMPS", "0")
    writes = [(0.0, ROLE), (0.02, delta("a")), (0.02, delta("b")), (0.0, DONE), (0.0, END_CHUNK)]
    with ScriptedServerProcess(Script(writes=writes)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
        truth = srv.write_times()
    assert rec.outcome == t.OK, rec.error
    assert len(rec.event_t_ns) == 2
    for measured, sent in zip(rec.event_t_ns, truth[1:3], strict=True):
        assert 0 <= measured - sent < 5_000_000


def test_chunked_body_reader_any_split():
    """The offset-based chunked decoder gives the same body however the bytes are split."""
    import random

    from loadkit.client.httpstream import BodyReader

    rng = random.Random(7)
    for _ in range(200):
        pieces = [
            bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(rng.randrange(1, 8))
        ]
        wire = b"".join(b"%x;ext=1\r\n%b\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        cuts = sorted(rng.sample(range(1, len(wire)), k=min(len(wire) - 1, rng.randrange(0, 12))))
        reader = BodyReader(chunked=True, remaining=None)
        got = b"".join(reader.feed(wire[a:b]) for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True))
        assert got == b"".join(pieces)
        assert reader.complete


def test_chunked_body_reader_one_chunk_per_read_fast_path():
    """Whole chunks read one at a time (what engines write, the decoder's fast path) give the
    same body as the general path, mixed with splits, a last chunk and a chunk extension."""
    import random

    from loadkit.client.httpstream import BodyReader

    rng = random.Random(11)
    for _ in range(200):
        pieces = [
            bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
            for _ in range(rng.randrange(1, 8))
        ]
        fmt = rng.choice([b"%x", b"%X", b"%04x"])
        chunks = [(fmt % len(p)) + b"\r\n" + p + b"\r\n" for p in pieces]
        if rng.random() < 0.3:
            chunks[0] = b"%x;ext=1\r\n%b\r\n" % (len(pieces[0]), pieces[0])
        reads: list[bytes] = []
        for piece in [*chunks, b"0\r\n\r\n"]:
            if rng.random() < 0.2 and len(piece) > 2:  # now and then a split piece
                cut = rng.randrange(1, len(piece))
                reads += [piece[:cut], piece[cut:]]
            else:
                reads.append(piece)
        reader = BodyReader(chunked=True, remaining=None)
        assert b"".join(reader.feed(r) for r in reads) == b"".join(pieces)
        assert reader.complete
    # A chunk whose size does not match what follows is a framing error, not a fast-path body.
    from loadkit.client.httpstream import ProtocolError

    with pytest.raises(ProtocolError):
        BodyReader(chunked=True, remaining=None).feed(b"3\r\nabcdef\r\n")


def test_chunked_body_reader_rejects_bad_framing():
    from loadkit.client.httpstream import BodyReader, ProtocolError

    with pytest.raises(ProtocolError, match="bad chunk size"):
        BodyReader(chunked=True, remaining=None).feed(b"zz\r\n")
    with pytest.raises(ProtocolError, match="missing CRLF"):
        BodyReader(chunked=True, remaining=None).feed(b"2\r\nabXY\r\n")
    with pytest.raises(ProtocolError, match="too long"):
        BodyReader(chunked=True, remaining=None).feed(b"1" * 5000)


FAST_SSE_STREAMS = [
    b'data: {"a": 1}\n\ndata: {"b": "\xc3\xa9\xe2\x82\xac"}\n\ndata: [DONE]\n\n',
    b": keep-alive\n\ndata: x\n\nevent: error\ndata: boom\n\ndata: y\n\n",
    b"data: line1\ndata: line2\n\n\n\ndata:nospace\n\nid: 7\ndata: z\n\n",
    b"data: a\r\n\r\ndata: b\r\rdata: c\n\n",
    b"\xef\xbb\xbfdata: bom\n\ndata: next\n\n",
    b"data: unterminated at close\n",
    b"retry: 10\nfoo: bar\ndata: q\n\n",
]


@pytest.mark.parametrize("wire", FAST_SSE_STREAMS)
def test_fast_sse_decoder_matches_full_decoder_for_any_split(wire):
    import random

    from loadkit.client.sse import FastSSEDecoder, SSEDecoder

    def run(decoder, pieces):
        events = [e for p in pieces for e in decoder.feed(p)] + decoder.close()
        return [(e.data, e.event) for e in events]

    expected = run(SSEDecoder(), [wire])
    rng = random.Random(len(wire))
    for _ in range(60):
        cuts = sorted(rng.sample(range(1, len(wire)), k=min(len(wire) - 1, rng.randrange(0, 10))))
        pieces = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
        assert run(FastSSEDecoder(), pieces) == expected
    # One read per event (the decoder's single-event fast path), as engines write them.
    events = [e + b"\n\n" for e in wire.split(b"\n\n")]
    events[-1] = events[-1][:-2]
    assert run(FastSSEDecoder(), [e for e in events if e]) == expected


def test_fast_sse_decoder_raises_on_invalid_utf8():
    from loadkit.client.sse import FastSSEDecoder

    with pytest.raises(UnicodeDecodeError):
        FastSSEDecoder().feed(b"data: \xff\xfe\n\n")
    dec = FastSSEDecoder()
    dec.feed(b"data: ok\n\ndata: \xe2\x82")  # cut inside a character, then the stream ends
    with pytest.raises(UnicodeDecodeError):
        dec.close()


def test_gevent_deadline_guard_is_cancelled_on_every_exit():
    """Only meaningful under gevent (run by the test below): after a request ends, no timer of
    its deadline guard may fire into the greenlet that goes on running."""
    from loadkit.client.hubreads import is_gevent_socket

    probe = socket.socket()
    patched = is_gevent_socket(probe)
    probe.close()
    if not patched:
        pytest.skip("socket is not gevent's here")
    import gevent

    writes = [(0, delta("a")), (0, DONE), (0, END_CHUNK)]
    with serve(Script(writes=writes, close=False)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ, timeouts=Timeouts(first_token_s=0.1, total_s=0.2))
        gevent.sleep(0.3)  # a stray guard would raise TimeoutError here
    assert rec.outcome == t.OK
    with serve(Script(writes=[(0.5, delta("late"))])) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ, timeouts=Timeouts(first_token_s=0.1, total_s=0.2))
        gevent.sleep(0.3)
    assert rec.outcome == t.TIMEOUT_FIRST_TOKEN

    def killed() -> None:
        run_request(OpenAIAdapter(), srv.url, REQ, sink=seen.append)

    seen: list = []
    with serve(Script(writes=[(0, delta("a")), (1.0, delta("b"))])) as srv:
        g = gevent.spawn(killed)
        gevent.sleep(0.2)
        g.kill()
    assert seen and seen[0].outcome == t.CANCELLED and len(seen[0].event_t_ns) == 1


def test_gevent_arrival_queue_keeps_stamps_and_queued_events():
    """Under gevent reads are queued and decoded in batches: stamps must still be the
    arrival times, and events queued when a limit fires must still be in the record."""
    from loadkit.client.hubreads import ArrivalQueue

    probe = socket.socket()
    usable = ArrivalQueue.usable(probe)
    probe.close()
    if not usable:
        pytest.skip("socket is not gevent's here")
    writes = [(0.0, ROLE)] + [(0.004, delta(f"w{i}")) for i in range(60)] + [(0.0, DONE), (0.0, END_CHUNK)]
    with ScriptedServerProcess(Script(writes=writes)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ)
        truth = srv.write_times()
    assert rec.outcome == t.OK, rec.error
    assert len(rec.event_t_ns) == 60
    for measured, sent in zip(rec.event_t_ns, truth[1:61], strict=True):
        assert 0 <= measured - sent < 5_000_000
    stall = [(0.0, delta("a"))] + [(0.005, delta("b"))] * 5 + [(2.0, delta("late"))]
    with serve(Script(writes=stall)) as srv:
        rec = run_request(OpenAIAdapter(), srv.url, REQ, timeouts=Timeouts(first_token_s=1, total_s=0.4))
    assert rec.outcome == t.TIMEOUT_TOTAL
    assert len(rec.event_t_ns) == 6  # the five queued after the first were decoded at the timeout


def test_empty_ok_body_ends_at_once_on_either_read_path():
    """A 200 with ``Content-Length: 0`` on a kept-alive connection has nothing to read: the
    request ends at the head, the same on the direct and the hub-queued path (this module runs
    again under gevent below). The queued path used to wait for the first-token limit."""
    import time

    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\n\r\n"
    with serve(Script(head=head, writes=[], close=False)) as srv:
        started = time.perf_counter()
        rec = run_request(OpenAIAdapter(), srv.url, REQ, timeouts=Timeouts(first_token_s=3, total_s=5))
        took = time.perf_counter() - started
    assert rec.outcome == t.INCOMPLETE and rec.event_t_ns == []  # no end marker, no finish_reason
    assert took < 1.5 and rec.t_end_ns == rec.t_headers_ns


@pytest.mark.slow
def test_timer_under_gevent_monkey_patching():
    """The whole module again with gevent's sockets (what Locust runs): the cooperative
    deadline guard and gevent's recvmsg take the place of socket timeouts and recv."""
    import subprocess
    import sys

    code = (
        "from gevent import monkey; monkey.patch_all()\n"
        "import sys, pytest\n"
        "sys.exit(pytest.main(['tests/client/test_timer.py', '-q', '-x', '-p', 'no:cacheprovider', '-p', 'no:anyio',"
        " '-p', 'no:trio', '-k', 'not under_gevent_monkey', '-rs']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "socket is not gevent's" not in proc.stdout


def test_retry_after_header_values():
    from loadkit.client.timer import retry_after_seconds

    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert 0 <= retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") <= 1.0  # a date in the past: no wait


def test_first_token_read_holding_two_events_is_counted(monkeypatch):
    """A first token that came in a read with the next one has a late TTFT stamp: the
    process counts such first tokens apart (the self-check judges TTFT by them)."""
    from loadkit.client import stamps
    from loadkit.client.events import EventDecoder
    from loadkit.client.httpstream import BodyReader
    from loadkit.engines.base import AdapterOptions
    from loadkit.engines.openai import OpenAIAdapter
    from loadkit.records import RequestRecord

    counters = stamps.ReadCounters()
    monkeypatch.setattr(stamps, "READS", counters)
    monkeypatch.setattr("loadkit.client.events.READS", counters)
    adapter = OpenAIAdapter(AdapterOptions(model="m", api="completions"))
    event = b'data: {"choices":[{"index":0,"text":"x","finish_reason":null}]}\n\n'

    def run(reads: list[bytes]) -> RequestRecord:
        rec = RequestRecord(request_id="r", engine="e", adapter="openai")
        events, body = EventDecoder(adapter, rec), BodyReader(chunked=False, remaining=None)
        for t_read, data in enumerate(reads):
            events.feed(t_read, body.feed(data))
        return rec

    run([event, event, event])  # one event per read
    assert (counters.firsts, counters.first_coalesced, counters.coalesced) == (1, 0, 0)
    rec = run([event + event, event])  # the first read holds the first two tokens
    assert (counters.firsts, counters.first_coalesced, counters.coalesced) == (2, 1, 1)
    assert rec.event_t_ns == [0, 0, 1] and rec.coalesced_reads == 1
    run([event, event + event])  # coalesced later: not the first token's
    assert (counters.firsts, counters.first_coalesced, counters.coalesced) == (3, 1, 2)


def test_coalesced_reads_are_counted_with_their_own_wait(monkeypatch):
    """Each read's own wait decides whether its coalescing is the client's: the flag comes
    with the read (hub callbacks stamp many sockets before any greenlet decodes, so the
    process-wide flag of the newest read would be another socket's by then)."""
    from loadkit.client import stamps
    from loadkit.client.events import EventDecoder
    from loadkit.client.httpstream import BodyReader
    from loadkit.engines.base import AdapterOptions
    from loadkit.engines.openai import OpenAIAdapter
    from loadkit.records import RequestRecord

    counters = stamps.ReadCounters()
    monkeypatch.setattr(stamps, "READS", counters)
    monkeypatch.setattr("loadkit.client.events.READS", counters)
    adapter = OpenAIAdapter(AdapterOptions(model="m", api="completions"))
    event = b'data: {"choices":[{"index":0,"text":"x","finish_reason":null}]}\n\n'
    rec = RequestRecord(request_id="r", engine="e", adapter="openai")
    events, body = EventDecoder(adapter, rec), BodyReader(chunked=False, remaining=None)
    counters.last_late = True  # the newest read elsewhere waited: not this stream's business
    reads = [(1, event + event, True), (2, event, True), (3, event + event + event, False), (4, event, False)]
    for t_read, data, late in reads:
        events.feed(t_read, body.feed(data), late)
    assert (counters.events, counters.coalesced, counters.coalesced_events) == (7, 2, 5)
    assert (counters.late_coalesced, counters.late_coalesced_events) == (1, 2)
    assert (counters.firsts, counters.first_coalesced, counters.first_late_coalesced) == (1, 1, 1)
    assert counters.counts() == (0, 0, 0, 2, 1, 1, 7, 5, 1, 2, 1)
