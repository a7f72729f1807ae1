"""Shipping a raw log in chunks: whole lines only, resends skipped, gaps refused; the clock
offset from the request/reply sample of least round trip."""

from __future__ import annotations

import pytest

from loadkit.stats import rawship
from loadkit.stats.rawship import ClockEstimate, ShippedLog, ShipReader


def ship_all(reader: ShipReader, log: ShippedLog, limit: int) -> list[str]:
    results = []
    while (chunk := reader.next_chunk(limit)) is not None:
        results.append(log.receive(*chunk))
        reader.ack(log.held_bytes, results[-1] == "gap")
    return results


def test_chunks_carry_whole_lines_and_the_copy_is_byte_equal(tmp_path):
    src = tmp_path / "requests.worker1.jsonl"
    lines = [b'{"i": %d, "pad": "%s"}\n' % (i, b"x" * (i % 37)) for i in range(500)]
    src.write_bytes(b"".join(lines) + b'{"half": ')  # a line still being written
    reader, log = ShipReader(src), ShippedLog(str(tmp_path / "copy.jsonl"))
    results = ship_all(reader, log, limit=1000)
    log.close()
    assert set(results) == {"appended"} and len(results) > 10
    assert (tmp_path / "copy.jsonl").read_bytes() == b"".join(lines)
    assert log.held_lines == 500
    with src.open("ab") as f:  # the line completes: the next chunk starts at it
        f.write(b"1}\n")
    assert reader.next_chunk() == (log.held_bytes, b'{"half": 1}\n')


def test_a_line_longer_than_a_chunk_goes_whole(tmp_path):
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"a" * 5000 + b"\n" + b"b\n")
    offset, data = ShipReader(src).next_chunk(limit=100)
    assert offset == 0 and data.endswith(b"\n") and data.count(b"\n") >= 1 and len(data) >= 5001


def test_resent_chunks_are_skipped_and_a_gap_is_refused_then_filled(tmp_path):
    log = ShippedLog(str(tmp_path / "copy.jsonl"))
    assert log.receive(0, b"a\nb\n") == "appended"
    assert log.receive(0, b"a\nb\n") == "duplicate"  # a resend: nothing written twice
    assert log.receive(8, b"e\n") == "gap"  # c, d lost on the way: not written past a hole
    assert log.receive(2, b"b\nc\nd\n") == "appended"  # overlaps: only the new part
    assert log.receive(8, b"e\n") == "appended"
    log.close()
    assert (tmp_path / "copy.jsonl").read_bytes() == b"a\nb\nc\nd\ne\n"
    assert (log.held_lines, log.gaps, log.duplicates) == (5, 1, 2)


def test_a_refused_chunk_makes_the_worker_send_again_from_what_is_held(tmp_path):
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"".join(b"line %d\n" % i for i in range(100)))
    reader, log = ShipReader(src), ShippedLog(str(tmp_path / "copy.jsonl"))
    lost = reader.next_chunk(limit=64)  # never arrives
    assert lost is not None
    nxt = reader.next_chunk(limit=64)
    assert nxt is not None and log.receive(*nxt) == "gap"
    reader.ack(log.held_bytes, gap=True)
    assert reader.sent == 0 and reader.resends == 1
    ship_all(reader, log, limit=64)
    log.close()
    assert (tmp_path / "copy.jsonl").read_bytes() == src.read_bytes()
    log.worker_bytes = src.stat().st_size
    assert log.complete()


def test_the_window_bounds_what_is_sent_before_an_acknowledgement(tmp_path, monkeypatch):
    monkeypatch.setattr(rawship, "WINDOW_BYTES", 100)
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"x" * 49 + b"\n" + b"y" * 49 + b"\n" + b"z\n")
    reader = ShipReader(src)
    reader.next_chunk(limit=50)
    assert not reader.window_full()
    reader.next_chunk(limit=50)
    assert reader.window_full()
    reader.ack(50, gap=False)
    assert not reader.window_full()


def test_clock_offset_is_the_least_round_trip_sample():
    clock = ClockEstimate()
    # Master 5 ms ahead. A slow sample (40 ms out, 2 ms back) first, then a quick one.
    clock.add(t1=0, t2=45_000_000, t3=45_000_000, t4=42_000_000)
    assert clock.offset_ns == 24_000_000  # wrong by half the asymmetry: the slow sample
    clock.add(t1=100_000_000, t2=105_500_000, t3=105_600_000, t4=101_100_000)
    d = clock.describe()
    assert d["samples"] == 2 and d["rtt_ms"] == pytest.approx(1.0)
    assert d["offset_ms"] == pytest.approx(5.0) and d["uncertainty_ms"] == pytest.approx(0.5)
    clock.add(t1=10, t2=5, t3=5, t4=5)  # t4 before t1: a clock stepped, no sample
    assert clock.samples == 2


def test_an_offset_beyond_its_uncertainty_is_warned_of_naming_the_figures_it_moves():
    clocks = {
        "worker0": ClockEstimate(3, 150_000, 800_000).describe(),  # 0.15 ms: one machine
        "worker1": ClockEstimate(8, -40_000_000, 6_000_000).describe(),  # 40 ms, ± 3 ms
        "worker2": ClockEstimate(8, 4_000_000, 6_000_000).describe(),
    }  # 4 ms, ± 3 ms: within
    (warning,) = rawship.clock_warnings(clocks)
    assert warning.startswith(
        "worker1's wall clock is -40.0 ms off the master's (± 3.0 ms) after the correction"
    )
    assert "requests_per_s" in warning and "delivered" in warning
    assert rawship.clock_warnings({"worker0": ClockEstimate().describe()}) == []  # not measured

    corrected = {**clocks["worker1"], "applied_ms": -39.0}  # corrected at its start: 1 ms left
    assert rawship.clock_warnings({"worker1": corrected}) == []


def test_a_window_lost_whole_is_sent_again_from_the_acknowledged_offset_after_a_timeout(tmp_path):
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"".join(b"line %d\n" % i for i in range(100)))
    reader, log = ShipReader(src), ShippedLog(str(tmp_path / "copy.jsonl"))
    first = reader.next_chunk(limit=64)
    assert first is not None and log.receive(*first) == "appended"
    reader.ack(log.held_bytes, gap=False)
    held = reader.acked
    reader.next_chunk(limit=64)  # the wait for an answer starts with this send
    since = reader.waiting_since
    while reader.next_chunk(limit=64) is not None:  # all lost: no answer comes back
        pass
    assert reader.sent == src.stat().st_size
    assert not reader.resend_due(after=5.0, now=since + 4.9)
    assert reader.resend_due(after=5.0, now=since + 5.0)
    assert (reader.sent, reader.resends) == (held, 1)
    assert not reader.resend_due(after=5.0, now=since + 5.1)  # the wait starts again
    ship_all(reader, log, limit=64)
    log.close()
    assert (tmp_path / "copy.jsonl").read_bytes() == src.read_bytes() and log.duplicates == 0


def test_a_late_answer_after_a_resend_moves_the_send_offset_past_what_is_held(tmp_path):
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"a\nb\nc\n")
    reader = ShipReader(src)
    reader.next_chunk(limit=4)  # "a\nb\n"
    assert reader.resend_due(after=0.0)
    assert reader.sent == 0
    reader.ack(4, gap=False)  # the first send did arrive
    assert (reader.sent, reader.acked) == (4, 4)
    assert reader.next_chunk() == (4, b"c\n")


def test_a_resume_continues_only_the_same_host_s_same_log(tmp_path):
    src = tmp_path / "r.jsonl"
    src.write_bytes(b"".join(b"line %d\n" % i for i in range(50)))
    log = ShippedLog(str(tmp_path / "copy.jsonl"), node="pod-1")
    reader = ShipReader(src)
    chunk = reader.next_chunk(limit=100)
    assert chunk is not None
    log.receive(*chunk)
    size = src.stat().st_size
    assert log.resume("pod-2", size) is None  # another host: its file is another log
    assert log.resume("pod-1", log.held_bytes - 1) is None  # shorter than what is held
    answer = log.resume("pod-1", size)
    assert answer is not None
    held, digest = answer
    assert held == log.held_bytes and rawship.prefix_matches(src, held, digest)
    other = tmp_path / "other.jsonl"
    other.write_bytes(b"LINE 0\n" + src.read_bytes()[7:])
    assert not rawship.prefix_matches(other, held, digest)
    assert not rawship.prefix_matches(tmp_path / "gone.jsonl", held, digest)
    resumed = ShipReader(src, start=held)
    ship_all(resumed, log, limit=100)
    log.close()
    assert (tmp_path / "copy.jsonl").read_bytes() == src.read_bytes() and log.duplicates == 0
    assert log.complete() and log.describe()["resumed_at"] == held
